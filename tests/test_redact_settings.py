"""Issue 31.9: credentials in URLs (user:password@host, ?key= / api_key= query tokens) are redacted everywhere occd
prints settings: `config show` (text and --json), `doctor`, `doctor --online`, `logs`, error lines. One function
(occd.config.redact); the class test walks every setting that takes a text value."""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.config import redact

SECRET = "s3cretPW"
TOKEN = "t0kenQQ"
URL = f"https://alice:{SECRET}@llm.example.com/v1?api_key={TOKEN}&model=x"


def run(*args, env=None):
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


def clean(text: str) -> bool:
    return SECRET not in text and TOKEN not in text


@pytest.mark.parametrize("text,want", [
    ("https://user:secret@host/v1", "https://***@host/v1"),
    ("https://tok@host", "https://***@host"),
    ("http://a:p@ss@host:8080/x", "http://***@host:8080/x"),
    ("https://h/v1?key=abc&x=2", "https://h/v1?key=***&x=2"),
    ("https://h/v1?api_key=abc", "https://h/v1?api_key=***"),
    ("https://h/?access_token=zz#frag", "https://h/?access_token=***#frag"),
    ("https://h/?x=1&token=zz", "https://h/?x=1&token=***"),
    ("failed: api_key=abc, retry", "failed: api_key=***, retry"),
    ("https://h/v1?model=gpt", "https://h/v1?model=gpt"),
    ("ollama/llama3", "ollama/llama3"),
    ("~/.openclaw", "~/.openclaw"),
])
def test_redact(text, want):
    assert redact(text) == want
    assert redact([text, {"k": text}]) == [want, {"k": want}]
    assert redact(5) == 5 and redact(None) is None


def _text_settings():
    """Every setting `config show` prints that takes a text value (an env var per setting)."""
    from occd.config import effective_items, load_settings

    return [k for k, v, _ in effective_items(load_settings()) if isinstance(v, str) or v is None
            or (isinstance(v, list) and all(isinstance(x, str) for x in v))]


def test_every_text_setting_holding_a_credential_url_is_redacted_in_config_show(isolated_env, monkeypatch):
    from occd.config import load_settings

    walked = 0
    for key in _text_settings():
        var = "OCCD_" + key.upper().replace(".", "__")
        with monkeypatch.context() as m:
            m.setenv(var, URL)
            try:
                s = load_settings()
            except Exception:  # noqa: BLE001 - OccdError, or pydantic-settings' own for a list
                m.setenv(var, json.dumps([URL]))  # a list of texts
                try:
                    s = load_settings()
                except Exception:  # noqa: BLE001
                    continue  # not a free text (a choice, a path that must exist...): cannot hold a URL
            dumped = json.dumps(s.model_dump(mode="json"))
            if SECRET not in dumped:
                continue
            walked += 1
            for args in (["config", "show"], ["config", "show", "--json"]):
                r = run(*args)
                assert r.exit_code == 0, (key, r.output)
                assert clean(r.output), (key, args, r.output)
            assert "llm.example.com" in run("config", "show", "--json").output
    assert walked >= 3  # llm.api_base, llm.model, state_dir at least


def test_doctor_and_doctor_online_redact_the_api_base(isolated_env, monkeypatch):
    from occd.relevance import extras, llm

    monkeypatch.setenv("OCCD_LLM__API_BASE", URL)
    monkeypatch.setattr(extras, "installed", lambda name: True)
    for args in (["doctor", "--check", "llm"], ["doctor", "--check", "llm", "--json"]):
        r = run(*args)
        assert "llm.example.com" in r.output and clean(r.output), r.output
    monkeypatch.setattr(llm, "probe", lambda cfg, model: (False, f"cannot connect to {URL}: refused"))
    for args in (["doctor", "--online", "--check", "llm"], ["doctor", "--online", "--check", "llm", "--json"]):
        r = run(*args)
        assert r.exit_code == 1 and "llm.example.com" in r.output, r.output
        assert clean(r.output) and clean(r.stderr), (r.output, r.stderr)


def test_logs_never_hold_or_print_a_credential(isolated_env):
    from occd import paths
    from occd.runtime import logging_setup

    logging_setup.setup("INFO", quiet_stderr=True)
    logging.getLogger("occd.relevance").warning("model call to %s failed", URL)
    for h in logging.getLogger("occd.relevance").handlers:
        h.flush()
    log = (paths.log_dir() / "occd.log").read_text()
    assert "llm.example.com" in log and clean(log)
    with open(paths.log_dir() / "occd.log", "a") as fh:  # a line written by an older occd
        fh.write(f"2026-11-27 10:00:00,000 WARNING occd.relevance: call to {URL} failed\n")
    for args in (["logs"], ["logs", "--json"]):
        r = run(*args)
        assert r.exit_code == 0 and "llm.example.com" in r.output and clean(r.output), r.output


def test_an_error_line_redacts_a_credential(isolated_env, tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[llm]\napi_base = "{URL}"\nmodel = 5\n')
    monkeypatch.setenv("OCCD_CONFIG", str(cfg))
    for args in (["config", "show"], ["config", "show", "--json"]):
        r = run(*args)
        assert r.exit_code != 0 and clean(r.output) and clean(r.stderr), (r.output, r.stderr)
