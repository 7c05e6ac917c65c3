"""The jobs one by one: prune, maintain, apply's exclude / hourly limit / database era / migration-pending
agents, and the scan's compaction counts and stop flag."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from occd.config import load_settings
from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger
from occd.openclaw import new_session_id
from occd.transcript import synth


def make_state(home: Path, sessions: dict, agent="main", window=50_000) -> Path:
    state = home / ".openclaw"
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": window}]}}}}))
    old = time.time() - 3600
    idx = sdir / "sessions.json"
    index = json.loads(idx.read_text()) if idx.exists() else {}
    for key, opts in sessions.items():
        opts = dict(opts)
        comp = opts.pop("compaction_count", None)
        info = synth.generate_transcript(sdir, session_id=new_session_id(), **opts)
        os.utime(info.path, (old, old))
        e = {"sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000),
             "model": "claude-opus-4-6", "modelProvider": "anthropic"}
        if comp is not None:
            e["compactionCount"] = comp
        index[key] = e
    idx.write_text(json.dumps(index, indent=2))
    return state


def ctx_for(state, led, **policy):
    s = load_settings({"state_dir": str(state), "backups_keep": 2, "policy": {"min_idle_minutes": 5, **policy}})
    return JobContext(settings=s, ledger=led, state_dir=state)


BIG = {"turns": 60, "tools_per_turn": 3}


def test_exclude_globs_and_hourly_limit(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}, "agent:main:cron:a": {**BIG, "seed": 2},
                                      "agent:main:b": {**BIG, "seed": 3}, "agent:main:c": {**BIG, "seed": 4}})
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act", exclude=["agent:main:cron:*"], max_actions_per_hour=2)
        res = run_cycle(ctx, ["scan", "apply"])["apply"][1]
        assert res["acted"] == 2 and res["blocked"] == 1  # cron excluded; the third hits the hourly limit
        keys = {a["session_key"] for a in led.history(kind="strip") if a["outcome"] == "ok"}
        assert "agent:main:cron:a" not in keys and len(keys) == 2
        blocked = [a for a in led.history(kind="strip") if "max_actions_per_hour" in (a["reason"] or "")]
        assert len(blocked) == 1 and blocked[0]["outcome"] != "ok"


def test_observe_mode_records_again_when_the_figure_changes(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": BIG})
    (path,) = list((state / "agents/main/sessions").glob("*.jsonl"))
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="observe")
        run_cycle(ctx, ["scan", "apply"])
        run_cycle(ctx, ["scan", "apply"])
        assert len(led.history(kind="strip")) == 1
        line = json.dumps({"type": "message", "id": "abcd1234", "parentId": None,
                           "timestamp": "2026-11-22T10:00:00.000Z",
                           "message": {"role": "assistant", "content": [{"type": "text", "text": "x"}],
                                       "usage": {"totalTokens": 45_000}, "stopReason": "stop", "timestamp": 1}})
        with open(path, "a") as fh:
            fh.write(line + "\n")
        old = time.time() - 3600
        os.utime(path, (old, old))
        run_cycle(ctx, ["scan", "apply"])
        rows = led.history(kind="strip")
        assert len(rows) == 2 and "90%" in rows[0]["reason"] and all(r["dry_run"] for r in rows)


def test_database_era_compacts_through_openclaw_and_defers_when_gateway_down(isolated_env, monkeypatch):
    """A db-era agent whose user allowed compaction (policy.compact_db_sessions): the scan reads the read-only
    store; the action is `openclaw sessions compact <key>`; a gateway that is down defers (recorded), and the
    database is never written."""
    import occd.jobs.apply as apply_mod
    from occd.errors import BusyError
    from occd.jobs.scan import SessionObs, ScanResult

    calls = []

    class FakeGateway:
        def __init__(self, state_dir):
            pass

        def sessions_compact(self, key):
            calls.append(key)
            if len(calls) == 1:
                raise BusyError("The OpenClaw gateway is not running", "occd waits and retries when it is up")
            return {"ok": True}

    import occd.openclaw.gateway as gw

    monkeypatch.setattr(gw, "Gateway", FakeGateway)
    state = isolated_env / ".openclaw"
    state.mkdir()
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act", compact_db_sessions=True)
        obs = SessionObs("main", "db", "sid-1", "agent:main:main", None, None, 2, 45_000, "index", 50_000, None,
                         time.time() - 3600)
        ctx.last_scan = ScanResult(started=time.time(), sessions=[obs], agents={"main": "db"})
        res = apply_mod.run(ctx)
        assert res["deferred"] == 1 and calls == ["agent:main:main"]
        assert led.history(kind="compact")[0]["outcome"] == "deferred"
        res = apply_mod.run(ctx)
        assert res["acted"] == 1
        assert led.history(kind="compact")[0]["outcome"] == "ok"


def test_needs_migration_agent_is_reported_not_touched(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": BIG})
    db = state / "agents/main/agent/openclaw-agent.sqlite"
    db.parent.mkdir(parents=True)
    c = sqlite3.connect(db)  # a database-era agent database (session tables) beside files it has not imported
    c.execute("CREATE TABLE session_nodes (session_key TEXT PRIMARY KEY)")
    c.commit()
    c.close()
    before = {p: p.read_bytes() for p in (state / "agents/main/sessions").iterdir()}
    with Ledger.open() as led:
        ok, s = run_cycle(ctx_for(state, led, mode="act"), ["scan", "apply"])["apply"]
        assert ok and s["acted"] == 0 and s["considered"] == 0
        assert {a["id"]: a["era"] for a in led.agents()}["main"] == "needs-migration"
        assert "doctor --fix" in led.last_scan()["error_text"]
        assert led.latest_observations()  # still reported
    assert {p: p.read_bytes() for p in before} == before


def test_compaction_counts_from_index_and_from_appended_entries(isolated_env):
    state = make_state(isolated_env, {"agent:main:a": {"turns": 10, "compaction_count": 4},
                                      "agent:main:b": {"turns": 10, "seed": 5}})
    (pb,) = [Path(e["sessionFile"]) for k, e in json.loads(
        (state / "agents/main/sessions/sessions.json").read_text()).items() if k == "agent:main:b"]
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
        got = {o["session_key"]: o["compaction_count"] for o in led.latest_observations()}
        assert got == {"agent:main:a": 4, "agent:main:b": 0}
        comp = json.dumps({"type": "compaction", "id": "c0mpact1", "parentId": None,
                           "timestamp": "2026-11-22T10:00:00.000Z", "summary": "s", "firstKeptEntryId": "x",
                           "tokensBefore": 1000})
        with open(pb, "a") as fh:
            fh.write(comp + "\n")
        run_cycle(ctx, ["scan"])
        got = {o["session_key"]: o["compaction_count"] for o in led.latest_observations()}
        assert got["agent:main:b"] == 1


def test_stop_flag_keeps_the_cache_of_unvisited_files(isolated_env):
    state = make_state(isolated_env, {f"agent:main:s{i}": {"turns": 5, "seed": i} for i in range(3)})
    import occd.jobs.scan as scan_mod

    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
        n = len(ctx.cache[scan_mod.CACHE_KEY])
        ctx.stop.set()
        scan_mod.run(ctx)
        assert len(ctx.cache[scan_mod.CACHE_KEY]) == n
        ctx.stop.clear()
        assert run_cycle(ctx, ["scan"])["scan"][1]["bytesRead"] == 0


def test_prune_keeps_newest_backups_and_records_them(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": BIG})
    (path,) = list((state / "agents/main/sessions").glob("*.jsonl"))
    from occd.actions import backups

    made = []
    with Ledger.open() as led:
        for i in range(4):
            b = path.with_name(f"{path.stem}.backup.{1700000000 + i}.jsonl")
            b.write_bytes(path.read_bytes())
            led.record_backup(b, "main", path.stem, size=b.stat().st_size)
            made.append(b)
        res = run_cycle(ctx_for(state, led), ["prune"])["prune"]
        assert res[0] and res[1]["pruned"] == 2
        kept = sorted(p.name for p in path.parent.glob("*.backup.*"))
        assert kept == sorted(p.name for p in made[2:])
        assert len(led.backups(include_pruned=True)) == 4 and len(led.backups()) == 2
        assert path.exists() and backups  # the transcript itself untouched
        res = run_cycle(ctx_for(state, led), ["prune"])["prune"]
        assert res[1]["pruned"] == 0


def test_maintain_prunes_old_observations_and_checkpoints(isolated_env):
    from occd import paths

    with Ledger.open() as led:
        now = time.time()
        for d in (400, 200, 1):
            led.record_observations([dict(agent="main", session_id="s", context_tokens=d, compaction_count=0)],
                                    now=now - d * 86400)
        s = load_settings({"daemon": {"observation_retention_days": 365}})
        ctx = JobContext(settings=s, ledger=led, state_dir=isolated_env)
        ok, res = run_cycle(ctx, ["maintain"])["maintain"]
        assert ok and res["observationsRemoved"] >= 1
        assert [o["context_tokens"] for o in led.series("main", "s")] == [200, 1]
    wal = Path(str(paths.ledger_path()) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_ensure_scan_runs_a_scan_only_when_the_cycle_left_none(isolated_env):
    from occd.jobs import scan as scan_mod

    state = make_state(isolated_env, {"agent:main:main": {"turns": 2, "seed": 1}})
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        assert ctx.last_scan is None
        first = scan_mod.ensure_scan(ctx)
        assert first is ctx.last_scan and [o.session_key for o in first.sessions] == ["agent:main:main"]
        assert len(led.scans()) == 1
        assert scan_mod.ensure_scan(ctx) is first and len(led.scans()) == 1  # the cycle's scan is reused
