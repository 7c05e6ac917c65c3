"""The daemon's cycle on real file-era states in tmp: incremental scan, policies in observe and act mode, the
breaker, faults, the single-instance lock, signals, sd_notify, status/history and the demo."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.config import load_settings
from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger
from occd.transcript import synth
from occd.openclaw import new_session_id


def state_with(home: Path, sessions: dict, agent="main", window=100_000) -> Path:
    state = home / ".openclaw"
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": window}]}}}}))
    idx_path = sdir / "sessions.json"
    index = json.loads(idx_path.read_text()) if idx_path.exists() else {}
    old = time.time() - 3600
    for key, opts in sessions.items():
        opts = dict(opts)
        comp = opts.pop("compaction_count", 0)
        info = synth.generate_transcript(sdir, session_id=new_session_id(), **opts)
        os.utime(info.path, (old, old))
        index[key] = {"sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000),
                      "compactionCount": comp, "model": "claude-opus-4-6", "modelProvider": "anthropic"}
        if comp:  # compactions of the last hour, as OpenClaw records them (a rotation counts only recent ones)
            index[key]["compactionCheckpoints"] = recent_checkpoints(comp, old)
    idx_path.write_text(json.dumps(index, indent=2))
    return state


def recent_checkpoints(n: int, before: float) -> list[dict]:
    """OpenClaw's compactionCheckpoints for `n` compactions in the minutes before `before`."""
    return [{"reason": "threshold", "createdAt": int((before - 60 * (n - i)) * 1000)} for i in range(n)]


def ctx_for(state: Path, led, **policy) -> JobContext:
    s = load_settings({"state_dir": str(state), "policy": {"min_idle_minutes": 5, **policy}})
    return JobContext(settings=s, ledger=led, state_dir=state)


def test_scan_is_incremental_and_records_only_changes(isolated_env):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 30}, "agent:main:b": {"turns": 10, "seed": 2}})
    total = sum(p.stat().st_size for p in (state / "agents/main/sessions").glob("*.jsonl"))
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        r1 = run_cycle(ctx, ["scan"])["scan"][1]
        assert r1["sessions"] == 2 and r1["changed"] == 2
        assert 0 < r1["bytesRead"] < total  # tails only, not whole files
        r2 = run_cycle(ctx, ["scan"])["scan"][1]
        assert r2 == {**r2, "changed": 0, "bytesRead": 0}
        # an appended reply: only the new bytes are read, and the new usage is seen
        idx = json.loads((state / "agents/main/sessions/sessions.json").read_text())
        path = Path(idx["agent:main:main"]["sessionFile"])
        line = json.dumps({"type": "message", "id": "feedbeef", "parentId": None, "timestamp": "2026-11-22T10:00:00.000Z",
                           "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
                                       "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                                 "totalTokens": 77777}, "stopReason": "stop", "timestamp": 1}})
        with open(path, "a") as fh:
            fh.write(line + "\n")
        r3 = run_cycle(ctx, ["scan"])["scan"][1]
        # the appended bytes plus a small verification window (scanstate.MARK bytes before the old end, and the
        # line-end probe), never the whole file again
        from occd.jobs.scanstate import MARK

        assert r3["changed"] == 1 and len(line) + 1 <= r3["bytesRead"] <= len(line) + 1 + 2 * MARK + 1
        latest = {o["session_key"]: o for o in led.latest_observations()}
        assert latest["agent:main:main"]["context_tokens"] == 77777
        assert led.last_scan()["sessions_seen"] == 2


def test_observe_mode_records_what_it_would_do_and_changes_nothing(isolated_env):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 60, "tools_per_turn": 3}}, window=150_000)
    before = {p: p.read_bytes() for p in (state / "agents/main/sessions").glob("*.jsonl")}
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="observe")
        res = run_cycle(ctx, ["scan", "apply"])
        assert res["apply"][1]["wouldDo"] == 1 and res["apply"][1]["acted"] == 0
        run_cycle(ctx, ["scan", "apply"])  # the same would-do is not recorded twice within the hour
        acts = led.history(kind="strip")
    assert len(acts) == 1 and acts[0]["dry_run"] and "observe mode" in acts[0]["reason"]
    assert {p: p.read_bytes() for p in before} == before


def test_act_mode_strips_once_through_the_action_path(isolated_env, oracle):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 60, "tools_per_turn": 3}}, window=150_000)
    (path,) = [p for p in (state / "agents/main/sessions").glob("*.jsonl")]
    orig = isolated_env / "orig.jsonl"
    orig.write_bytes(path.read_bytes())
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "apply"])
        assert res["apply"][1]["acted"] == 1
        res = run_cycle(ctx, ["scan", "apply"])  # nothing new since the strip: not stripped again
        assert res["apply"][1]["acted"] == 0 and res["scan"][1]["bytesRead"] == 0
        acts = [a for a in led.history(kind="strip") if a["outcome"] == "ok"]
        assert len(acts) == 1 and acts[0]["trigger"] == "auto" and acts[0]["policy"]
        assert acts[0]["backup_path"] and Path(acts[0]["backup_path"]).read_bytes() == orig.read_bytes()
        obs = led.latest_observations()[0]
        # the figure after the strip, like with like: the usage before minus what the estimate says was removed
        st = acts[0]["after"]
        assert obs["tokens_source"] == "estimate" and obs["context_tokens"] == st["tokensAfterEstimate"]
        assert st["tokensAfterEstimate"] == st["tokensBefore"] - (st["estimateBefore"] - st["estimateAfter"])
        assert obs["context_tokens"] < 150_000 * 0.6
    assert oracle.check(path)["ok"] and oracle.compare(orig, path)["ok"]


def test_running_session_is_deferred_not_touched(isolated_env):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 60, "tools_per_turn": 3}}, window=150_000)
    (path,) = list((state / "agents/main/sessions").glob("*.jsonl"))
    from occd.openclaw.locks import proc_starttime

    Path(str(path) + ".lock").write_text(json.dumps({"pid": os.getpid(), "starttime": proc_starttime(os.getpid())}))
    before = path.read_bytes()
    with Ledger.open() as led:
        res = run_cycle(ctx_for(state, led, mode="act"), ["scan", "apply"])
        assert res["apply"][1]["deferred"] == 1
        assert led.history(kind="strip")[0]["outcome"] == "deferred"
    assert path.read_bytes() == before


def test_breaker_trips_after_max_actions(isolated_env):
    sessions = {f"agent:main:s{i}": {"turns": 60, "tools_per_turn": 3, "seed": 100 + i} for i in range(4)}
    state = state_with(isolated_env, sessions, window=50_000)
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act", max_actions_per_hour=100, breaker={"max_actions": 2})
        res = run_cycle(ctx, ["scan", "apply"])["apply"][1]
        assert res["acted"] == 2 and res["blocked"] == 2
        assert led.get_breaker("main", "strip").state == "open"
        assert led.breaker_transitions("main", "strip")[0]["to_state"] == "open"


@pytest.mark.parametrize("damage", ["empty", "truncated", "not-object", "missing-file"])
def test_bad_index_is_reported_and_next_cycle_works(isolated_env, damage):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 10}})
    idx = state / "agents/main/sessions/sessions.json"
    good = idx.read_text()
    if damage == "empty":
        idx.write_text("")
    elif damage == "truncated":
        idx.write_text(good[: len(good) // 2])
    elif damage == "not-object":
        idx.write_text("[1, 2]")
    else:
        data = json.loads(good)
        data["agent:main:gone"] = {"sessionId": "gone", "sessionFile": str(state / "nope.jsonl")}
        idx.write_text(json.dumps(data))
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] >= 1
        assert led.last_scan()["errors"] >= 1 and led.last_scan()["error_text"]
        idx.write_text(good)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 0 and s["sessions"] == 1
    if damage != "missing-file":
        assert idx.read_text() == good  # never rewritten by the scan


def test_missing_state_dir_is_a_clear_scan_error(isolated_env):
    with Ledger.open() as led:
        ctx = ctx_for(isolated_env / "nowhere", led)
        ok, s = run_cycle(ctx, ["scan"])["scan"]
        assert ok and s["errors"] == 1 and "does not exist" in led.last_scan()["error_text"]


def test_transcript_deleted_during_scan(isolated_env, monkeypatch):
    state = state_with(isolated_env, {"agent:main:a": {"turns": 5}, "agent:main:b": {"turns": 5, "seed": 9}})
    import occd.jobs.scanstate as scanstate

    real = scanstate._file_tokens
    calls = {"n": 0}

    def vanish(path, st, cached, result):
        calls["n"] += 1
        if calls["n"] == 1:
            path.unlink()
        return real(path, st, cached, result)

    monkeypatch.setattr(scanstate, "_file_tokens", vanish)
    with Ledger.open() as led:
        ok, s = run_cycle(ctx_for(state, led), ["scan"])["scan"]
    assert ok and s["sessions"] == 1 and s["errors"] == 1


def test_full_disk_on_edit_leaves_original(isolated_env, monkeypatch):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 60, "tools_per_turn": 3}}, window=150_000)
    (path,) = list((state / "agents/main/sessions").glob("*.jsonl"))
    before = path.read_bytes()
    import errno

    import importlib

    rw = importlib.import_module("occd.transcript.rewrite")

    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rw.os, "fsync", full)
    with Ledger.open() as led:
        res = run_cycle(ctx_for(state, led, mode="act"), ["scan", "apply"])["apply"][1]
        assert res["failed"] == 1
        act = led.history(kind="strip")[0]
        assert act["outcome"] == "failed" and "Failed to write" in act["error"]
    monkeypatch.setattr(rw.os, "fsync", real_fsync)
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if "occd-tmp" in p.name or ".backup." in p.name]


def test_run_once_cli_and_status_history(isolated_env):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 60, "tools_per_turn": 3}}, window=150_000)
    r = CliRunner().invoke(cli, ["run", "--once", "--act", "--state-dir", str(state), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["success"] and out["jobs"]["apply"]["acted"] == 1
    r = CliRunner().invoke(cli, ["status", "--json"])
    st = json.loads(r.stdout)
    assert st["daemon"]["running"] is False and st["agents"][0]["id"] == "main"
    assert st["agents"][0]["actions24h"]["strip"]["ok"] == 1
    sid = st["agents"][0]["biggest"][0]["sessionId"]
    r = CliRunner().invoke(cli, ["status", sid[:8]])
    assert r.exit_code == 0 and "compactions" in r.output and "Backups: 1 kept" in r.output
    r = CliRunner().invoke(cli, ["history", "--kind", "strip", "--since", "1h", "--json"])
    assert len(json.loads(r.stdout)["actions"]) == 1
    r = CliRunner().invoke(cli, ["history", "--since", "banana"])
    assert r.exit_code == 2


def test_status_without_ledger(isolated_env):
    r = CliRunner().invoke(cli, ["status"])
    assert r.exit_code == 0 and "the ledger: occd has not run a cycle yet" in r.output  # issue 32 §15 wording


def _start_daemon(env, extra=()):
    return subprocess.Popen([sys.executable, "-m", "occd", "run", "--interval", "1h", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_daemon_single_instance_sigterm_and_sd_notify(isolated_env, tmp_path):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 10}})
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(20)
    env = {**os.environ, "NOTIFY_SOCKET": str(sock_path), "OPENCLAW_STATE_DIR": str(state)}
    p = _start_daemon(env)
    try:
        msg = sock.recv(4096).decode()
        assert "READY=1" in msg
        from occd.runtime.lock import InstanceLock
        from occd.runtime.statusfile import read_status

        assert _wait_for(lambda: (read_status() or {}).get("lastCycle"))
        assert InstanceLock.holder() == p.pid
        second = subprocess.run([sys.executable, "-m", "occd", "run"], env={**env, "NOTIFY_SOCKET": ""},
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 75 and f"already running (pid {p.pid})" in second.stderr
        p.send_signal(signal.SIGHUP)  # reload: keeps running
        time.sleep(0.5)
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
        seen = []
        while not any("STOPPING=1" in m for m in seen):
            seen.append(sock.recv(4096).decode())  # socket timeout (20 s) fails the test
        assert any("STOPPING=1" in m for m in seen)
    finally:
        if p.poll() is None:
            p.kill()
        sock.close()
    with Ledger.open() as led:
        run = led.latest_daemon_run()
        assert run["stopped"] is not None


@pytest.mark.slow
def test_demo_runs_offline_fast(isolated_env, tmp_path):
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "occd", "demo", "--keep", str(tmp_path / "demo")], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 < 30
    assert "cycle 1:" in r.stdout and "stripped" in r.stdout and "act mode" in r.stdout
    assert "deferred: a run is in progress" in r.stdout
    assert not (isolated_env / ".openclaw").exists()  # nothing outside the demo dir


def test_last_seen_is_the_last_scan_that_looked_even_when_nothing_changed(isolated_env):
    """Issue 16: `status SESSION` showed lastSeen = firstSeen for a quiet session (the ledger writes no
    observation when nothing changed). lastSeen is the daemon's last look, to within one scan."""
    from datetime import datetime, timezone

    state = state_with(isolated_env, {"agent:main:main": {"turns": 12}})
    t1 = time.time() - 1800
    t2 = t1 + 600  # ten minutes later: nothing in the session changed
    clock = [t1]
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        ctx.clock = lambda: clock[0]
        assert run_cycle(ctx, ["scan"])["scan"][1]["changed"] == 1
        clock[0] = t2
        assert run_cycle(ctx, ["scan"])["scan"][1]["changed"] == 0  # a quiet scan: no observation written
        sid = led.sessions("main")[0]["session_id"]

    def iso(t):
        return datetime.fromtimestamp(t, tz=timezone.utc)

    out = json.loads(CliRunner().invoke(cli, ["status", sid, "--json"], catch_exceptions=False).output)
    first, last = (datetime.fromisoformat(out[k].replace("Z", "+00:00")) for k in ("firstSeen", "lastSeen"))
    assert abs((first - iso(t1)).total_seconds()) < 1
    assert abs((last - iso(t2)).total_seconds()) < 1  # the second scan's time, not the first's
    human = CliRunner().invoke(cli, ["status", sid], catch_exceptions=False).output
    assert "first seen 30m ago, last seen 20m ago" in human, human
