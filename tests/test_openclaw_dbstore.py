"""Database-era store on the real 2026.9.6 schema (tests/data): read-only, schema check, zstd, gateway status."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from occd.errors import OccdError
from occd.openclaw import open_store
from occd.openclaw.dbstore import DbStore, connect_ro, decode_event, gateway_status
from occd.transcript import scan
from statefactory import DATA, DbState, message, open_rw, write_lock


@pytest.fixture
def db(tmp_path):
    return DbState(tmp_path / ".openclaw")


def turn_events(n: int, big: bool = False) -> list[dict]:
    out, parent = [], None
    for i in range(n):
        uid, aid = f"u{i:07d}", f"a{i:07d}"
        text = ("long words " * 200) if big else f"question {i}"
        out.append(message("user", text, id=uid, parent=parent))
        out.append(message("assistant", f"answer {i}", id=aid, parent=uid,
                           usage={"input": 100 + i, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 105}))
        parent = aid
    return out


def test_sessions_valid_only_newest_first(db):
    now = int(time.time() * 1000)
    a = db.add_session("agent:main:main", session_id="aa11-main", events=turn_events(2), updated_at=now - 1000,
                       entry={"compactionCount": 3, "totalTokens": 4567, "label": "L"})
    b = db.add_session("agent:main:telegram:dm:1", session_id="aa22-tg", events=turn_events(1), updated_at=now, status="running",
                       entry={"chatType": "direct"})
    db.add_session("agent:main:broken", valid=False)
    db.add_session("agent:main:archived", archived=True)
    store = open_store(db.state_dir, "main")
    assert isinstance(store, DbStore) and store.era == "db" and store.sessions_dir is None
    got = store.sessions()
    assert [(s.key, s.session_id) for s in got] == [("agent:main:telegram:dm:1", b), ("agent:main:main", a)]
    assert got[1].compaction_count == 3 and got[1].total_tokens == 4567 and got[1].context_tokens == 128000
    assert got[1].path is None and got[1].size > 0 and got[0].chat_type == "direct"
    assert store.is_running(got[0]) and not store.is_running(got[1])
    assert any("invalid" in w for w in store.warnings)
    with pytest.raises(OccdError) as ei:
        store.resolve("aa")
    assert ei.value.code == "AMBIGUOUS_SESSION"
    assert store.resolve("aa1").key == "agent:main:main" and store.resolve("agent:main:main").session_id == a


def test_read_lines_plain_and_zstd_match_the_events(db, tmp_path):
    events = turn_events(3, big=True)
    sid = db.add_session("agent:main:main", events=events, compress=True)
    c = sqlite3.connect(db.db_path())
    assert c.execute("SELECT COUNT(*) FROM transcript_events WHERE event_zstd IS NOT NULL").fetchone()[0] == 3
    c.close()
    store = open_store(db.state_dir, "main")
    lines = list(store.read_lines(store.resolve(sid)))
    assert len(lines) == 7 and all(ln.endswith(b"\n") for ln in lines)
    assert [json.loads(ln) for ln in lines[1:]] == events
    # the engine reads them as a transcript
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"".join(lines))
    t = scan(p)
    assert not t.malformed and len(t.turns()) == 3


def test_real_openclaw_zstd_row_decodes():
    """A row compressed by OpenClaw 2026.9.6 itself (Node's zstd) decodes to the recorded size and hash."""
    d = json.loads((DATA / "openclaw-2026.9.6-zstd-event.json").read_text())
    raw = decode_event(None, bytes.fromhex(d["event_zstd_hex"]), d["event_utf8_bytes"])
    assert len(raw) == d["event_utf8_bytes"] and hashlib.sha256(raw).hexdigest() == d["sha256"]
    assert json.loads(raw)["type"] == d["type"]
    with pytest.raises(ValueError):
        decode_event(None, bytes.fromhex(d["event_zstd_hex"]), d["event_utf8_bytes"] + 1)


def test_unreadable_row_is_reported_not_fatal(db):
    sid = db.add_session("agent:main:main", events=turn_events(2, big=True), compress=True)
    c = open_rw(db.db_path())
    with c:
        c.execute("UPDATE transcript_events SET event_zstd = ? WHERE session_id = ? AND seq = 1",
                  (b"\x28\xb5\x2f\xfdgarbage-not-a-frame", sid))
    c.close()
    store = open_store(db.state_dir, "main")
    lines = list(store.read_lines(store.resolve(sid)))
    assert len(lines) == 4
    assert any("seq 1 is unreadable" in w for w in store.warnings)


def test_connection_is_read_only(db):
    db.add_session("agent:main:main", events=turn_events(1))
    store = DbStore(db.state_dir, "main")
    store.sessions()
    before = db.db_path().read_bytes()
    for sql in ("UPDATE session_nodes SET label = 'x'", "DELETE FROM transcript_events",
                "CREATE TABLE occd_was_here (x)"):
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            store.conn().execute(sql)
    c = connect_ro(db.db_path())
    with pytest.raises(sqlite3.OperationalError):
        c.execute("INSERT INTO schema_meta VALUES ('x','x',1,NULL,NULL,1,1)")
    c.close()
    store.close()
    assert db.db_path().read_bytes() == before


def test_path_with_special_characters(tmp_path):
    d = DbState(tmp_path / "we?ird #dir%20" / ".openclaw")
    sid = d.add_session("agent:main:main", events=turn_events(1))
    assert open_store(d.state_dir, "main").resolve(sid).session_id == sid


def test_unknown_schema_is_a_clear_error(db):
    db.add_session("agent:main:main")
    c = open_rw(db.db_path())
    c.execute("PRAGMA user_version = 99")
    c.commit()
    c.close()
    store = DbStore(db.state_dir, "main")
    assert len(store.sessions()) == 1  # unverified version, but every column occd reads is there
    assert any("99" in w and "unverified" in w and "acts on nothing" in w for w in store.warnings)
    assert store.schema()["level"] == "unverified" and not store.actionable
    store.close()
    c = open_rw(db.db_path())
    c.execute("DROP INDEX idx_agent_session_nodes_label")
    c.execute("ALTER TABLE session_nodes DROP COLUMN label")
    c.commit()
    c.close()
    with pytest.raises(OccdError) as ei:
        DbStore(db.state_dir, "main").sessions()
    assert ei.value.code == "UNSUPPORTED_SCHEMA" and "session_nodes.label" in ei.value.message
    assert "openclaw sessions list" in ei.value.hint


def test_not_a_database(tmp_path):
    p = tmp_path / ".openclaw" / "agents" / "main" / "agent"
    p.mkdir(parents=True)
    (p / "openclaw-agent.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(OccdError) as ei:
        open_store(tmp_path / ".openclaw", "main").sessions()
    assert ei.value.code in ("UNSUPPORTED_SCHEMA", "DB_UNREADABLE")


def test_gateway_status_lease_and_lock(db, tmp_path):
    st = db.state_dir
    assert gateway_status(st)["running"] is False
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        db.add_lease(holder.pid, port=18571)
        s = gateway_status(st)
        assert s == {"running": True, "source": "lease", "pid": holder.pid, "port": 18571}
        db.add_lease(holder.pid, expires_at=int(time.time() * 1000) - 1)  # expired
        assert not gateway_status(st)["running"]
        db.add_lease(holder.pid, host="another-host")  # another machine's lease: cannot check its pid, trust it
        assert gateway_status(st)["running"]
    finally:
        holder.kill()
        holder.wait()
    db.add_lease(holder.pid)  # a crashed gateway's lease lingers; its pid is dead
    assert not gateway_status(st)["running"]
    lock_dir = st / "tmp" / f"openclaw-{os.getuid()}"
    lock_dir.mkdir(parents=True)
    write_lock(lock_dir / "gateway.c9e5d907.lock", os.getpid())
    (lock_dir / "gateway.c9e5d907.lock.sqlite").write_bytes(b"")  # OpenClaw's sqlite lock files are not it
    assert gateway_status(st) == {"running": True, "source": "lock", "pid": os.getpid(), "port": None}


def test_schema_fixture_is_the_real_one():
    text = (DATA / "openclaw-2026.9.6-agent-schema.sql").read_text()
    for needle in ("CREATE TABLE session_nodes", "entry_valid INTEGER NOT NULL DEFAULT 0",
                   "CREATE TRIGGER session_nodes_entry_valid_after_entry_update", "event_zstd BLOB",
                   "PRAGMA user_version = 23"):
        assert needle in text
    assert Path(DATA / "openclaw-2026.9.6-state-schema.sql").read_text().count("CREATE TABLE") == 3
