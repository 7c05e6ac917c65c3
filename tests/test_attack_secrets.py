"""Secrets never leave the machine (issue 15, item 6): a corpus of real-world secret formats, each generated fresh
(random values in the provider's documented shape — no real secret is copied here), planted in text the way
they show up in sessions (env lines, shell commands, config, chat); redaction must leave none of the secret's
random part. Plus a hypothesis property over random surrounding text, and the paths that print or send text
(select's task and labels)."""

from __future__ import annotations

import random
import re
import string

import pytest
from hypothesis import given, settings, strategies as st

from occd.relevance.redact import redact, squash

_ALPH = {"A": string.ascii_letters + string.digits, "h": "0123456789abcdef", "H": "0123456789ABCDEF",
         "d": string.digits, "b": string.ascii_letters + string.digits + "-_", "U": string.ascii_uppercase + string.digits,
         "l": string.ascii_lowercase + string.digits, "p": string.ascii_letters + string.digits + "!%^*-_+~",
         "B": string.ascii_letters + string.digits + "+/"}

# (name, text with {X:n} placeholders: the generated parts are the secret that must not survive)
CORPUS = [
    ("anthropic", "ANTHROPIC_API_KEY=sk-ant-api03-{b:93}AA"), ("openai", "key sk-proj-{b:48}"),
    ("openai-legacy", "OPENAI_API_KEY=sk-{A:48}"), ("openai-svc", "sk-svcacct-{b:60}"),
    ("openrouter", "sk-or-v1-{h:64}"), ("groq", "gsk_{A:52}"), ("perplexity", "pplx-{A:48}"), ("xai", "xai-{A:80}"),
    ("replicate", "r8_{A:37}"), ("huggingface", "hf_{A:34}"), ("mistral", "MISTRAL_API_KEY={A:32}"),
    ("cohere", "CO_API_KEY={A:40}"), ("together", "TOGETHER_API_KEY={h:64}"), ("deepseek", "sk-{h:32}"),
    ("google-api", "AIza{b:35}"), ("google-oauth", "ya29.{b:120}"), ("google-refresh", "1//0{b:60}"),
    ("gcp-sa-key", '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE{B:60}\\n-----END PRIVATE KEY-----\\n"'),
    ("aws-id", "aws_access_key_id = AKIA{U:16}"), ("aws-secret", "aws_secret_access_key = {B:40}"),
    ("aws-session", "AWS_SESSION_TOKEN={B:200}"), ("azure-storage", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={B:86}==;"),
    ("azure-sas", "https://x.blob.core.windows.net/c?sv=2022-11-02&sig={B:43}%3D"), ("azure-client", "AZURE_CLIENT_SECRET={p:40}"),
    ("alibaba", "LTAI{A:20}"), ("tencent", "AKID{A:32}"), ("github-pat", "ghp_{A:36}"), ("github-oauth", "gho_{A:36}"),
    ("github-app", "ghs_{A:36}"), ("github-fine", "github_pat_{A:22}_{A:59}"), ("github-refresh", "ghr_{A:76}"),
    ("gitlab", "glpat-{b:20}"), ("gitlab-deploy", "gldt-{b:20}"), ("gitlab-runner", "glrt-{b:20}"),
    ("bitbucket", "ATBB{A:32}"), ("atlassian", "ATATT3{b:180}"), ("slack-bot", "xoxb-{d:12}-{d:12}-{A:24}"),
    ("slack-user", "xoxp-{d:12}-{d:12}-{d:12}-{h:32}"), ("slack-app", "xapp-1-{U:11}-{d:13}-{h:64}"),
    ("slack-webhook", "https://hooks.slack.com/services/T{U:8}/B{U:8}/{A:24}"),
    ("discord-bot", "M{A:23}.{b:6}.{b:38}"), ("discord-webhook", "https://discord.com/api/webhooks/{d:18}/{b:68}"),
    ("telegram", "TELEGRAM={d:10}:{b:35}"), ("telegram-bare", "bot token {d:10}:{b:35}"),
    ("stripe-live", "sk_live_{A:99}"), ("stripe-test", "sk_test_{A:99}"), ("stripe-restricted", "rk_live_{A:99}"),
    ("stripe-webhook", "whsec_{A:32}"), ("square", "sq0atp-{b:22}"), ("square-secret", "sq0csp-{b:43}"),
    ("paypal", "access_token$production${l:16}${h:32}"), ("razorpay", "rzp_live_{A:14}"), ("flutterwave", "FLWSECK-{h:32}-X"),
    ("shopify", "shpat_{h:32}"), ("shopify-secret", "shpss_{h:32}"), ("sendgrid", "SG.{b:22}.{b:43}"),
    ("mailgun", "key-{h:32}"), ("mailchimp", "MAILCHIMP_KEY={h:32}-us12"), ("twilio-sid", "TWILIO_AUTH_TOKEN={h:32}"),
    ("twilio-key", "SK{h:32}"), ("postmark", "POSTMARK_SERVER_TOKEN={h:8}-{h:4}-{h:4}-{h:4}-{h:12}"),
    ("npm", "//registry.npmjs.org/:_authToken=npm_{A:36}"), ("pypi", "pypi-AgEIcHlwaS5vcmc{b:70}"),
    ("rubygems", "rubygems_{h:48}"), ("nuget", "oy2{l:43}"), ("docker", "dckr_pat_{b:27}"),
    ("docker-config", '"auths": {{"https://index.docker.io/v1/": {{"auth": "{B:40}"}}}}'),
    ("artifactory", "AKCp{A:69}"), ("buildkite", "bkua_{h:40}"), ("circleci", "CCIPAT_{A:22}_{h:40}"),
    ("sonar", "squ_{h:40}"), ("postman", "PMAK-{h:24}-{h:34}"), ("contentful", "CFPAT-{b:43}"),
    ("figma", "figd_{b:40}"), ("linear", "lin_api_{A:40}"), ("notion", "ntn_{A:46}"), ("notion-old", "secret_{A:43}"),
    ("hubspot", "pat-na1-{h:8}-{h:4}-{h:4}-{h:4}-{h:12}"), ("digitalocean", "dop_v1_{h:64}"),
    ("digitalocean-oauth", "doo_v1_{h:64}"), ("doppler", "dp.pt.{A:43}"), ("fly", "fo1_{b:43}"),
    ("pulumi", "pul-{h:40}"), ("supabase", "sbp_{h:40}"), ("planetscale", "pscale_tkn_{b:43}"),
    ("planetscale-pw", "pscale_pw_{b:43}"), ("vault", "hvs.{b:90}"), ("age", "AGE-SECRET-KEY-1{U:58}"),
    ("newrelic", "NRAK-{U:27}"), ("dynatrace", "dt0c01.{U:24}.{U:64}"), ("grafana", "glsa_{A:32}_{h:8}"),
    ("databricks", "dapi{h:32}"), ("datadog", "DD_API_KEY={h:32}"), ("sentry-dsn", "https://{h:32}@o123456.ingest.sentry.io/7654321"),
    ("sentry-token", "sntrys_{b:80}"), ("posthog", "phx_{A:43}"), ("mapbox", "sk.eyJ1Ijoi{b:60}.{b:22}"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJ{b:40}.{b:43}"), ("tailscale", "tskey-auth-{A:17}-{A:33}"),
    ("cloudflare", "CLOUDFLARE_API_TOKEN={b:40}"), ("vercel", "VERCEL_TOKEN={A:24}"), ("netlify", "nfp_{A:40}"),
    ("heroku", "HEROKU_API_KEY={h:8}-{h:4}-{h:4}-{h:4}-{h:12}"), ("okta", "OKTA_API_TOKEN=00{b:40}"),
    ("launchdarkly", "LD_SDK_KEY=sdk-{h:8}-{h:4}-{h:4}-{h:4}-{h:12}"), ("algolia", "ALGOLIA_ADMIN_KEY={h:32}"),
    ("facebook", "EAACEdEose0cBA{A:60}"), ("twitter-bearer", "AAAAAAAAAAAAAAAAAAAAA{A:60}"),
    ("dropbox", "sl.{b:130}"), ("rsa-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE{B:64}\n{B:64}\n-----END RSA PRIVATE KEY-----"),
    ("openssh-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl{B:64}\n-----END OPENSSH PRIVATE KEY-----"),
    ("pgp-key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQ{B:64}\n-----END PGP PRIVATE KEY BLOCK-----"),
    ("hex-64", "export SIGNING={h:64}"), ("hex-64-bare", "the key {h:64} works"), ("hex-32", "token {h:32}"),
    # passwords the way people and tools write them
    ("db-pass", "DB_PASS={p:14}"), ("pass", "PASS={p:10}"), ("password-env", "POSTGRES_PASSWORD={p:16}"),
    ("session-key", "SESSION_KEY={p:24}"), ("session-secret", "SESSION_SECRET={A:32}"), ("cookie", "Cookie: sessionid={A:32}; csrftoken={A:32}"),
    ("redis-url", "redis://:{A:16}@cache.internal:6379/0"), ("postgres-url", "postgres://app:{A:16}@db:5432/app"),
    ("mongodb-url", "mongodb+srv://admin:{A:16}@cluster0.abcd.mongodb.net/x"), ("amqp-url", "amqp://guest:{A:12}@mq:5672/"),
    ("url-at-in-password", "https://user:{A:4}@{A:4}@host.example/x"), ("jdbc", "jdbc:mysql://db/app?user=app&password={A:14}"),
    ("odbc", "Server=db;Database=x;User Id=sa;Password={p:14};"), ("curl-u", "curl -u alice:{A:14} https://api.example"),
    ("curl-user", "curl --user 'bob:{A:14}' https://api.example"), ("sshpass", "sshpass -p '{A:12}' ssh root@10.0.0.2"),
    ("mysql-p", "mysql -h db -uroot -p{A:12} app"), ("mysqldump", "mysqldump -u root -p{A:12} --all-databases"),
    ("said", "my password is {A:12}"), ("said-wifi", "the wifi password is {A:12}"), ("said-pin", "My PIN: {d:6}{A:4}"),
    ("basic-auth", "Authorization: Basic {B:32}="), ("bearer", "Authorization: Bearer {b:40}"),
    ("x-api-key", "-H 'x-api-key: {A:40}'"), ("cli-flag", "tool --api-key {A:32}"), ("cli-password", "psql --password={A:14}"),
    ("netrc", "machine api.example.com login bob password {A:14}"), ("yaml-secret", "client_secret: {A:32}"),
    ("json-secret", '{{"apiKey": "{A:32}"}}'), ("kube", "client-key-data: {B:80}"), ("htpasswd-like", "ADMIN_PASSWORD='{p:14}'"),
]


def fill(template: str, rng: random.Random) -> tuple[str, list[str]]:
    parts: list[str] = []

    def sub(m):
        v = "".join(rng.choice(_ALPH[m.group(1)]) for _ in range(int(m.group(2))))
        parts.append(v)
        return v

    text = re.sub(r"\{([AhdbUlpHB]):(\d+)\}", sub, template).replace("{{", "{").replace("}}", "}")
    return text, parts


def leaks(out: str, parts: list[str]) -> list[str]:
    """Any generated part of at least 4 characters still in the output, or an 8-character piece of a longer one."""
    bad = []
    for p in parts:
        if len(p) >= 4 and p in out:
            bad.append(p)
        elif len(p) >= 16 and any(p[i:i + 8] in out for i in range(0, len(p) - 8, 4)):
            bad.append(p)
    return bad


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 100 and len({n for n, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("name,template", CORPUS, ids=[n for n, _ in CORPUS])
def test_every_format_is_redacted(name, template):
    rng = random.Random(name)
    for _ in range(5):
        text, parts = fill(template, rng)
        out = redact(f"while debugging I ran: {text} and it worked")
        assert not leaks(out, parts), (name, out)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), before=st.text(max_size=60), after=st.text(max_size=60),
       sep=st.sampled_from([" ", "\n", "\t", " `", "(", ": "]))
@pytest.mark.slow
def test_no_planted_secret_survives(data, before, after, sep):
    name, template = data.draw(st.sampled_from(CORPUS))
    text, parts = fill(template, random.Random(data.draw(st.integers(0, 2**32))))
    planted = f"{before}{sep}{text}{sep if sep.strip() != '(' else ')'}{after}"
    out = redact(planted)
    assert not leaks(out, parts), (name, planted, out)
    # squash (what prompts and printed digests use) cuts after redacting: nothing leaks at any limit
    for limit in (20, 80, 400):
        assert not leaks(squash(planted, limit), parts)


PLAIN = ["fix the login page on branch feat/login-v2", "commit 3f2a9c1 broke the build", "see https://example.com/a?b=1",
         "email bob@example.com about the passport renewal", "the session timed out after 30 minutes",
         "git sha 9fceb02d0ae598e95dc970b74767f19372d61af8 is the release"]


@pytest.mark.parametrize("text", PLAIN)
def test_ordinary_text_is_kept(text):
    assert redact(text) == text


def test_select_prints_and_sends_no_secret_from_task_or_label(monkeypatch):
    from occd.relevance.llm import build_messages
    from occd.relevance.select import digest_of
    from occd.relevance.session import Session

    task = "deploy with DB_PASS=Hunter2Hunter2 and redis://:Pw0rdPw0rd@cache"
    msgs = build_messages(task, ["label PASS=Lab3lSecret"])
    blob = repr(msgs)
    for secret in ("Hunter2Hunter2", "Pw0rdPw0rd", "Lab3lSecret"):
        assert secret in task + "PASS=Lab3lSecret"
        assert secret not in blob or secret == "Lab3lSecret"  # the digest is redacted by its maker, see below
    s = Session.__new__(Session)
    for f in ("branch", "label", "first_user_message", "latest_user_task"):
        setattr(s, f, None)
    s.label = "ops PASS=Lab3lSecret"
    s.first_user_message = "use sshpass -p Sup3rS3cret ssh host"
    d = digest_of(s)
    assert "Lab3lSecret" not in d and "Sup3rS3cret" not in d
