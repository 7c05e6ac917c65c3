"""Migrations: a ledger made by the first migration, with data, upgrades to head intact; the migrated schema
is pinned and equals the models (llm's test_migrate habit)."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from occd.errors import OccdError
from occd.ledger import Ledger
from occd.ledger import migrate
from occd.ledger.engine import make_engine
from occd.ledger.models import metadata

NOW = 1_800_000_000.0

PINNED_TABLES = {
    "actions": ['id INTEGER NOT NULL PK', 'ts FLOAT NOT NULL', 'kind VARCHAR NOT NULL', 'agent_id VARCHAR', 'session_id VARCHAR', 'session_key VARCHAR', 'trigger VARCHAR NOT NULL', 'policy VARCHAR', 'reason TEXT', 'dry_run INTEGER NOT NULL', 'before_json TEXT', 'after_json TEXT', 'backup_path TEXT', 'outcome VARCHAR NOT NULL', 'error TEXT', 'duration_ms FLOAT'],
    "agents": ['id VARCHAR NOT NULL PK', 'era VARCHAR', 'first_seen FLOAT NOT NULL', 'last_seen FLOAT NOT NULL'],
    "alembic_version": ['version_num VARCHAR(32) NOT NULL PK'],
    "backups": ['id INTEGER NOT NULL PK', 'agent_id VARCHAR', 'session_id VARCHAR', 'path TEXT NOT NULL', 'size INTEGER', 'created FLOAT NOT NULL', 'pruned_at FLOAT', 'action_id INTEGER', 'sha256 VARCHAR', 'sha256_source VARCHAR'],
    "breaker_transitions": ['id INTEGER NOT NULL PK', 'ts FLOAT NOT NULL', 'agent_id VARCHAR NOT NULL', 'kind VARCHAR NOT NULL', 'from_state VARCHAR NOT NULL', 'to_state VARCHAR NOT NULL', 'reason TEXT'],
    "breakers": ['agent_id VARCHAR NOT NULL PK', 'kind VARCHAR NOT NULL PK', 'state VARCHAR NOT NULL', 'opened_at FLOAT', 'failures INTEGER NOT NULL', 'cooloff_minutes FLOAT', 'trial_started_at FLOAT', 'reason TEXT', 'updated_at FLOAT NOT NULL'],
    "daemon_runs": ['id INTEGER NOT NULL PK', 'pid INTEGER NOT NULL', 'host VARCHAR', 'version VARCHAR', 'mode VARCHAR', 'started FLOAT NOT NULL', 'heartbeat FLOAT NOT NULL', 'last_cycle FLOAT', 'next_scan FLOAT', 'stopped FLOAT', 'exit_reason TEXT'],
    "llm_calls": ['id INTEGER NOT NULL PK', 'ts FLOAT NOT NULL', 'model VARCHAR NOT NULL', 'purpose VARCHAR', 'prompt_tokens INTEGER NOT NULL', 'completion_tokens INTEGER NOT NULL', 'cost_usd FLOAT NOT NULL', 'outcome VARCHAR NOT NULL', 'duration_ms FLOAT', 'error TEXT'],
    "observations": ['id INTEGER NOT NULL PK', 'session_pk INTEGER NOT NULL', 'ts FLOAT NOT NULL', 'compaction_count INTEGER NOT NULL', 'context_tokens INTEGER', 'tokens_source VARCHAR', 'context_window INTEGER', 'size INTEGER', 'entry_count INTEGER', 'last_activity FLOAT'],
    "relevance_scores": ['session_id VARCHAR NOT NULL PK', 'fingerprint VARCHAR NOT NULL PK', 'task_hash VARCHAR NOT NULL PK', 'score FLOAT NOT NULL', 'method VARCHAR NOT NULL', 'model VARCHAR', 'reason TEXT', 'ts FLOAT NOT NULL'],
    "rotation_transitions": ['id INTEGER NOT NULL PK', 'rotation_id INTEGER NOT NULL', 'ts FLOAT NOT NULL', 'from_state VARCHAR', 'to_state VARCHAR NOT NULL', 'note TEXT'],
    "rotations": ['id INTEGER NOT NULL PK', 'agent_id VARCHAR NOT NULL', 'session_key VARCHAR NOT NULL', 'era VARCHAR', 'trigger VARCHAR NOT NULL', 'reason TEXT', 'old_session_id VARCHAR', 'new_session_id VARCHAR', 'old_path TEXT', 'new_path TEXT', 'archive_path TEXT', 'state VARCHAR NOT NULL', 'seed_budget_percent FLOAT', 'seed_tokens INTEGER', 'compactions_before INTEGER', 'health VARCHAR', 'details_json TEXT', 'error TEXT', 'started FLOAT NOT NULL', 'updated FLOAT NOT NULL', 'finished FLOAT'],
    "scan_runs": ['id INTEGER NOT NULL PK', 'started FLOAT NOT NULL', 'duration_s FLOAT NOT NULL', 'agents INTEGER NOT NULL', 'sessions_seen INTEGER NOT NULL', 'sessions_changed INTEGER NOT NULL', 'bytes_read INTEGER NOT NULL', 'errors INTEGER NOT NULL', 'error_text TEXT'],
    "sessions": ['id INTEGER NOT NULL PK', 'agent_id VARCHAR NOT NULL', 'session_key VARCHAR', 'session_id VARCHAR NOT NULL', 'path TEXT', 'first_seen FLOAT NOT NULL', 'last_seen FLOAT NOT NULL', 'archived_at FLOAT', 'archive_path TEXT', 'archive_size INTEGER', 'archive_sha256 VARCHAR', 'archive_sha256_source VARCHAR'],
    "problems": ['id INTEGER NOT NULL PK', 'source VARCHAR NOT NULL', 'subject VARCHAR NOT NULL', 'code VARCHAR NOT NULL', 'severity VARCHAR NOT NULL', 'agent_id VARCHAR', 'session_id VARCHAR', 'path TEXT', 'message TEXT NOT NULL', 'hint TEXT', 'details_json TEXT', 'first_seen FLOAT NOT NULL', 'last_seen FLOAT NOT NULL', 'resolved_at FLOAT', 'resolution VARCHAR'],
    "check_runs": ['id INTEGER NOT NULL PK', 'started FLOAT NOT NULL', 'finished FLOAT NOT NULL', 'read_data INTEGER NOT NULL', 'trigger VARCHAR NOT NULL', 'artifacts INTEGER NOT NULL', 'bytes_read INTEGER NOT NULL', 'problems INTEGER NOT NULL', 'summary_json TEXT'],
}
PINNED_INDEXES = {
    "ix_actions_agent_kind_ts": ("actions", ['agent_id', 'kind', 'ts']),
    "ix_actions_session": ("actions", ['session_id']),
    "ix_actions_ts": ("actions", ['ts']),
    "ix_backups_session": ("backups", ['agent_id', 'session_id']),
    "ix_breaker_transitions_agent_ts": ("breaker_transitions", ['agent_id', 'ts']),
    "ix_llm_calls_ts": ("llm_calls", ['ts']),
    "ix_observations_session_ts": ("observations", ['session_pk', 'ts']),
    "ix_rotation_transitions_rotation": ("rotation_transitions", ['rotation_id', 'ts']),
    "ix_rotations_agent_key_started": ("rotations", ['agent_id', 'session_key', 'started']),
    "ix_rotations_state": ("rotations", ['state']),
    "ix_scan_runs_started": ("scan_runs", ['started']),
    "ix_sessions_agent_key": ("sessions", ['agent_id', 'session_key']),
    "ix_problems_open": ("problems", ['resolved_at', 'source']),
    "ix_problems_subject": ("problems", ['subject', 'code']),
    "ix_check_runs_started": ("check_runs", ['started']),
}


def schema_of(path):
    c = sqlite3.connect(path)
    try:
        tables = {}
        for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"):
            tables[name] = [f"{r[1]} {r[2]}{' NOT NULL' if r[3] else ''}{' PK' if r[5] else ''}"
                            for r in c.execute(f"PRAGMA table_info({name})")]
        indexes = {}
        for name, tbl in c.execute("SELECT name, tbl_name FROM sqlite_master WHERE type='index' "
                                   "AND name NOT LIKE 'sqlite_%'"):
            indexes[name] = (tbl, [r[2] for r in c.execute(f"PRAGMA index_info({name})")])
        fks = {name: sorted(tuple(r[2:5]) + (r[6],) for r in c.execute(f"PRAGMA foreign_key_list({name})"))
               for name in tables}
        return tables, indexes, fks
    finally:
        c.close()


def make_at_first_revision(path):
    eng = make_engine(path)
    cfg = migrate.alembic_config()
    with eng.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.commit()
    return eng


def fill_v1(eng):
    with eng.connect() as c:
        c.exec_driver_sql("INSERT INTO agents VALUES ('main', 'file', ?, ?)", (NOW, NOW))
        c.exec_driver_sql("INSERT INTO sessions (agent_id, session_key, session_id, path, first_seen, last_seen) "
                          "VALUES ('main', 'agent:main:main', 'sid-1', '/x/sid-1.jsonl', ?, ?)", (NOW, NOW))
        for i in range(50):
            c.exec_driver_sql("INSERT INTO observations (session_pk, ts, compaction_count, context_tokens, "
                              "tokens_source, size) VALUES (1, ?, ?, ?, 'usage', ?)", (NOW + i, i // 10, 1000 + i, i))
        c.exec_driver_sql("INSERT INTO actions (ts, kind, agent_id, session_id, trigger, outcome, before_json) "
                          "VALUES (?, 'edit', 'main', 'sid-1', 'manual', 'ok', '{\"messages\": 4}')", (NOW,))
        c.exec_driver_sql("INSERT INTO backups (agent_id, session_id, path, created, action_id) "
                          "VALUES ('main', 'sid-1', '/x/sid-1.backup.1.jsonl', ?, 1)", (NOW,))
        c.exec_driver_sql("INSERT INTO breakers (agent_id, kind, state, opened_at, failures, updated_at) "
                          "VALUES ('main', 'strip', 'open', ?, 2, ?)", (NOW, NOW))
        c.commit()


def test_fresh_ledger_schema_is_pinned(tmp_path):
    Ledger.open(tmp_path / "l.db").close()
    tables, indexes, _ = schema_of(tmp_path / "l.db")
    assert tables == PINNED_TABLES
    assert indexes == PINNED_INDEXES


def test_upgrade_from_first_revision_keeps_data(tmp_path):
    p = tmp_path / "ledger.db"
    eng = make_at_first_revision(p)
    assert migrate.current_revision(eng) == "0001"
    fill_v1(eng)
    eng.dispose()

    led = Ledger.open(p)  # upgrades automatically
    try:
        assert led.revision() == migrate.head_revision() == "0003"
        # data intact
        ser = led.series("main", "sid-1")
        assert len(ser) == 50 and ser[-1]["context_tokens"] == 1049 and ser[-1]["compaction_count"] == 4
        (latest,) = led.latest_observations()
        assert latest["session_key"] == "agent:main:main" and latest["context_tokens"] == 1049
        (act,) = led.history()
        assert act["before"] == {"messages": 4} and act["kind"] == "edit"
        (bk,) = led.backups("main", "sid-1")
        assert bk["action_id"] == 1
        br = led.get_breaker("main", "strip")
        assert br.state == "open" and br.failures == 2
        # the new tables work
        rid = led.rotation_upsert(agent_id="main", session_key="agent:main:main", old_session_id="sid-1", now=NOW)
        assert led.rotation_get(rid)["state"] == "PENDING"
        led.mark_session_archived("main", "sid-1", "/x/archive/sid-1.jsonl", now=NOW)
        assert led.sessions("main")[0]["archive_path"] == "/x/archive/sid-1.jsonl"
        # the copy made before the upgrade is a valid ledger at the old revision
        (copy,) = migrate.backup_copies(p)
        assert copy.name.startswith("ledger.db.pre-0001-")
        c = sqlite3.connect(copy)
        assert c.execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
        assert c.execute("SELECT COUNT(*) FROM observations").fetchone() == (50,)
        c.close()
    finally:
        led.close()
    tables, indexes, fks = schema_of(p)
    assert tables == PINNED_TABLES and indexes == PINNED_INDEXES
    fresh = tmp_path / "fresh.db"
    Ledger.open(fresh).close()
    assert schema_of(fresh)[2] == fks  # same foreign keys as a ledger created at head


def test_migrated_schema_equals_models(tmp_path):
    p = tmp_path / "ledger.db"
    eng = make_at_first_revision(p)
    fill_v1(eng)
    eng.dispose()
    led = Ledger.open(p)
    with led.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
    led.close()
    assert diff == []


def test_downgrade_and_upgrade_again(tmp_path):
    p = tmp_path / "ledger.db"
    led = Ledger.open(p)
    led.record_observation("main", "s", compaction_count=1, now=NOW)
    migrate.downgrade(led.engine, p, "0001")
    assert led.revision() == "0001"
    assert led.series("main", "s")[0]["compaction_count"] == 1  # the batch drop did not cascade
    res = led.upgrade()
    assert (res.from_revision, res.to_revision, res.created) == ("0001", "0003", False) and res.backup.exists()
    assert led.latest_observations()[0]["compaction_count"] == 1
    led.close()


def test_up_to_date_ledger_is_not_copied(tmp_path):
    p = tmp_path / "ledger.db"
    Ledger.open(p).close()
    led = Ledger.open(p)
    res = led.upgrade()
    led.close()
    assert not res.changed and res.backup is None and migrate.backup_copies(p) == []


def test_only_the_last_copies_are_kept(tmp_path):
    p = tmp_path / "ledger.db"
    led = Ledger.open(p)
    made = [migrate.vacuum_into_backup(led.engine, p, "0002", now=NOW + i) for i in range(5)]
    led.close()
    kept = migrate.backup_copies(p)
    assert len(kept) == migrate.BACKUPS_KEPT and set(kept) <= set(made)
    assert made[-1] in kept and made[0] not in kept


def test_foreign_database_is_refused(tmp_path):
    p = tmp_path / "ledger.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE stuff (x)")
    c.commit()
    c.close()
    with pytest.raises(OccdError) as e:
        Ledger.open(p)
    assert e.value.code == "LEDGER_FOREIGN"


def test_concurrent_first_open(tmp_path):
    """Four openers of a new ledger at once: none is told "locked". The switch to WAL takes SQLite's exclusive
    lock without waiting on the busy handler; one round in six failed so before the retry, so 12 rounds."""
    for rnd in range(12):
        p = tmp_path / f"r{rnd}" / "ledger.db"
        p.parent.mkdir()
        errors = []

        def opener(p=p, errors=errors):
            try:
                led = Ledger.open(p)
                led.record_action("edit", "main", "s", now=NOW)
                led.close()
            except Exception as e:  # pragma: no cover - the assertion below shows it
                errors.append(e)

        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], f"round {rnd}"
        led = Ledger.open(p)
        assert len(led.history()) == 4 and led.revision() == "0003"
        led.close()


def test_head_revision_constant_matches_alembic():
    """The read-only path compares against HEAD_REVISION without importing alembic; it must be alembic's head."""
    from occd.ledger import migrate

    from alembic.script import ScriptDirectory

    assert migrate.HEAD_REVISION == ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
