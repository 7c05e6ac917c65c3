"""Issue 23, "Confusing" (items 10-16): advice that fits, archived backups, prompts without a terminal, history's
kinds, errors that name what is there, and the demo telling one story. Commands run in sequence, as a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from tests.test_cli_daily import _demo_after_a_cycle, _demo_state


def run(*args, env=None, input=None):
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False, input=input)


# ---- 12: a prompt without a terminal ---------------------------------------------------------------------

def test_lean_enable_without_a_terminal_says_to_pass_yes(isolated_env, tmp_path, monkeypatch):
    from tests.test_lean import FAKE_OC, fake_release

    pkg = fake_release(tmp_path / "oc", "2026.9.6")
    (pkg / "openclaw.mjs").write_text(FAKE_OC)
    (pkg / "openclaw.mjs").chmod(0o755)
    monkeypatch.setenv("OCCD_OPENCLAW_BIN", str(pkg / "openclaw.mjs"))
    state = isolated_env / ".openclaw"
    state.mkdir()
    (state / "openclaw.json").write_text("{}")
    p = subprocess.run([sys.executable, "-m", "occd", "lean", "enable"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "--yes" in p.stderr, p.stderr
    assert "Internal error" not in p.stderr and "Abort" not in p.stderr and "--debug" not in p.stderr
    from occd import lean

    assert not lean.is_enabled(state)


def test_an_abort_at_a_prompt_is_no_internal_error():
    import click

    from occd.cli.common import handle_errors

    @click.command()
    @handle_errors
    def cmd():
        raise click.exceptions.Abort()

    r = CliRunner().invoke(cmd, [])
    assert r.exit_code == 1 and "Internal error" not in r.output and "Aborted" in r.output


def test_an_internal_error_hint_names_a_debug_option_that_exists(isolated_env, monkeypatch):
    from occd.cli import sessions

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr("occd.report.inspect.list_sessions", boom)
    r = run("list")
    assert r.exit_code == 1 and "`occd --debug list" in r.stderr
    hint_cmd = r.stderr.split("`")[1].replace(" ...", "").split()
    assert hint_cmd[:3] == ["occd", "--debug", "list"]
    r = CliRunner().invoke(cli, hint_cmd[1:])
    assert isinstance(r.exception, RuntimeError)  # the option works: the traceback comes through
    assert sessions


# ---- 13: history --kind accepts every kind history shows --------------------------------------------------

def test_history_kind_accepts_every_kind_the_ledger_records(isolated_env):
    from occd.ledger import ACTION_KINDS, Ledger

    with Ledger.open() as led:
        for k in ACTION_KINDS:
            led.record_action(k, "main", "01a20771-bb86-7d1a-8000-000000000001", trigger="auto", outcome="ok")
        led.record_action("job:scan", None, None, trigger="auto", outcome="failed")
        with pytest.raises(ValueError):
            led.record_action("nonsense", "main", None)
    shown = {a["kind"] for a in json.loads(run("history", "--json").stdout)["actions"]}
    assert shown == set(ACTION_KINDS) | {"job:scan"}
    for k in shown:
        r = run("history", "--kind", k, "--json")
        assert r.exit_code == 0, (k, r.output)
        assert {a["kind"] for a in json.loads(r.stdout)["actions"]} == {k}
    r = run("history", "--kind", "lea")
    assert r.exit_code == 2 and "did you mean lean" in r.stderr
    assert "lean" in run("history", "--help").output


# ---- 15: errors that name what is there ------------------------------------------------------------------

def test_info_of_another_agents_session_names_that_agent(isolated_env, monkeypatch):
    made = _demo_state(isolated_env, monkeypatch)
    ops = made["sessions"]["agent:ops:main"]["id"]
    part = ops.split("-")[1]
    for args in (["info", part], ["edit", part, "--strip-tools"], ["rotate", part, "--dry-run"]):
        r = run(*args)
        assert r.exit_code == 1, (args, r.output)
        assert "agent 'ops'" in r.stderr and f"--agent ops" in r.stderr, r.stderr
    assert run("info", part, "--agent", "ops").exit_code == 0
    r = run("info", "zzzz")
    assert r.exit_code == 1 and "not found" in r.stderr and "agent '" not in r.stderr


def test_breaker_reset_of_an_unknown_agent_or_kind_is_an_error(isolated_env, monkeypatch):
    _demo_after_a_cycle(isolated_env, monkeypatch)
    r = run("breaker", "reset", "nosuch")
    assert r.exit_code == 1 and "nosuch" in r.stderr and "hint:" in r.stderr and "main" in r.stderr
    r = run("breaker", "reset", "--kind", "strp")
    assert r.exit_code == 1 and "did you mean strip" in r.stderr
    assert run("breaker", "reset", "main").exit_code == 0  # a known agent whose breakers are closed
    assert run("breaker", "reset", "--kind", "archive").exit_code == 0


def test_a_mistyped_command_gets_a_did_you_mean():
    r = run("lsit")
    assert r.exit_code == 2 and "Did you mean 'list'" in r.output
    r = run("lsit", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 2 and out["success"] is False and out["error"]["code"] == "USAGE"
    assert "Did you mean 'list'" in out["error"]["message"]


def test_lean_status_reports_the_mode_the_config_gives(isolated_env, monkeypatch):
    out = run("lean", "status").output
    assert "mode drop" in out.lower() and "mode off" not in out.lower()
    assert json.loads(run("lean", "status", "--json").stdout)["rules"]["mode"] == "drop"
    monkeypatch.setenv("OCCD_LEAN__MODE", "stub")
    assert "mode stub" in run("lean", "status").output.lower()


def test_select_resumes_the_session_holding_that_exact_request(isolated_env, monkeypatch):
    made = _demo_after_a_cycle(isolated_env, monkeypatch)  # `occd demo`'s state: main stripped to ~24%
    main = made["sessions"]["agent:main:main"]
    from pathlib import Path

    path = Path(main["path"]) if main.get("path") else next(
        (made["state"] / "agents" / "main" / "sessions").glob(f"{main['id']}.jsonl"))
    last = json.loads(path.read_bytes().splitlines()[-1])
    task = "What is in the Stripe webhook notes"
    entry = {"type": "message", "id": "ffff0001", "parentId": last["id"], "timestamp": last["timestamp"],
             "message": {"role": "user", "content": task, "timestamp": 1}}
    with open(path, "ab") as f:
        f.write(json.dumps(entry, separators=(",", ":")).encode() + b"\n")
    out = json.loads(run("select", "--task", task, "--no-llm", "--json").stdout)
    assert out["action"] == "resume" and out["sessionId"] == main["id"], out


# ---- 16: the demo tells one story --------------------------------------------------------------------------

def test_a_dead_pid_lock_is_a_warning_in_doctor(isolated_env, monkeypatch):
    made = _demo_after_a_cycle(isolated_env, monkeypatch)  # the demo's "running" session: a lock of this process
    running = next(v for v in made["sessions"].values() if v["running"])
    lock = running["path"].with_name(running["path"].name + ".lock")
    data = json.loads(lock.read_text())
    data["pid"] = 2 ** 22 + 12345  # a process that is gone: what `demo --keep` leaves once the demo exits
    lock.write_text(json.dumps(data))
    checks = {c["name"]: c for c in json.loads(run("doctor", "--json").stdout)["checks"]}
    assert checks["locks"]["status"] == "warn" and "dead-pid" in checks["locks"]["detail"]


def test_status_drops_a_would_that_an_act_cycle_has_done(isolated_env, monkeypatch):
    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    made = _demo_state(isolated_env, monkeypatch)

    def cycle(mode):
        with Ledger.open() as led:
            Daemon(lambda: load_settings({"state_dir": str(made["state"]),
                                          "policy": {"mode": mode, "min_idle_minutes": 5}})).run_once(led)

    cycle("observe")
    sid = made["sessions"]["agent:research:main"]["id"]
    before = json.loads(run("status", "--json").stdout)
    would = [w for a in before["agents"] for w in a["wouldDo"] if w["sessionId"] == sid]
    assert [w["kind"] for w in would] == ["strip"]
    time.sleep(0.01)
    cycle("act")
    after = json.loads(run("status", "--json").stdout)
    assert not [w for a in after["agents"] for w in a["wouldDo"] if w["sessionId"] == sid]
    assert f"would strip {sid.split('-')[1]}" not in run("status", env={"COLUMNS": "200"}).output


# ---- 10: the database era's advice ---------------------------------------------------------------------------

def test_database_era_advice_names_the_real_key_and_fits_each_command(isolated_env):
    from statefactory import DbState
    from tests.test_openclaw_dbstore import turn_events

    db = DbState(isolated_env / ".openclaw")
    sid = db.add_session("agent:main:telegram:dm:42", session_id="a8ec0001-0000-7000-8000-000000000001",
                         events=turn_events(3), updated_at=int(time.time() * 1000) - 3_600_000)
    advice = {}
    for args in (["edit", "a8ec", "--strip-tools"], ["clone", "a8ec"], ["restore", "a8ec"]):
        r = run(*args)
        assert r.exit_code == 1, (args, r.output)
        line = r.stderr.strip()
        assert line.count("\n") == 0 and "database" in line
        assert "openclaw sessions compact a8ec" not in line and "a8ec`" not in line  # never the id as a key
        assert "daemon" not in line  # the daemon compacts only with policy.compact_db_sessions (off by default)
        advice[args[0]] = line
    # edit: the lossless lean view first; compaction only as the lossy choice, with the key OpenClaw takes
    assert "occd lean enable" in advice["edit"] and "lossy: `openclaw sessions compact agent:main:telegram:dm:42`" \
        in advice["edit"]
    assert "compact" not in advice["clone"] and "occd rotate agent:main:telegram:dm:42" in advice["clone"]
    assert "compact" not in advice["restore"] and "occd rotate --undo agent:main:telegram:dm:42" in advice["restore"]
    assert sid


# ---- 11: an archived session's backups ---------------------------------------------------------------------

def test_an_archived_sessions_backups_are_listed_and_restorable_to_a_new_file(isolated_env, monkeypatch, tmp_path):
    made = _demo_state(isolated_env, monkeypatch)
    cron = made["sessions"]["agent:main:cron:nightly"]["id"]
    # as a user does it (one decision per session per daemon cycle, so not both in one cycle): strip, then rotate
    assert run("edit", cron, "--strip-tools=default", "--force").exit_code == 0
    assert run("rotate", cron, "--force").exit_code == 0
    old = next(r for r in json.loads(run("list", "--archived", "--json").stdout)["sessions"])["id"]
    assert old == cron
    part = old.split("-")[1]
    listed = json.loads(run("backups", "--json").stdout)["backups"]
    mine = [b for b in listed if b["sessionId"] == old]
    assert len(mine) == 1 and mine[0]["archived"] and mine[0]["key"] == "agent:main:cron:nightly"
    assert json.loads(run("backups", part, "--json").stdout)["backups"] == mine
    out = run("backups", env={"COLUMNS": "80"}).output
    # the header names the agent (issue 32 §12); a path longer than the line is cut in the middle (§13)
    shown = out.splitlines()[2 * [b["sessionId"] for b in listed].index(old) + 3].strip()
    assert mine[0]["path"] in shown or (shown.startswith("…") and mine[0]["path"].endswith(shown[1:])), out
    # restore in place: refused (the key's live session is another one), with the way that works
    live = made["sessions"]["agent:main:cron:nightly"]
    before = {p: p.read_bytes() for p in live["path"].parent.glob("*.jsonl")}
    r = run("restore", part)
    assert r.exit_code == 1 and f"occd restore {part} --backup N -o FILE" in r.stderr
    dest = tmp_path / "restored.jsonl"
    r = run("restore", part, "--backup", "1", "-o", str(dest), "--json")
    assert r.exit_code == 0, r.output
    assert dest.read_bytes() == open(mine[0]["path"], "rb").read()
    assert {p: p.read_bytes() for p in live["path"].parent.glob("*.jsonl") if p != dest} == before
    r = run("restore", part, "-o", str(dest))  # never over an existing file
    assert r.exit_code == 2 and dest.read_bytes() == open(mine[0]["path"], "rb").read()


def test_readme_demo_sample_is_what_the_demo_prints(isolated_env, monkeypatch, tmp_path):
    import re
    from pathlib import Path

    from occd.demo import run as demo

    for var in ("OCCD_HOME", "OPENCLAW_STATE_DIR", "OCCD_POLICY__MODE"):  # demo.run points these at its state
        monkeypatch.setenv(var, os.environ.get(var, ""))
    lines: list[str] = []
    demo.run(keep=tmp_path / "demo", cycles=3, echo=lambda *a, **k: lines.append(" ".join(map(str, a))))

    def norm(line):
        return re.sub(r"\b[1-9]\d* bytes read", "… bytes read", line)

    ran = [norm(x) for x in lines if x.startswith("cycle ")]
    readme = (Path(__file__).resolve().parent.parent / "docs" / "guide.md").read_text()
    sample = readme.split("## What `occd demo` shows", 1)[1].split("```", 2)[1].strip().splitlines()
    assert sample == ran
    stripped = int(re.search(r"stripped (\d+)", ran[0]).group(1))
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    assert f"the {words[stripped]} sessions whose next turn" in " ".join(readme.split())


def test_observe_mode_makes_one_decision_per_session_per_cycle(isolated_env, monkeypatch):
    """A strip that says "a rotation would not help" is the cycle's decision for that session: the rotate job
    of the same cycle does not also record a rotation (would / deferred) for it."""
    from dataclasses import replace

    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.jobs import apply
    from occd.ledger import Ledger
    from occd.policy.types import Decision

    made = _demo_state(isolated_env, monkeypatch)
    cron = made["sessions"]["agent:main:cron:nightly"]["id"]  # 6 compactions: the rotate job's candidate
    real = apply.decide_session

    def hopeless(ctx, obs, policy, now, times=()):
        d = real(ctx, obs, policy, now, times)
        if obs.session_id == cron:  # as for a small window: even a fresh session is over target
            if d is None:  # the budget rule has nothing due for it now: the decision a small window would bring
                d = Decision(action="strip", policy="strip_at_budget_percent", reason="over the budget",
                             agent=obs.agent, session_id=obs.session_id, session_key=obs.session_key,
                             would_do=policy.mode != "act")
            d = replace(d, action="strip", details={**d.details, "freshSessionTokens": 22_000, "keepTurnsWithTools": 0},
                        reason=d.reason + " (strip every old tool call: a rotation would not help)")
        return d

    monkeypatch.setattr(apply, "decide_session", hopeless)
    with Ledger.open() as led:
        Daemon(lambda: load_settings({"state_dir": str(made["state"]),
                                      "policy": {"mode": "observe", "min_idle_minutes": 5}})).run_once(led)
    rows = json.loads(run("history", "--session", cron, "--json").stdout)["actions"]
    assert [a["kind"] for a in rows] == ["strip"], rows
    assert "would not help" in rows[0]["reason"]


@pytest.mark.parametrize("var,value", [("OCCD_LEAN", "notjson"), ("OCCD_POLICY", "{bad"), ("OCCD_DAEMON", "[1")])
def test_a_section_variable_that_is_not_json_is_one_line_not_an_internal_error(isolated_env, monkeypatch, var, value):
    """OCCD_<SECTION> is read as a JSON object by pydantic-settings; anything else is a config error naming the
    variable (exit 1), never 'Internal error ... please report it'."""
    monkeypatch.setenv(var, value)
    r = CliRunner().invoke(cli, ["status"])
    assert r.exit_code == 1, r.output
    out = r.output
    assert f"The environment variable {var} is not a JSON object" in out and f"{var}__NAME=value" in out
    assert "Internal error" not in out and "Traceback" not in out
