"""Redaction: every secret shape is removed, and secrets planted in transcripts never reach the model server."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_llm_server import FakeLLM  # noqa: E402
from test_relevance import git_repo, make_cc_session, make_db_agent, make_file_agent  # noqa: E402

from occd.relevance.redact import redact, squash  # noqa: E402

SECRETS = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "openai-legacy": "sk-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0",
    "anthropic": "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp",
    "github": "ghp_1234567890abcdefghijABCDEFGHIJ123456",
    "github-oauth": "gho_abcdefghijklmnopqrstuvwxyz0123456789",
    "github-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "google": "AIzaSyA-1234567890abcdefghijklmnopqrstu",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
    "stripe": "sk_live_51HcDeFgHiJkLmNoPqRsTuVw",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
CONTEXT_SECRETS = {  # value only secret in its context
    "bearer": ("curl -H 'Authorization: Bearer {}' https://api.example.com", "tok3nV4lue-9f8e7d6c5b4a"),
    "url-password": ("clone https://deploy:{}@git.example.com/repo.git", "Hunter2Passw0rd"),
    "api_key": ("set api_key={} in the env", "qwerty987654321zz"),
    "password": ("db password: {} for staging", "Tr0ub4dor&3xyz"),
    "private-key": ("key:\n-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n", "MIIEowIBAAKCAQEAx9kq"),
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_provider_tokens_redacted(name):
    out = redact(f"use {SECRETS[name]} for the call")
    assert SECRETS[name] not in out and "[REDACTED]" in out and out.startswith("use ")


@pytest.mark.parametrize("name", sorted(CONTEXT_SECRETS))
def test_context_secrets_redacted(name):
    tmpl, value = CONTEXT_SECRETS[name]
    out = redact(tmpl.format(value))
    assert value not in out and "REDACTED" in out


def test_plain_text_survives_and_squash_cuts_after_redacting():
    text = "refactor the webhook handler in api/hooks.py (commit 3f2a9c1) for 2 tokens"
    assert redact(text) == text
    long = "x " * 30 + SECRETS["anthropic"]
    cut = squash(long, 70)  # the cut falls inside the key: it was redacted before cutting
    assert "sk-ant" not in cut and len(cut) <= 70


def _all_secret_values():
    return list(SECRETS.values()) + [v for _, v in CONTEXT_SECRETS.values()]


@pytest.mark.slow
def test_planted_secrets_never_reach_the_model_server(isolated_env):
    """Secrets in first and latest user messages of every session kind (file era, database era, Claude Code),
    and in the task itself: the fake server's every request body is searched for each secret."""
    from occd.config import LLMSettings, load_settings
    from occd.relevance.select import select_session

    home = isolated_env
    repo = git_repo(home / "src" / "svc")
    now = time.time()
    plants = [f"use {v} now" for v in SECRETS.values()] + [t.format(v) for t, v in CONTEXT_SECRETS.values()]
    state = home / ".openclaw"
    make_file_agent(state, "main", [
        {"sid": f"oc-{i}", "users": [f"fix webhook {p}", f"then deploy {plants[-1 - i]}"], "cwd": str(repo),
         "mtime": now - 600 - i} for i, p in enumerate(plants)])
    make_db_agent(state, "ops", [{"sid": "db-s", "users": [f"rotate keys {p}" for p in plants[:3]], "cwd": str(repo),
                                  "mtime": now - 900}])
    for i, p in enumerate(plants):
        make_cc_session(home, repo, f"cc-{i}", [f"webhook work {p}", f"more {plants[i - 1]}"], "main", now - 1200 - i)
    srv = FakeLLM(rules=[("webhook", 0.9)]).start()
    try:
        s = load_settings()
        s.llm = LLMSettings(model="openai/fake-model", api_base=srv.base_url, batch_size=10)
        r = select_session(s, task=f"continue the webhook fix, key {SECRETS['openai']} password: hunter2hunter2",
                           repo=repo, now=now, open_ledger=False)
    finally:
        srv.stop()
    assert r.relevance.method == "model" and r.relevance.calls == len(srv.requests) >= 4
    assert len(r.sessions) == 2 * len(plants) + 1
    bodies = b"\n".join(srv.raw_bodies).decode()
    assert "webhook" in bodies and "[REDACTED" in bodies
    for v in _all_secret_values() + ["hunter2hunter2"]:
        for piece in {v, v[:12], v[-12:]}:
            assert piece not in bodies, f"secret piece {piece!r} left the machine"
    # each session is a few hundred characters at most
    for body in srv.requests:
        for line in body["messages"][1]["content"].splitlines():
            if line.startswith("["):
                assert len(line) <= 410
