"""Agent databases of OpenClaw releases that cannot be installed here (2026.9.7 and later), built from OpenClaw's
own documents on top of the real 2026.9.6 DDL in tests/data (statefactory.DbState). Sources, in the
openclaw/openclaw repository:
- docs/reference/database-schemas/agent-schema-history.md @26bb090 (schema 24: `sessionDiffBaseline`,
  `skillsSnapshot`, `systemPromptReport` move from session_nodes.entry_json to `session_entry_snapshots`, keyed by
  session key and field, with a `snapshot_revision` on the node; schema 25: the entry_valid and canonical-pending
  triggers retired, writers validate their own rows);
- the session_entry_snapshots columns (session_key, field, value_json) as OpenClaw's own tests insert them;
- schema 26's derived columns and their declarations: src/state (AGENT_JSON_PREDICATE_COLUMNS,
  migrateAgentJsonPredicatesInTransaction), whose UPDATE derives them from the JSON (JSON stays canonical);
- session_transcript_cold_archives (schema 20, 2026.9.5; the 9.6 capture in tests/data left it out): its
  canonical DDL as OpenClaw's tests quote it.

    db = DocDbState(tmp_path / ".openclaw", schema=26)     # app_version defaults to DOC_RELEASES[26]
    sid = db.add_session("agent:main:main", events=[...])   # statefactory.DbState's API, derived columns filled
    db.add_cold_session("agent:main:old", events=[...], storage="file")   # no hot rows, a .jsonl.zst archive
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from statefactory import AGENT_SCHEMA, DbState, header_version, iso

# a release that writes each documented schema (24: 9.7–9.9; 25 came after 9.9 and 26 is main: their first
# releases are not documented, the ones here are stand-ins of the 10.x/11.x lines)
DOC_RELEASES = {24: "2026.9.7", 25: "2026.10.2", 26: "2026.11.5", 29: "2026.12.1"}

COLD_DDL = """
CREATE TABLE IF NOT EXISTS session_transcript_cold_archives (
  session_id TEXT NOT NULL PRIMARY KEY,
  generation TEXT NOT NULL,
  archive_name TEXT NOT NULL UNIQUE,
  archive_sha256 TEXT NOT NULL CHECK (length(archive_sha256) = 64),
  event_count INTEGER NOT NULL CHECK (event_count >= 1),
  raw_bytes INTEGER NOT NULL CHECK (raw_bytes >= 0),
  archive_bytes INTEGER NOT NULL CHECK (archive_bytes >= 0),
  last_seq INTEGER NOT NULL,
  archived_at INTEGER NOT NULL,
  storage TEXT NOT NULL CHECK (storage IN ('file', 'sqlite')),
  archive_blob BLOB,
  FOREIGN KEY (session_id) REFERENCES "session_windows"(session_id) ON DELETE CASCADE,
  CHECK (length(archive_name) > 0 AND archive_name NOT IN ('.', '..') AND archive_name NOT LIKE '%/%' AND archive_name NOT LIKE '%\\%'),
  CHECK ((storage = 'file' AND archive_blob IS NULL) OR (storage = 'sqlite' AND archive_blob IS NOT NULL))
) STRICT;
"""

SNAPSHOTS_DDL = """
ALTER TABLE session_nodes ADD COLUMN snapshot_revision INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS session_entry_snapshots (
  session_key TEXT NOT NULL,
  field TEXT NOT NULL CHECK (field IN ('sessionDiffBaseline', 'skillsSnapshot', 'systemPromptReport')),
  value_json TEXT NOT NULL,
  PRIMARY KEY (session_key, field),
  FOREIGN KEY (session_key) REFERENCES session_nodes(session_key) ON DELETE CASCADE
) STRICT;
"""

DERIVED_DDL = """
ALTER TABLE session_nodes ADD COLUMN session_started_at INTEGER;
ALTER TABLE session_nodes ADD COLUMN has_optional_references INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transcript_events ADD COLUMN navigation_type TEXT;
ALTER TABLE transcript_events ADD COLUMN navigation_custom_type TEXT;
ALTER TABLE transcript_events ADD COLUMN navigation_display INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transcript_events ADD COLUMN message_role TEXT;
ALTER TABLE transcript_events ADD COLUMN navigation_last_type TEXT;
ALTER TABLE transcript_events ADD COLUMN navigation_last_custom_type TEXT;
ALTER TABLE transcript_events ADD COLUMN navigation_valid INTEGER NOT NULL DEFAULT 1;
"""

# schema 26's derivation (the migration's UPDATE, the parts occd's fixtures need)
DERIVE_SQL = """
UPDATE transcript_events SET
  navigation_type = CASE WHEN json_extract(coalesce(event_json, json_extract(navigation_json, '$.navigation')), '$.type')
      IN ('session', 'message', 'reset', 'compaction', 'custom_message', 'custom')
    THEN json_extract(coalesce(event_json, json_extract(navigation_json, '$.navigation')), '$.type') END,
  message_role = CASE WHEN json_extract(coalesce(event_json, json_extract(navigation_json, '$.navigation')), '$.message.role')
      IN ('user', 'assistant', 'toolResult', 'system')
    THEN json_extract(coalesce(event_json, json_extract(navigation_json, '$.navigation')), '$.message.role') END,
  navigation_valid = CASE WHEN event_json IS NULL OR json_valid(event_json) THEN 1 ELSE 0 END;
UPDATE session_nodes SET session_started_at = CASE WHEN json_valid(entry_json)
  THEN CAST(json_extract(entry_json, '$.sessionStartedAt') AS INTEGER) END;
"""

RETIRED_TRIGGERS = ("session_nodes_entry_valid_after_insert", "session_nodes_entry_valid_after_entry_update",
                    "session_nodes_entry_valid_after_identity_update")


def agent_schema_sql(version: int) -> str:
    """The agent DDL of a documented schema (24, 25, 26) or of a future one (> 26: schema 26's tables under a
    newer number), from the real 2026.9.6 DDL and the documented changes."""
    sql = AGENT_SCHEMA.read_text().replace("PRAGMA user_version = 23;", f"PRAGMA user_version = {version};")
    assert f"PRAGMA user_version = {version};" in sql
    sql += COLD_DDL
    if version >= 24:
        sql += SNAPSHOTS_DDL
    if version >= 25:
        sql += "".join(f"DROP TRIGGER IF EXISTS {t};\n" for t in RETIRED_TRIGGERS)
    if version >= 26:
        sql += DERIVED_DDL
    return sql


class DocDbState(DbState):
    """statefactory.DbState with the agent DDL of `schema` (24, 25, 26 or a future number)."""

    def __init__(self, state_dir: Path, schema: int = 26, app_version: str | None = None):
        super().__init__(state_dir, app_version=app_version or DOC_RELEASES.get(schema, "2026.12.1"))
        self.schema = schema
        ddl = self.state_dir.parent / f".openclaw-agent-schema-{schema}.sql"
        ddl.write_text(agent_schema_sql(schema))
        self.agent_schema = ddl

    def add_session(self, key: str, **kw) -> str:
        snapshots = kw.pop("snapshots", None)
        if self.schema >= 24:  # the three fields live in session_entry_snapshots, not in entry_json
            entry = dict(kw.pop("entry", None) or {})
            snapshots = {**{f: entry.pop(f) for f in ("sessionDiffBaseline", "skillsSnapshot", "systemPromptReport")
                            if f in entry}, **(snapshots or {})}
            kw["entry"] = entry
        sid = super().add_session(key, **kw)
        c = self.connect(kw.get("agent", "main"))
        with c:
            for fld, value in (snapshots or {}).items():
                c.execute("INSERT INTO session_entry_snapshots (session_key, field, value_json) VALUES (?,?,?)",
                          (key, fld, json.dumps(value)))
            if self.schema >= 26:
                c.executescript(DERIVE_SQL)
                self._derive_compressed(c)
        c.close()
        return sid

    @staticmethod
    def _derive_compressed(c) -> None:
        """OpenClaw derives a compressed row's columns from its navigation projection; the fixtures' projection
        is empty, so derive them from the event itself (same values)."""
        import zstandard

        rows = c.execute("SELECT session_id, seq, event_zstd FROM transcript_events WHERE event_json IS NULL "
                         "AND event_zstd IS NOT NULL").fetchall()
        for sid, seq, z in rows:
            ev = json.loads(zstandard.ZstdDecompressor().decompress(z))
            role = (ev.get("message") or {}).get("role") if isinstance(ev.get("message"), dict) else None
            c.execute("UPDATE transcript_events SET navigation_type = ?, message_role = ? WHERE session_id = ? "
                      "AND seq = ?", (ev.get("type"), role, sid, seq))

    def add_cold_session(self, key: str, *, events: list[dict], storage: str = "file", agent: str = "main",
                         entry: dict | None = None, session_id: str | None = None) -> tuple[str, Path | None]:
        """A session whose window went cold: its node and window, NO transcript_events rows, and a zstd JSONL
        archive of its events (header first) in sessions/cold/<sha256>.jsonl.zst (storage 'file') or in the
        row's archive_blob (storage 'sqlite'). Returns (session id, the archive file or None)."""
        import zstandard

        from occd.openclaw import new_session_id

        sid = session_id or new_session_id()
        now = int(time.time() * 1000)
        e = {"sessionId": sid, "updatedAt": now, "sessionStartedAt": now, "model": "fake-model",
             "modelProvider": "fake", "contextTokens": 128000, **(entry or {})}
        header = {"type": "session", "version": header_version(self.app_version), "id": sid,
                  "timestamp": iso(now / 1000), "cwd": "/ws"}
        raw = b"".join(json.dumps(ev, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                       for ev in [header, *events])
        z = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(raw)
        sha = hashlib.sha256(z).hexdigest()
        name = f"{sha}.jsonl.zst"
        path = None
        if storage == "file":
            path = self.db_path(agent).parent.parent / "sessions" / "cold" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(z)
        c = self.connect(agent)
        with c:
            c.execute("INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at, status, "
                      "last_interaction_at) VALUES (?,?,?,?,?,?)", (key, sid, json.dumps(e), now, "done", now))
            c.execute("UPDATE session_nodes SET entry_valid = 1 WHERE session_key = ?", (key,))
            c.execute("INSERT INTO session_windows (session_id, session_key, created_at, updated_at) VALUES (?,?,?,?)",
                      (sid, key, now, now))
            c.execute("INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, "
                      "archive_sha256, event_count, raw_bytes, archive_bytes, last_seq, archived_at, storage, "
                      "archive_blob) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (sid, "g1", name, sha, len(events) + 1, len(raw), len(z), len(events), now, storage,
                       z if storage == "sqlite" else None))
        c.close()
        return sid, path
