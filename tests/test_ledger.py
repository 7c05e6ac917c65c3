"""The Ledger facade: recording, queries for status/history, locking behaviour, and index use."""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import asdict

import pytest
from sqlalchemy import event

from occd import paths
from occd.errors import BusyError, OccdError
from occd.ledger import Ledger
from occd.policy import breaker as b

NOW = 1_800_000_000.0


@pytest.fixture
def led(tmp_path):
    led = Ledger.open()
    yield led
    led.close()


def obs(**kw):
    base = dict(compaction_count=1, context_tokens=50_000, tokens_source="usage", context_window=200_000,
                size=12_345, entry_count=40, last_activity=NOW - 60)
    base.update(kw)
    return base


def test_open_uses_occd_home_and_private_file(led, tmp_path):
    assert led.path == paths.ledger_path() == tmp_path / "occd-home" / "ledger.db"
    assert oct(led.path.stat().st_mode & 0o777) == "0o600"
    with led.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert c.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000


def test_observation_recorded_only_when_changed(led):
    assert led.record_observation("main", "s1", session_key="agent:main:main", path="/p/s1.jsonl", era="file",
                                  now=NOW, **obs())
    assert not led.record_observation("main", "s1", session_key="agent:main:main", now=NOW + 300, **obs())
    assert led.record_observation("main", "s1", now=NOW + 600, **obs(context_tokens=60_000))
    assert not led.record_observation("main", "s1", now=NOW + 900, **obs(context_tokens=60_000))
    ser = led.series("main", "s1")
    assert [r["ts"] for r in ser] == [NOW, NOW + 600]
    assert [r["context_tokens"] for r in ser] == [50_000, 60_000]
    assert led.series("main", "s1", since=NOW + 1) == ser[1:]
    (latest,) = led.latest_observations()
    assert latest["context_tokens"] == 60_000 and latest["session_key"] == "agent:main:main"
    assert latest["path"] == "/p/s1.jsonl" and latest["agent"] == "main"
    (agent,) = led.agents()
    assert agent["era"] == "file" and agent["sessions"] == 1
    with pytest.raises(TypeError):
        led.record_observation("main", "s1", now=NOW, tokens=5)


def test_batch_observations_and_last_seen_resolution(led):
    items = [dict(agent="a", session_id=f"s{i}", session_key=f"k{i}", **obs(context_tokens=i)) for i in range(20)]
    assert led.record_observations(items, now=NOW) == 20
    assert led.record_observations(items, now=NOW + 300) == 0  # a quiet scan writes no observation
    assert len(led.series("a", "s3")) == 1
    # but each session's last_seen is the scan that saw it (status SESSION: the daemon's last look)
    assert all(s["last_seen"] == NOW + 300 for s in led.sessions("a"))
    assert led.record_observations(items[:10], now=NOW + 600) == 0
    assert sorted({s["last_seen"] for s in led.sessions("a")}) == [NOW + 300, NOW + 600]
    assert all(s["first_seen"] == NOW for s in led.sessions("a"))
    items[3]["size"] = 1
    assert led.record_observations(items, now=NOW + 3900) == 1
    # the biggest sessions by context come first
    assert [r["session_id"] for r in led.latest_observations("a")[:2]] == ["s19", "s18"]


def test_key_change_and_archive(led):
    led.record_observation("main", "s1", session_key="k1", now=NOW, **obs())
    led.record_observation("main", "s1", session_key="k2", now=NOW + 1, **obs())
    assert led.sessions("main")[0]["session_key"] == "k2"
    led.mark_session_archived("main", "s1", "/p/archive/s1.jsonl", now=NOW + 2)
    assert led.latest_observations() == []
    assert len(led.latest_observations(include_archived=True)) == 1
    assert led.sessions("main", include_archived=False) == []


def test_actions_history_filters(led):
    led.record_action("edit", "main", "abc-1", "agent:main:main", outcome="ok", before={"messages": 45},
                      after={"messages": 38}, backup_path="/p/abc-1.backup.1.jsonl", now=NOW - 8 * 86400)
    led.record_action("strip", "main", "abc-1", "agent:main:main", trigger="auto", policy="strip_at_context_percent",
                      reason="context 65%", dry_run=True, outcome="skipped", now=NOW - 3600)
    led.record_action("rotate", "ops", "def-2", "agent:ops:main", trigger="auto", outcome="failed",
                      error="disk full", now=NOW - 60)
    assert [a["kind"] for a in led.history()] == ["rotate", "strip", "edit"]
    assert [a["kind"] for a in led.history(agent="main")] == ["strip", "edit"]
    assert [a["kind"] for a in led.history(kind="edit")] == ["edit"]
    assert [a["kind"] for a in led.history(since=NOW - 7 * 86400)] == ["rotate", "strip"]
    assert [a["kind"] for a in led.history(session="abc")] == ["strip", "edit"]
    assert [a["kind"] for a in led.history(session="agent:ops")] == ["rotate"]
    assert led.history(session="%") == []  # LIKE wildcards are literal
    e = led.history(kind="edit")[0]
    assert e["before"] == {"messages": 45} and e["after"] == {"messages": 38} and e["dry_run"] is False
    assert led.history(kind="strip")[0]["dry_run"] is True
    counts = led.action_counts_since(NOW - 86400)
    assert counts == {"main": {"strip": {"dry_run": 1}}, "ops": {"rotate": {"failed": 1}}}
    assert led.action_times("ops", "rotate", NOW - 3600) == [(NOW - 60, "failed")]
    assert led.action_times("main", "strip", NOW - 7200) == []  # dry runs are not actions
    with pytest.raises(ValueError):
        led.record_action("edit", outcome="great")


def test_backups(led):
    aid = led.record_action("edit", "main", "s1", now=NOW)
    led.record_backup("/p/s1.backup.1.jsonl", "main", "s1", size=10, action_id=aid, now=NOW)
    led.record_backup("/p/s1.backup.2.jsonl", "main", "s1", size=11, now=NOW + 1)
    assert [x["path"] for x in led.backups("main", "s1")] == ["/p/s1.backup.2.jsonl", "/p/s1.backup.1.jsonl"]
    assert led.mark_backup_pruned("/p/s1.backup.1.jsonl", now=NOW + 2)
    assert not led.mark_backup_pruned("/p/s1.backup.1.jsonl", now=NOW + 3)
    assert [x["path"] for x in led.backups("main", "s1")] == ["/p/s1.backup.2.jsonl"]
    assert len(led.backups(include_pruned=True)) == 2


def test_scans_and_daemon_heartbeat(led):
    led.record_scan(NOW, 0.12, agents=2, sessions_seen=10, sessions_changed=1, bytes_read=4096)
    led.record_scan(NOW + 300, 0.05, agents=2, sessions_seen=10, errors=1, error_text="sessions.json truncated")
    last = led.last_scan()
    assert last["started"] == NOW + 300 and last["errors"] == 1
    run = led.daemon_started(1234, mode="observe", now=NOW)
    led.heartbeat(run, NOW + 300, last_cycle=NOW + 300, next_scan=NOW + 600)
    d = led.latest_daemon_run()
    assert (d["pid"], d["heartbeat"], d["next_scan"], d["stopped"]) == (1234, NOW + 300, NOW + 600, None)
    # a new start closes a run that never stopped cleanly
    run2 = led.daemon_started(999, now=NOW + 1000)
    assert led.latest_daemon_run()["id"] == run2
    led.daemon_stopped(run2, NOW + 1100, "SIGTERM")
    assert led.latest_daemon_run()["exit_reason"] == "SIGTERM"


def test_breakers_round_trip_with_policy_states(led):
    assert led.get_breaker("main", "strip").state == "closed"
    from occd.config import BreakerSettings

    g = b.gate(b.BreakerState("main", "strip"), BreakerSettings(max_actions=1), [(NOW - 1, "ok")], NOW)
    led.set_breaker(g.state, g.transitions, now=NOW)
    rec = led.get_breaker("main", "strip")
    assert rec.state == "open" and rec.opened_at == NOW
    assert b.BreakerState(**asdict(rec)).state == "open"
    (t,) = led.breaker_transitions("main")
    assert (t["from_state"], t["to_state"]) == ("closed", "open")
    led.record_breaker_transition("main", "strip", "open", "closed", "manual reset", now=NOW + 5)
    assert len(led.breaker_transitions()) == 2
    assert [r.kind for r in led.breakers()] == ["strip"]


def test_rotation_state_machine_rows(led):
    rid = led.rotation_upsert(agent_id="main", session_key="agent:main:main", old_session_id="old",
                              old_path="/p/old.jsonl", seed_budget_percent=15, compactions_before=3,
                              reason="3 compactions", now=NOW)
    assert led.unfinished_rotations()[0]["id"] == rid
    assert led.rotation_transition(rid, "ARCHIVING", now=NOW + 1)
    assert not led.rotation_transition(rid, "ARCHIVING", now=NOW + 2)  # idempotent
    assert led.rotation_transition(rid, "ARCHIVED", now=NOW + 3, archive_path="/p/archive/old.jsonl")
    assert led.rotation_transition(rid, "INJECTED", now=NOW + 4, new_session_id="new", details={"seedTokens": 900})
    assert led.rotation_transition(rid, "COOLDOWN", now=NOW + 5)
    r = led.rotation_get(rid)
    assert r["state"] == "COOLDOWN" and r["finished"] == NOW + 5 and r["archive_path"] == "/p/archive/old.jsonl"
    assert r["details"] == {"seedTokens": 900} and r["new_session_id"] == "new"
    assert [h["to_state"] for h in led.rotation_history(rid)] == ["PENDING", "ARCHIVING", "ARCHIVED", "INJECTED",
                                                                 "COOLDOWN"]
    assert led.unfinished_rotations() == []
    assert led.last_rotation("main", "agent:main:main")["id"] == rid
    led.rotation_upsert(rid, health="unhealthy", now=NOW + 100)
    assert led.rotation_get(rid)["health"] == "unhealthy"
    with pytest.raises(ValueError):
        led.rotation_transition(rid, "EXPLODED")
    with pytest.raises(OccdError):
        led.rotation_transition(9999, "IDLE")


def test_score_cache_and_llm_spend(led):
    assert led.score_get("s1", "fp1", "t1") is None
    led.score_put("s1", "fp1", "t1", 0.7, "model", reason="same repo", model="gpt-4o-mini", now=NOW)
    led.score_put("s1", "fp1", "t1", 0.4, "keywords", now=NOW + 1)
    got = led.score_get("s1", "fp1", "t1")
    assert got["score"] == 0.4 and got["method"] == "keywords"
    assert led.latest_scores()["s1"]["score"] == 0.4
    day = time.mktime((2027, 1, 15, 12, 0, 0, 0, 0, -1))
    led.record_llm_call("gpt-4o-mini", prompt_tokens=900, completion_tokens=80, cost_usd=0.0002, now=day - 86400)
    led.record_llm_call("gpt-4o-mini", prompt_tokens=900, completion_tokens=80, cost_usd=0.0003, now=day - 3600)
    led.record_llm_call("gpt-4o-mini", outcome="timeout", now=day)
    assert led.spend_today(day) == pytest.approx(0.0003)
    assert led.llm_usage(day - 7200)["calls"] == 2


def test_prune_observations_keeps_latest(led):
    for i in range(10):
        led.record_observation("main", "s1", now=NOW + i * 86400, **obs(size=i))
    led.record_observation("main", "s2", now=NOW, **obs())
    assert led.prune_observations(NOW + 5 * 86400) == 5  # s2's only row is its latest: kept
    assert len(led.series("main", "s1")) == 5 and len(led.series("main", "s2")) == 1
    led.maintain()


def test_writes_use_begin_immediate(led):
    seen = []
    event.listen(led.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    led.record_action("edit", "main", "s1", now=NOW)
    led.history()
    assert "BEGIN IMMEDIATE" in seen and "BEGIN DEFERRED" in seen
    assert seen.index("BEGIN IMMEDIATE") < next(i for i, s in enumerate(seen) if s.startswith("INSERT INTO actions"))


def test_locked_ledger_is_busy_error_and_reads_still_work(tmp_path):
    led = Ledger.open(busy_timeout=0.2)
    led.record_action("edit", "main", "s1", now=NOW)
    other = sqlite3.connect(led.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO agents VALUES ('x', NULL, 0, 0)")
    try:
        t0 = time.monotonic()
        with pytest.raises(BusyError) as e:
            led.record_action("edit", "main", "s2", now=NOW)
        assert e.value.exit_code == 75 and time.monotonic() - t0 >= 0.15
        assert len(led.history()) == 1  # WAL: readers are not blocked by the writer
    finally:
        other.execute("ROLLBACK")
        other.close()
    led.record_action("edit", "main", "s2", now=NOW)
    assert len(led.history()) == 2
    led.close()


def test_readonly_open(tmp_path):
    with pytest.raises(OccdError) as e:
        Ledger.open(readonly=True)
    assert e.value.code == "LEDGER_MISSING"
    w = Ledger.open()
    w.record_action("edit", "main", "s1", now=NOW)
    w.close()
    r = Ledger.open(readonly=True)
    assert len(r.history()) == 1
    with pytest.raises(OccdError) as e:
        r.record_action("edit", now=NOW)
    assert e.value.code == "LEDGER_READONLY"
    r.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write a read-only file")
def test_unwritable_ledger_has_hint(tmp_path):
    Ledger.open().close()
    p = paths.ledger_path()
    p.chmod(0o400)
    try:
        with pytest.raises(OccdError) as e:
            Ledger.open()
        assert e.value.code == "LEDGER_READONLY" and "permissions" in e.value.hint
    finally:
        p.chmod(0o600)


def test_readonly_sqlite_error_is_translated(tmp_path):
    """Whatever makes SQLite refuse a write (a read-only mount, permissions) becomes a clear OccdError."""
    Ledger.open().close()
    from occd.ledger.engine import make_engine

    led = Ledger.open()
    led.engine.dispose()
    led.engine = make_engine(led.path, readonly=True)  # SQLite itself refuses the write
    with pytest.raises(OccdError) as e:
        led.record_action("edit", now=NOW)
    assert e.value.code == "LEDGER_READONLY" and e.value.hint
    led.close()


def test_unopenable_location(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("OCCD_HOME", str(blocker / "sub"))
    with pytest.raises(OccdError) as e:
        Ledger.open()
    assert e.value.code == "LEDGER_UNAVAILABLE"


STATUS_QUERIES = {
    "latest": ("SELECT o.* FROM sessions s JOIN observations o ON o.id = (SELECT id FROM observations WHERE "
               "session_pk = s.id ORDER BY ts DESC, id DESC LIMIT 1)", (), "ix_observations_session_ts"),
    "actions24h": ("SELECT * FROM actions WHERE ts >= ? ORDER BY ts DESC", (NOW,), "ix_actions_ts"),
    "actionTimes": ("SELECT ts, outcome FROM actions WHERE agent_id = ? AND kind = ? AND ts >= ?",
                    ("main", "strip", NOW), "ix_actions_agent_kind_ts"),
    "series": ("SELECT o.ts FROM observations o JOIN sessions s ON s.id = o.session_pk WHERE s.agent_id = ? AND "
               "s.session_id = ? ORDER BY o.ts", ("main", "s1"), "ix_observations_session_ts"),
    "rotations": ("SELECT * FROM rotations WHERE agent_id = ? AND session_key = ? ORDER BY started DESC",
                  ("main", "k"), "ix_rotations_agent_key_started"),
}


@pytest.mark.parametrize("name", sorted(STATUS_QUERIES))
def test_status_queries_use_indexes(led, name):
    for i in range(30):
        led.record_observation("main", f"s{i}", now=NOW + i, **obs())
    with led.engine.connect() as c:
        c.exec_driver_sql("ANALYZE")
    sql, params, index = STATUS_QUERIES[name]
    plan = " | ".join(led.explain(sql, params))
    assert index in plan, plan
    assert "SCAN observations" not in plan and "SCAN actions" not in plan, plan


def test_facade_queries_match_explained_sql(led):
    """The facade's own latest-observation query is the indexed correlated form tested above."""
    import inspect

    from occd.ledger import core

    src = inspect.getsource(core.Ledger.latest_observations)
    assert "(SELECT id FROM observations WHERE session_pk = s.id ORDER BY ts DESC, id DESC LIMIT 1)" in src


def test_series_buckets_for_sparklines(led):
    for i in range(100):
        led.record_observation("main", "s1", now=NOW + i * 300, **obs(context_tokens=1000 + i, size=i))
    rows = led.series_buckets("main", "s1", since=NOW, until=NOW + 99 * 300, buckets=10)
    assert len(rows) == 10 and sum(r["n"] for r in rows) == 100
    assert rows[0]["context_tokens"] == 1009 and rows[-1]["context_tokens"] == 1099
    assert [r["bucket"] for r in rows] == list(range(10))
    assert led.series_buckets("main", "nope", since=NOW, until=NOW + 1) == []
    plan = " | ".join(led.explain(
        "SELECT COUNT(*) FROM observations o WHERE o.session_pk = (SELECT id FROM sessions WHERE agent_id = ? "
        "AND session_id = ?) AND o.ts >= ? AND o.ts <= ?", ("main", "s1", NOW, NOW + 1)))
    assert "ix_observations_session_ts" in plan and "SCAN observations" not in plan, plan


def test_path_with_spaces_hash_and_question_mark(tmp_path):
    p = tmp_path / "odd dir #1?" / "ledger.db"
    with Ledger.open(p) as led:
        led.record_action("edit", "main", "s1", now=NOW)
    assert p.is_file()
    with Ledger.open(p, readonly=True) as ro:
        assert len(ro.history()) == 1
    assert not any(x.name.startswith("odd dir ") and x.name != "odd dir #1?" for x in tmp_path.iterdir())
