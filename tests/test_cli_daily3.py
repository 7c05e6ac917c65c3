"""Issue 32: daily use, third pass — commands in the sequences a user types them (§11 history and --since, §12
--quiet/--verbose/--state-dir, §15 status before the first cycle, and more)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from click.testing import CliRunner

from occd.cli.main import cli
from tests.statefactory import FileState


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kw)


def jrun(*args):
    r = run(*args, "--json")
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def _state(home: Path, **kw):
    fs = FileState(home / ".openclaw")
    return fs, fs.add_session(turns=kw.pop("turns", 30), seed=kw.pop("seed", 3), tools_per_turn=2, **kw)


# ---- §11 history: "not found" like info/restore; --since positive; --outcome -----------------------------------

def test_history_session_not_found_is_exit_1_like_info(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    info = run("info", "zzzz-nothing")
    r = run("history", "--session", "zzzz-nothing")
    assert info.exit_code == 1 and r.exit_code == 1
    assert "not found" in r.stderr and "Traceback" not in r.output
    r, data = jrun("history", "--session", "zzzz-nothing")
    assert r.exit_code == 1 and data["success"] is False and data["error"]["code"] == "SESSION_NOT_FOUND"
    # the session edited: found, its action listed
    r, data = jrun("history", "--session", s.session_id[:8])
    assert r.exit_code == 0 and data["total"] == 1


def test_history_session_before_any_ledger_is_not_found(isolated_env):
    _state(isolated_env)
    r = run("history", "--session", "zzzz-nothing")
    assert r.exit_code == 1 and "not found" in r.stderr


def test_since_rejects_zero_and_negative_durations(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    for cmd in ("stats", "history"):
        for bad in ("-3d", "0", "0h", "-5"):
            r = run(cmd, "--since", bad)
            assert r.exit_code == 2, (cmd, bad, r.output)
            assert "positive" in r.stderr and "Traceback" not in r.output
        assert run(cmd, "--since", "3d").exit_code == 0


def test_history_outcome_filter(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    r, data = jrun("history", "--outcome", "ok")
    assert r.exit_code == 0 and data["total"] == 1
    r, data = jrun("history", "--outcome", "failed")
    assert r.exit_code == 0 and data["total"] == 0
    r = run("history", "--outcome", "failed")
    assert r.exit_code == 0 and "No actions recorded for that filter" in r.stdout
    r = run("history", "--outcome", "borked")
    assert r.exit_code == 2 and "--outcome" in r.stderr


def test_observe_mode_rows_read_would_in_history_and_status(isolated_env):
    """A dry-run row is "would" in history (as status counts it), not "skipped (dry run)"."""
    from occd.ledger import Ledger

    fs, s = _state(isolated_env)
    with Ledger.open() as led:
        led.record_action("strip", "main", s.session_id, s.key, trigger="auto", outcome="skipped", dry_run=True,
                          reason="context 80% of the window >= 60% (observe mode: would strip with preset moderate)")
    out = run("history").stdout
    assert "would" in out and "skipped" not in out and "(dry run)" not in out
    r, data = jrun("history", "--outcome", "would")
    assert data["total"] == 1
    r, data = jrun("history", "--outcome", "skipped")
    assert data["total"] == 0


# ---- §12 one meaning for -q/--quiet and -v/--verbose on every command; --state-dir on the read commands ---------

def _leaf_commands():
    from occd.cli.main import COMMANDS, cli as root

    ctx = click.Context(root)
    for name in COMMANDS:
        cmd = root.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            for sub in cmd.commands.values():
                yield f"{name} {sub.name}", sub
        else:
            yield name, cmd


def test_every_command_takes_quiet_and_verbose():
    missing = []
    for path, cmd in _leaf_commands():
        if path in ("completion", "mcp"):
            continue
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if not {"-q", "--quiet", "-v", "--verbose"} <= opts:
            missing.append(path)
    assert missing == []


def test_quiet_edit_prints_nothing_and_still_works(isolated_env):
    fs, s = _state(isolated_env)
    size = s.path.stat().st_size
    r = run("edit", s.session_id, "--strip-tools=aggressive", "--force", "-q")
    assert r.exit_code == 0 and r.stdout == "" and s.path.stat().st_size < size
    r, data = jrun("restore", s.session_id, "--force", "-q")   # --json is what a script asked for: still printed
    assert r.exit_code == 0 and data["success"] is True
    r = run("restore", "zzzz-nothing", "-q")                     # errors still say what went wrong
    assert r.exit_code == 1 and "not found" in r.stderr
    assert run("status", "-q").stdout == "" and run("status", "-q").exit_code == 0
    r = run("edit", s.session_id, "-q", "-v")
    assert r.exit_code == 2


def test_quiet_and_verbose_daemon_cycle(isolated_env):
    """`run --once -q` logs warnings only; `-v` logs at DEBUG (the flags set --log-level when it is not given)."""
    _state(isolated_env)
    r = run("run", "--once", "-q")
    assert r.exit_code == 0 and " INFO " not in r.stderr and r.stdout == ""
    r = run("run", "--once", "-v")
    assert r.exit_code == 0 and " DEBUG " in r.stderr


def test_read_commands_take_state_dir(isolated_env):
    fs, s = _state(isolated_env)
    sd = str(isolated_env / ".openclaw")
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force", "--state-dir", sd).exit_code == 0
    for cmd in (("status",), ("history",), ("stats",), ("list",), ("info", s.session_id)):
        r = run(*cmd, "--state-dir", sd)
        assert r.exit_code == 0, (cmd, r.output)
    r = run("history", "--state-dir", str(isolated_env / "nowhere"))
    assert r.exit_code == 1 and "does not exist" in r.stderr


def test_backups_without_id_says_which_agent(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    out = run("backups").stdout
    assert "agent 'main'" in out and "--agent" in out


# ---- §15 status before the first cycle: what can be seen, and what is missing -----------------------------------

def test_status_before_the_first_cycle_shows_the_state_and_what_is_missing(isolated_env):
    fs, s = _state(isolated_env)
    fs.add_session("agent:main:second", turns=4, seed=5)
    listed = run("list").stdout
    assert "agent:main:second" in listed and "agent:main:main" in listed
    r = run("status")
    assert r.exit_code == 0
    out = r.stdout
    assert "Agent main" in out and "2 sessions" in out
    assert "Missing" in out and "ledger" in out and "never ran" in out and "occd run --once" in out
    r, data = jrun("status")
    fc = data["firstContact"]
    assert [a["id"] for a in fc["agents"]] == ["main"] and fc["agents"][0]["sessions"] == 2
    assert len(fc["missing"]) == 2
    # after a cycle: the usual status, nothing missing
    assert run("run", "--once", "-q").exit_code == 0
    out = run("status").stdout
    assert "Missing" not in out and "Agent main" in out
