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

    monkeypatch.setattr(doctor, "CHECKS", list(doctor.CHECKS))

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
