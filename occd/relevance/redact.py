"""Secret redaction: applied to every piece of text before it can leave the machine (model prompts).

Covers API keys and tokens of the common providers, bearer/authorization headers, private key blocks,
passwords in URLs, generic `key=value` / `password: value` pairs and long high-entropy strings. Redaction
errs on the side of removing too much: a lost word costs a little relevance, a leaked key costs a lot.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

# (name, pattern, replacement); order matters: specific provider formats first, generic rules last.
_RULES: list[tuple[str, re.Pattern, str]] = [
    ("private-key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
                               re.S), "[REDACTED PRIVATE KEY]"),
    ("anthropic", re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"), MARK),
    ("stripe", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}"), MARK),
    ("openai", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{16,}"), MARK),
    ("github", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), MARK),
    ("gitlab", re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"), MARK),
    ("aws-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), MARK),
    ("google", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), MARK),
    ("slack", re.compile(r"\bxox[abposrce]-[A-Za-z0-9\-]{8,}"), MARK),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"), MARK),
    ("huggingface", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), MARK),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MARK),
    ("authorization", re.compile(r"(?i)\b(authorization|proxy-authorization)(\s*[:=]\s*)(?:(bearer|basic|token|digest)\s+)?[^\s\"',;]+"),
     r"\1\2[REDACTED]"),
    ("bearer", re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 [REDACTED]"),
    ("url-password", re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+@"), r"\1[REDACTED]@"),
    ("pair", re.compile(
        r"(?i)\b([A-Za-z0-9_.\-]*(?:api[_\-]?key|apikey|secret|token|passwd|password|pwd|passphrase|"
        r"access[_\-]?key|private[_\-]?key|client[_\-]?secret|credential|auth)[A-Za-z0-9_.\-]*)"
        r"([\"']?\s*(?:[:=]|=>)\s*[\"']?)([^\s\"',;}{)]{3,})"), r"\1\2[REDACTED]"),
    ("cli-flag", re.compile(r"(?i)(--(?:api-key|token|password|secret)[= ])\S+"), r"\1[REDACTED]"),
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
