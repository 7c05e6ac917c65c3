"""Bad input and faults (issue 4): each gives a clear log line and a ledger record, nothing is lost, and the next
cycle works. The damaged-index, missing-file, vanished-transcript and full-disk-on-edit cases are in
test_daemon_jobs.py; these are the rest."""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest

from occd.config import load_settings
from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger
from occd.openclaw import new_session_id
from occd.transcript import synth


def make_state(home: Path, n: int = 2, agent: str = "main", turns: int = 8) -> tuple[Path, dict]:
    state = home / ".openclaw"
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": 100_000}]}}}}))
    old = time.time() - 3600
    index = {}
    for i in range(n):
        info = synth.generate_transcript(sdir, session_id=new_session_id(), turns=turns, seed=40 + i)
        os.utime(info.path, (old, old))
        index[f"agent:{agent}:s{i}"] = {"sessionId": info.id, "sessionFile": str(info.path),
                                        "updatedAt": int(old * 1000), "compactionCount": i,
                                        "model": "claude-opus-4-6", "modelProvider": "anthropic"}
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return state, index


def ctx_for(state: Path, led, **kw) -> JobContext:
    s = load_settings({"state_dir": str(state), "policy": {"min_idle_minutes": 5}})
    return JobContext(settings=s, ledger=led, state_dir=state, **kw)


def reply(path: Path, tokens: int, text: str = "done") -> int:
    line = json.dumps({"type": "message", "id": new_session_id()[-8:], "parentId": None,
                       "timestamp": "2026-11-22T10:00:00.000Z",
                       "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                             "totalTokens": tokens}, "stopReason": "stop", "timestamp": 1}}) + "\n"
    with open(path, "a") as fh:
        fh.write(line)
    return len(line)


def tokens_by_key(led) -> dict:
    return {o["session_key"]: o["context_tokens"] for o in led.latest_observations()}


def test_state_dir_not_readable(isolated_env, caplog):
    bad = isolated_env / "state-is-a-file"
    bad.write_text("not a directory")
    with Ledger.open() as led, caplog.at_level(logging.INFO, logger="occd"):
        ok, s = run_cycle(ctx_for(bad, led), ["scan"])["scan"]
        assert ok and s["errors"] == 1 and s["sessions"] == 0
        assert "not readable" in led.last_scan()["error_text"]
    assert any("not readable" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


def test_state_dir_permission_denied(isolated_env, monkeypatch, caplog):
    """What a non-root user meets with a chmod 000 state dir (root ignores modes, so the check is faked)."""
    state, _ = make_state(isolated_env)
    import occd.openclaw.state as st

    real = st.os.access
    monkeypatch.setattr(st.os, "access", lambda p, m: False if Path(p) == state else real(p, m))
    with Ledger.open() as led, caplog.at_level(logging.INFO, logger="occd"):
        ctx = ctx_for(state, led)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 1 and "not readable" in led.last_scan()["error_text"]
        monkeypatch.setattr(st.os, "access", real)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 0 and s["sessions"] == 2
    assert any(r.getMessage().startswith("resolved:") for r in caplog.records)


def test_agent_dir_without_sessions(isolated_env, caplog):
    state, _ = make_state(isolated_env)
    (state / "agents" / "idle").mkdir()
    (state / "agents" / "half" / "sessions").mkdir(parents=True)
    with Ledger.open() as led, caplog.at_level(logging.INFO, logger="occd"):
        ctx = ctx_for(state, led)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 0 and s["agents"] == 3 and s["sessions"] == 2
        eras = {a["id"]: a["era"] for a in led.agents()}
        assert eras == {"main": "file", "idle": "empty", "half": "empty"}
        first = [r for r in caplog.records if "has no sessions yet" in r.getMessage()]
        assert {r.levelno for r in first} == {logging.INFO} and len(first) == 2
        caplog.clear()
        run_cycle(ctx, ["scan"])  # said once, not every five minutes
        assert not [r for r in caplog.records if "has no sessions yet" in r.getMessage() and r.levelno >= logging.INFO]


def test_14mb_index_is_read(isolated_env):
    """sessions.json bloated to 14 MB (skills snapshots in every entry, as reported by OpenClaw users)."""
    state, index = make_state(isolated_env, n=2)
    idx = state / "agents/main/sessions/sessions.json"
    blob = "x" * 20_000
    for i in range(700):  # old entries whose transcripts were deleted long ago, each carrying a big snapshot
        index[f"agent:main:old{i}"] = {"sessionId": f"old-{i}", "sessionFile": str(idx.parent / f"old-{i}.jsonl"),
                                       "skillsSnapshot": {"prompt": blob}}
    for e in list(index.values())[:2]:
        e["skillsSnapshot"] = {"prompt": blob}
    idx.write_text(json.dumps(index, indent=2))
    assert idx.stat().st_size > 14_000_000
    before = idx.read_bytes()
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        t0 = time.monotonic()
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["sessions"] == 2 and s["errors"] == 700  # each missing transcript named once
        assert time.monotonic() - t0 < 5
        assert "is missing" in led.last_scan()["error_text"]
        assert len(tokens_by_key(led)) == 2
    assert idx.read_bytes() == before


def test_transcript_replaced_between_and_during_scans(isolated_env, monkeypatch):
    state, index = make_state(isolated_env, n=2)
    path = Path(index["agent:main:s0"]["sessionFile"])
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
        # replaced (a new inode, e.g. an editor or a restore): read again from its tail, not from the old offset
        tmp = path.with_name("replacement.tmp")
        synth.generate_transcript(tmp, session_id=index["agent:main:s0"]["sessionId"], turns=3, seed=99)
        reply(tmp, 4242)
        os.replace(tmp, path)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["changed"] == 1 and tokens_by_key(led)["agent:main:s0"] == 4242
        # shrunk in place (same inode, truncated): also a fresh tail read. (A same-size rewrite in place within
        # the file system's timestamp granularity is invisible to stat; OpenClaw only appends, occd renames.)
        data = path.read_bytes()
        cut = data.rstrip(b"\n").rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(cut)
        reply(path, 3131, text="a different, longer reply")
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and tokens_by_key(led)["agent:main:s0"] == 3131

        # replaced while the scan is reading it (it grew, so the scan reads it): whatever was read is superseded
        # by the next cycle
        import occd.jobs.scanstate as scanstate

        reply(path, 3232)
        real = scanstate._file_tokens

        def swap(p, st, cached, result):
            if p == path:
                t = path.with_name("swap.tmp")
                synth.generate_transcript(t, session_id=index["agent:main:s0"]["sessionId"], turns=2, seed=7)
                reply(t, 5151)
                os.replace(t, path)
            return real(p, st, cached, result)

        monkeypatch.setattr(scanstate, "_file_tokens", swap)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok
        monkeypatch.setattr(scanstate, "_file_tokens", real)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 0 and tokens_by_key(led)["agent:main:s0"] == 5151


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    c = sqlite3.connect(path, isolation_level=None, timeout=0)
    c.execute("BEGIN IMMEDIATE")
    return c


def test_locked_ledger_loses_nothing(isolated_env, caplog):
    state, index = make_state(isolated_env, n=2)
    path = Path(index["agent:main:s1"]["sessionFile"])
    Ledger.open().close()
    from occd import paths

    with Ledger.open(busy_timeout=0.2) as led, caplog.at_level(logging.INFO, logger="occd"):
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
        reply(path, 60_000)
        blocker = _hold_write_lock(paths.ledger_path())
        try:
            ok, s = run_cycle(ctx, ["scan"])["scan"]
        finally:
            blocker.rollback()
            blocker.close()
        assert not ok and "locked by another process" in s["error"]
        assert any("not recorded" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
        ok, s = run_cycle(ctx, ["scan"])["scan"]  # nothing read again, yet the change reaches the ledger
        assert ok and s["bytesRead"] == 0 and s["changed"] == 1
        assert tokens_by_key(led)["agent:main:s1"] == 60_000
        last = led.last_scan()
        assert "not recorded: The ledger" in last["error_text"] and "locked" in last["error_text"]
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert led.last_scan()["error_text"] is None  # the note is recorded once


def test_readonly_ledger_then_writable(isolated_env, caplog):
    state, index = make_state(isolated_env, n=2)
    path = Path(index["agent:main:s0"]["sessionFile"])
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
    reply(path, 70_000)
    with Ledger.open(readonly=True) as ro, caplog.at_level(logging.INFO, logger="occd"):
        ctx.ledger = ro
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert not ok and "read-only" in s["error"]
    assert any("not recorded" in r.getMessage() for r in caplog.records)
    with Ledger.open() as led:
        ctx.ledger = led
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["changed"] == 1 and tokens_by_key(led)["agent:main:s0"] == 70_000
        assert "read-only" in led.last_scan()["error_text"]


def test_readonly_ledger_file_refused_at_start(isolated_env, monkeypatch):
    """`occd run --once` on a ledger it may not write: one clear line, exit 1 (root ignores modes: faked)."""
    from click.testing import CliRunner

    from occd import paths
    from occd.cli.main import cli

    state, _ = make_state(isolated_env)
    Ledger.open().close()
    import occd.ledger.core as core

    real = core.os.access
    monkeypatch.setattr(core.os, "access", lambda p, m: False if Path(p) == paths.ledger_path() else real(p, m))
    r = CliRunner().invoke(cli, ["run", "--once", "--state-dir", str(state)])
    assert r.exit_code == 1 and "read-only" in r.output


def test_full_disk_on_scan_cache_write(isolated_env, monkeypatch, caplog):
    state, index = make_state(isolated_env, n=2)
    import sys

    import occd.jobs.scanstate as scanstate

    real_write = os.write

    def full(fd, data):  # the disk fills while occd writes its scan cache (paths.write_atomic: the temp file exists)
        caller = sys._getframe(1)
        if caller.f_code.co_name == "write_atomic" and caller.f_locals.get("p", Path()).name.startswith("scan-files"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    with Ledger.open() as led, caplog.at_level(logging.INFO, logger="occd"):
        ctx = ctx_for(state, led)
        monkeypatch.setattr(os, "write", full)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 1 and s["changed"] == 2  # observations still recorded
        assert "No space left" in led.last_scan()["error_text"]
        assert not list(scanstate._cache_path().parent.glob("*scan-files*"))  # no torn temp file left
        monkeypatch.setattr(os, "write", real_write)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 0 and scanstate._cache_path().exists()
    assert any("No space left" in r.getMessage() for r in caplog.records)


def test_full_disk_on_ledger_write(isolated_env, monkeypatch):
    state, index = make_state(isolated_env, n=1)
    from occd.errors import OccdError

    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        real = led.record_observations

        def full(*a, **k):
            raise OccdError("Cannot write the ledger x: database or disk is full", "free some disk space",
                            code="LEDGER_WRITE")

        monkeypatch.setattr(led, "record_observations", full)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert not ok and "disk is full" in s["error"]
        monkeypatch.setattr(led, "record_observations", real)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["changed"] == 1 and "disk is full" in led.last_scan()["error_text"]


@pytest.mark.parametrize("jump", [-86400, 86400 * 30])
def test_clock_jump(isolated_env, jump, caplog):
    state, index = make_state(isolated_env, n=2)
    path = Path(index["agent:main:s0"]["sessionFile"])
    offset = {"s": 0.0}
    with Ledger.open() as led, caplog.at_level(logging.INFO, logger="occd"):
        ctx = ctx_for(state, led, clock=lambda: time.time() + offset["s"])
        run_cycle(ctx, ["scan", "apply"])
        first = led.last_scan()["started"]
        offset["s"] = jump
        reply(path, 50_000)
        ok, s = run_cycle(ctx, ["scan", "apply"])["scan"]
        assert ok and s["changed"] == 1
        assert tokens_by_key(led)["agent:main:s0"] == 50_000  # the newest observation is the latest one
        reply(path, 51_000)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and tokens_by_key(led)["agent:main:s0"] == 51_000
        scans = led.scans()
        assert [x["started"] for x in scans] == sorted((x["started"] for x in scans), reverse=True)
        if jump < 0:
            assert scans[0]["started"] > first
            assert any("clock moved back" in (x["error_text"] or "") for x in scans)
            assert any("clock moved back" in r.getMessage() for r in caplog.records)
        # a fresh daemon process (cache gone) still keeps the order
        ctx2 = ctx_for(state, led, clock=lambda: time.time() + offset["s"] - 60)
        reply(path, 52_000)
        ok, s = run_cycle(ctx2, ["scan"])["scan"]
        assert ok and tokens_by_key(led)["agent:main:s0"] == 52_000
