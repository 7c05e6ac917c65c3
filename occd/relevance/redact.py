"""Secret redaction: applied to every piece of text before it can leave the machine (model prompts).

Covers API keys and tokens of the common providers, bearer/authorization headers, private key blocks,
passwords in URLs, generic `key=value` / `password: value` pairs and long high-entropy strings. Redaction
errs on the side of removing too much: a lost word costs a little relevance, a leaked key costs a lot.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

# Prefixes that introduce a token in a provider's own format (the rest is random): the whole token goes.
_PREFIXED = (
    r"sk-ant-|sk-or-v1-|sk-proj-|sk-svcacct-|sk-admin-|gsk_|pplx-|xai-|r8_|hf_|api_org_|"
    r"gh[pousr]_|github_pat_|glpat-|gldt-|glrt-|glsa_|glc_|ATBB|ATATT3|ATCTT3|"
    r"dop_v1_|doo_v1_|dor_v1_|dp\.pt\.|dp\.st\.|dp\.ct\.|fo1_|pul-|sbp_|pscale_tkn_|pscale_pw_|pscale_oauth_|"
    r"npm_|pypi-|rubygems_|oy2|CLOJARS_|dckr_pat_|AKCp|bkua_|CCIPAT_|squ_|sqp_|sqa_|figd_|lin_api_|ntn_|"
    r"secret_|shpat_|shpss_|shpca_|shppa_|sq0atp-|sq0csp-|EAAA|SG\.|key-|pat-na1-|pat-eu1-|PMAK-|CFPAT-|"
    r"dapi|hvs\.|hvb\.|hvr\.|AGE-SECRET-KEY-1|NRAK-|NRJS-|NRII-|dt0c01\.|rzp_live_|rzp_test_|FLWSECK-|FLWSECK_TEST-|"
    r"sk_live_|sk_test_|rk_live_|rk_test_|pk_live_|whsec_|xox[abposrce]-|xapp-|AIza|ya29\.|1//0|"
    r"LTAI|AKID|sl\.|EAACEdEose0cBA|AAAAAAAAAAAAAAAAAAAAA|mfa\.|sntrys_|sntryu_|phc_|phx_|ghr_|vercel_|"
    r"nfp_|cfat_|cfut_|apify_api_|ops_|tskey-|glptt-|shp_|ssh-ed25519-sk|access_token\$production\$"
)

# (name, pattern, replacement); order matters: specific provider formats first, generic rules last.
_RULES: list[tuple[str, re.Pattern, str]] = [
    ("private-key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
                               re.S), "[REDACTED PRIVATE KEY]"),
    ("prefixed", re.compile(r"(?<![A-Za-z0-9])(?:" + _PREFIXED + r")[A-Za-z0-9_\-.=+/$:]{8,}"), MARK),
    ("openai", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{16,}"), MARK),
    ("aws-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), MARK),
    ("discord-bot", re.compile(r"\b[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}"), MARK),
    ("telegram-bot", re.compile(r"\b\d{8,10}:[A-Za-z0-9_\-]{35}\b"), MARK),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"), MARK),
    ("discord-webhook", re.compile(r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_\-]+"), MARK),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MARK),
    ("mapbox", re.compile(r"\b[ps]k\.eyJ[A-Za-z0-9_\-.]{20,}"), MARK),
    ("authorization", re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|x-auth-token|cookie|set-cookie)"
                                 r"(\s*[:=]\s*)(?:(bearer|basic|token|digest|negotiate)\s+)?[^\s\"',]+(?:;\s*[^\s\"',]+)*"),
     r"\1\2[REDACTED]"),
    ("bearer", re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 [REDACTED]"),
    # scheme://user:password@host — the password may itself hold '@' (the last '@' before the host ends it)
    ("url-password", re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/:@]*:)[^\s/]*@(?=[^\s@/]*(?:[/\s?#\"']|$))"),
     r"\1[REDACTED]@"),
    ("url-param", re.compile(r"(?i)([?&;](?:password|passwd|pwd|pass|token|access_token|api_key|apikey|key|secret|"
                             r"sig|signature|client_secret|auth)=)[^&\s\"'#;]+"), r"\1[REDACTED]"),
    ("conn-string", re.compile(r"(?i)\b((?:password|pwd|accountkey|sharedaccesskey|secret)\s*=\s*)[^;\s\"']+"),
     r"\1[REDACTED]"),
    ("netrc", re.compile(r"(?i)\b(machine\s+\S+\s+login\s+\S+\s+password\s+)\S+"), r"\1[REDACTED]"),
    ("curl-user", re.compile(r"(\s(?:-u|--user|--proxy-user)\s*['\"]?[^\s:'\"]*:)[^\s'\"]+"), r"\1[REDACTED]"),
    ("sshpass", re.compile(r"(?i)\b(sshpass\s+(?:-\w+\s+)*-p\s*)['\"]?\S+"), r"\1[REDACTED]"),
    ("mysql-p", re.compile(r"(?i)\b((?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|mysqlimport)\b[^\n|;&]*?\s-p)"
                           r"(?!\s)['\"]?[^\s'\"]+"), r"\1[REDACTED]"),
    ("said-password", re.compile(r"(?i)\b((?:my|the|our|your|his|her|their|root|admin|db|wifi|wi-fi)\s+"
                                 r"(?:\w+\s+)?(?:password|passphrase|passcode|pin|passwd|pw|secret|token|api key|key)"
                                 r"\s*(?:is|was|=|:|->)\s*)[\"'`]?[^\s\"'`]+"), r"\1[REDACTED]"),
    ("pair", re.compile(
        r"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.\-]*(?:api[_\-]?key|apikey|secret|token|passwd|password|pwd|pass|passphrase|"
        r"access[_\-]?key|private[_\-]?key|client[_\-]?secret|credentials?|auth|session[_\-]?key|sessionid|"
        r"session[_\-]?secret|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|_key|dsn|cookie)[A-Za-z0-9_.\-]*)"
        r"([\"']?\s*(?:[:=]|=>|:=)\s*[\"']?)([^\s\"',;}{)]{3,})"), r"\1\2[REDACTED]"),
    ("cli-flag", re.compile(r"(?i)(--(?:api[-_]?key|token|password|passwd|secret|auth|access[-_]?token|client[-_]secret)[= ])"
                            r"['\"]?\S+"), r"\1[REDACTED]"),
    ("hex-key", re.compile(r"(?<![0-9A-Fa-f])(?:[0-9a-f]{32,39}|[0-9a-f]{41,}|[0-9A-F]{32,39}|[0-9A-F]{41,})(?![0-9A-Fa-f])"),
     MARK),
]

# A long run of letters and digits with both cases and a digit: an unknown provider's key.
_ENTROPY = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{32,}={0,2}(?![A-Za-z0-9+/_\-])")


def _looks_random(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


def redact(text: str | None) -> str:
    """`text` with every secret-looking span replaced by [REDACTED]."""
    if not text:
        return ""
    out = text
    for _name, pat, repl in _RULES:
        out = pat.sub(repl, out)
    return _ENTROPY.sub(lambda m: MARK if _looks_random(m.group(0)) else m.group(0), out)


def squash(text: str | None, limit: int) -> str:
    """Redacted, whitespace collapsed, at most `limit` characters (redaction happens before cutting, so a
    cut can never expose the tail of a secret that the patterns would have matched whole)."""
    if not text:
        return ""
    s = redact(text[: max(limit * 8, 2000)])
    s = " ".join(s.split())
    if len(s) > limit:
        s = s[: max(0, limit - 1)].rstrip() + "…"
    return s
