"""Issue 32 (2, 3) and issue 31 (5, 10): health signals monitoring can trust. `status --check` reflects every open
problem, an emergency occd cannot end, a failed scan and a lean view whose slot OpenClaw took back; doctor says
the same; every --json failure writes the one error line to stderr."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from occd.cli.main import cli

SID = "01a20771-bb86-7d1a-8000-000000000001"
KEY = "agent:main:main"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def healthy(isolated_env, monkeypatch):
    """A ledger with one observed session, a running daemon (act mode) with a fresh cycle: `status --check` OK."""
    from occd.ledger import Ledger
    from occd.runtime import lock, statusfile

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", SID, session_key=KEY, compaction_count=0, context_tokens=1000,
                               context_window=200000, now=now - 60)
        led.record_scan(now - 30, 0.1, agents=1, sessions_seen=1)
    monkeypatch.setattr(lock.InstanceLock, "holder", staticmethod(lambda path=None: 4242))
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 20, "started": now - 100,
                                                            "mode": "act"})
    r = run("status", "--check")
    assert r.exit_code == 0 and r.output.startswith("OK"), r.output
    return now


@pytest.mark.parametrize("severity", ["warn", "fail"])
def test_a_problem_row_shown_by_status_session_fails_status_check(healthy, severity):
    from occd.ledger import Ledger

    with Ledger.open() as led:
        led.sync_problems(("verify",), [{"source": "verify", "subject": f"strip:main/{SID}", "code":
                                         "STRIP_PREDICTION_MISS", "severity": severity, "agent_id": "main",
                                         "session_id": SID, "message": "the strip missed its prediction",
                                         "hint": "occd status SESSION"}])
    r = run("status", SID[:13])
    assert r.exit_code == 0 and "PROBLEM (STRIP_PREDICTION_MISS" in r.output
    r = run("status", "--check")
    assert r.exit_code == 1 and "STRIP_PREDICTION_MISS" not in r.output
    assert "the strip missed its prediction" in r.stderr
    r = run("status", "--check", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["success"] is False
    assert [p["code"] for p in out["problems"]] == ["STRIP_PREDICTION_MISS"]
    r = run("doctor", "--check", "problems")
    assert r.exit_code == 1 and "the strip missed its prediction" in r.output


@pytest.mark.parametrize("outcome,dry_run,fails", [("deferred", False, True), ("failed", False, True),
                                                    ("skipped", False, True), ("ok", True, True),
                                                    ("ok", False, False)])
def test_an_emergency_occd_cannot_end_in_act_mode_fails_status_check(healthy, outcome, dry_run, fails):
    from occd.ledger import Ledger

    with Ledger.open() as led:
        led.record_action("rotate", "main", SID, KEY, trigger="auto", outcome=outcome, dry_run=dry_run,
                          reason="spiral: 3 compactions in 10 min", before={"emergency": "SPIRAL"})
    r = run("status")
    assert "SPIRAL" in r.output
    r = run("status", "--check", "--json")
    out = json.loads(r.stdout)
    codes = [p["code"] for p in out["problems"]]
    assert ("EMERGENCY" in codes) is fails and (r.exit_code == 1) is fails, out
    if fails:
        assert SID in r.stderr or KEY in r.stderr


def test_an_emergency_the_agent_moved_on_from_is_not_a_problem(healthy):
    from occd.ledger import Ledger

    with Ledger.open() as led:
        led.record_action("rotate", "main", SID, KEY, trigger="auto", outcome="deferred",
                          before={"emergency": "BLOCKED"}, now=healthy - 50)
        led.record_observation("main", SID, session_key=KEY, compaction_count=0, context_tokens=1200,
                               context_window=200000, last_activity=healthy - 10, now=healthy - 5)
    r = run("status", "--check")
    assert r.exit_code == 0, r.stderr


# ---- 32.3: every --json failure writes the same one line to stderr ----------------------------------------

def test_doctor_json_failure_writes_the_text_forms_line_to_stderr(isolated_env, monkeypatch):
    from occd.health import doctor

    from occd.health import registry

    monkeypatch.setattr(registry, "CHECKS", list(registry.CHECKS))  # where @check registers

    @doctor.check("extra-broken", order=2)
    def _broken(ctx):
        return doctor.Result("extra-broken", "fail", "it broke", "fix it")

    text = run("doctor", "--check", "extra-broken")
    js = run("doctor", "--check", "extra-broken", "--json")
    assert text.exit_code == js.exit_code == 1
    assert json.loads(js.stdout)["error"]["code"] == "DOCTOR_FAILED"
    lines = js.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: 1 check(s) failed: extra-broken") and "fix it" in lines[0]
    assert text.stderr == js.stderr


def test_status_check_json_failure_writes_one_error_line(isolated_env):
    r = run("status", "--check", "--json")  # no daemon: a failure
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["success"] is False
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"Error: {out['error']['message']} (hint: {out['error']['hint']})"


# ---- 31.5: a half-edited openclaw.json is read as OpenClaw reads it; a scan that fails anyway is said ---------

GOOD_CONFIG = {
    "meta": {"lastTouchedVersion": "2026.7.35"},
    "models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": 180000,
                                                       "cost": {"input": 5, "output": 25, "cacheRead": 0.5,
                                                                "cacheWrite": 6.25}}]},
                             "x": {"models": [{"id": "m", "contextWindow": 64000}]}}},
    "agents": {"defaults": {"model": {"primary": "anthropic/claude-opus-4-6"}, "contextTokens": 150000,
                            "workspace": "~/ws", "compaction": {"reserveTokens": 20000, "reserveTokensFloor": 10000}},
               "list": [{"id": "main", "model": "anthropic/claude-opus-4-6", "workspace": "~/ws-main"}]},
    "plugins": {"slots": {"contextEngine": "legacy"}, "load": {"paths": ["/nowhere"]}, "entries": {"a": {}}},
    "gateway": {"port": 18789, "auth": {"token": "t"}},
}
WRONG = [5, "text", [], [5], {}, None, True]


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutated(path, value):
    import copy

    cfg = copy.deepcopy(GOOD_CONFIG)
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return cfg


def _read_everything(state, cfg):
    """Every reader of OpenClaw's config occd has (the context window, the model, the workspace, prices, the lean
    view's slot and load paths, the gateway, the release)."""
    from occd import lean
    from occd.jobs.lean import cache_cost_ratio  # noqa: F401 - (imports the lean job)
    from occd.jobs.scan import _budget_records
    from occd.jobs.scanstate import SessionObs
    from occd.openclaw.gateway import gateway_endpoint
    from occd.openclaw.state import context_window, default_model, release_evidence, workspace_dir
    from occd.policy import cost, savings

    for model, provider in (("claude-opus-4-6", "anthropic"), ("anthropic/claude-opus-4-6", None), ("m", "x"),
                            (None, None)):
        context_window(state, agent="main", model=model, provider=provider, config=cfg)
        cost.from_openclaw(cfg, model)
        savings.price_from_openclaw(cfg, model)
    default_model(cfg, "main")
    workspace_dir(state, "main", config=cfg)
    workspace_dir(state, "other", config=cfg)
    lean.slot_owner(cfg)
    lean.configured_plugin_paths(cfg)
    gateway_endpoint(state, env={}, config=cfg)
    release_evidence(state, config=cfg)
    obs = SessionObs(agent="main", era="file", session_id=SID, session_key=KEY, path=None, size=None,
                     compaction_count=0, context_tokens=1000, tokens_source="usage", context_window=200000,
                     entry_count=None, last_activity=None)
    _budget_records(obs, __import__("types").SimpleNamespace(entry={}, model=None), cfg)


def test_every_wrong_type_anywhere_in_openclaw_json_is_skipped_not_fatal(isolated_env):
    state = isolated_env / ".openclaw"
    state.mkdir()
    _read_everything(state, GOOD_CONFIG)
    tried = 0
    for path in list(_paths(GOOD_CONFIG))[1:]:
        for value in WRONG:
            cfg = _mutated(path, value)
            try:
                _read_everything(state, cfg)
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"{'.'.join(map(str, path))} = {value!r}: {type(e).__name__}: {e}")
            tried += 1
    assert tried > 200


def test_the_rest_of_a_half_edited_config_is_kept(isolated_env):
    from occd.openclaw.state import context_window

    state = isolated_env / ".openclaw"
    cfg = _mutated(("models", "providers", "x", "models"), 5)
    assert context_window(state, agent="main", model="claude-opus-4-6", provider="anthropic", config=cfg) == 180000
    cfg = _mutated(("agents", "list"), {"id": "main"})
    assert context_window(state, agent="main", config=cfg) == 180000  # the default model, still found


@pytest.mark.parametrize("path,value", [(("models", "providers", "anthropic", "models"), 5), (("agents", "list"), 7),
                                        (("agents", "defaults"), [1]), (("agents",), "x"), (("plugins",), 5)])
def test_a_half_edited_config_still_scans_and_stays_healthy(isolated_env, path, value):
    from occd.ledger import Ledger
    from tests.test_cli_sessions import make_state

    state = make_state(isolated_env)
    (state / "openclaw.json").write_text(json.dumps(_mutated(path, value)))
    r = run("run", "--once", "--json")
    out = json.loads(r.stdout)
    assert out["jobs"]["scan"]["ok"] is True, out
    with Ledger.open(readonly=True) as led:
        ls = led.last_scan()
    assert ls["errors"] == 0 and ls["sessions_seen"] == 1, ls
    assert run("list").exit_code == 0


def _status_problems(as_json=True):
    r = run("status", "--check", "--json")
    return r, [p["code"] for p in json.loads(r.stdout)["problems"]]


def test_a_scan_that_fails_for_one_agent_is_recorded_and_said(healthy, monkeypatch):
    from occd.jobs import scan
    from tests.test_cli_sessions import make_state

    make_state(__import__("pathlib").Path(__import__("os").environ["HOME"]))

    def boom(*a, **k):
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(scan, "_scan_store", boom)
    r = run("run", "--once", "--json")
    assert json.loads(r.stdout)["jobs"]["scan"]["ok"] is True  # the other agents went on
    r, codes = _status_problems()
    assert r.exit_code == 1 and "SCAN_FAILED" in codes and "not iterable" in r.stderr
    r = run("status")
    assert "1 error" in r.output and "not iterable" in r.output
    r = run("doctor", "--check", "scan")
    assert r.exit_code == 1 and "not iterable" in r.output


def test_a_scan_job_that_fails_is_never_shown_as_the_last_good_scan(healthy, monkeypatch):
    from occd.jobs import scan
    from tests.test_cli_sessions import make_state

    make_state(__import__("pathlib").Path(__import__("os").environ["HOME"]))
    r = run("status")
    assert "0 errors" in r.output

    def boom(*a, **k):
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(scan, "list_agents", boom, raising=False)
    monkeypatch.setattr("occd.openclaw.list_agents", boom)
    r = run("run", "--once", "--json")
    assert json.loads(r.stdout)["jobs"]["scan"]["ok"] is False
    r = run("status")
    assert "FAILED" in r.output and "not iterable" in r.output and "0 errors" not in r.output, r.output
    r, codes = _status_problems()
    assert r.exit_code == 1 and "SCAN_FAILED" in codes
    r = run("doctor", "--check", "scan")
    assert r.exit_code == 1 and "failed" in r.output and "not iterable" in r.output
