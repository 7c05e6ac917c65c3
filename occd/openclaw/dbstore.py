"""Database-era sessions (OpenClaw 2026.8+): `agents/<id>/agent/openclaw-agent.sqlite`, READ-ONLY.

occd never writes this database (OpenClaw's triggers would mark edited rows invalid and take the session
offline); it opens it with `mode=ro`, checks the schema version, and reads session_nodes (entry_valid = 1)
and transcript_events (event_json, or event_zstd decompressed). Actions go through OpenClaw (gateway.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from occd.errors import BusyError, OccdError
from occd.openclaw.filestore import SessionInfo, resolve_ref
from occd.openclaw.state import DB_NAME

KNOWN_SCHEMA_VERSIONS = range(20, 24)  # user_version seen: 23 on 2026.9.6; the tables occd reads are stable


def connect_ro(db: Path, timeout: float = 5.0) -> sqlite3.Connection:
    if not db.exists():
        raise OccdError(f"OpenClaw database {db} does not exist", "run OpenClaw once for this agent", code="DB_MISSING")
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
        c.execute("PRAGMA query_only = ON")
        return c
    except sqlite3.OperationalError as e:
        raise BusyError(f"Cannot open OpenClaw database {db}: {e}", "try again in a moment") from None


def schema_version(c: sqlite3.Connection) -> tuple[int, str | None]:
    (uv,) = c.execute("PRAGMA user_version").fetchone()
    app = None
    try:
        row = c.execute("SELECT app_version FROM schema_meta WHERE role = 'agent' ORDER BY updated_at DESC LIMIT 1").fetchone()
        app = row[0] if row else None
    except sqlite3.DatabaseError:
        pass
    return uv, app


def _decode_zstd(blob: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise OccdError("A compressed transcript row needs the zstandard package", "pip install zstandard",
                        code="ZSTD_MISSING") from None
    return zstandard.ZstdDecompressor().decompress(blob)


class DbStore:
    era = "db"

    def __init__(self, state_dir: Path, agent: str, agent_dir: Path | None = None):
        self.state_dir = state_dir
        self.agent = agent
        self.agent_dir = agent_dir or state_dir / "agents" / agent
        self.db_path = self.agent_dir / "agent" / DB_NAME
        self.sessions_dir = None
        self.warnings: list[str] = []
        self._conn: sqlite3.Connection | None = None

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            c = connect_ro(self.db_path)
            try:
                uv, app = schema_version(c)
                tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            except sqlite3.DatabaseError as e:
                c.close()
                raise OccdError(f"Cannot read OpenClaw database {self.db_path}: {e}", "check the file; openclaw doctor",
                                code="UNSUPPORTED_SCHEMA") from None
            need = {"session_nodes", "transcript_events"}
            if uv not in KNOWN_SCHEMA_VERSIONS or not need <= tables:
                c.close()
                raise OccdError(f"OpenClaw database schema {uv} ({app or 'unknown release'}) is not one occd knows",
                                "update occd; meanwhile use `openclaw sessions list --json`", code="UNSUPPORTED_SCHEMA")
            self._conn = c
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def sessions(self) -> list[SessionInfo]:
        try:
            rows = self.conn().execute(
                "SELECT n.session_key, n.current_session_id, n.entry_json, n.updated_at, n.status, n.label, "
                "n.display_name, n.archived_at, "
                "(SELECT COALESCE(SUM(COALESCE(e.event_utf8_bytes, length(e.event_json))), 0) FROM transcript_events e "
                " WHERE e.session_id = n.current_session_id) "
                "FROM session_nodes n WHERE n.entry_valid = 1 ORDER BY n.updated_at DESC").fetchall()
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise BusyError(f"OpenClaw database {self.db_path} is busy", "try again in a moment") from None
            raise OccdError(f"Cannot read OpenClaw database {self.db_path}: {e}", "openclaw doctor",
                            code="UNSUPPORTED_SCHEMA") from None
        out = []
        for key, sid, entry_json, updated, status, label, display, archived_at, size in rows:
            try:
                entry = orjson.loads(entry_json) if entry_json else {}
            except ValueError:
                self.warnings.append(f"{key}: entry_json is not valid JSON")
                entry = {}
            if archived_at:
                continue
            info = SessionInfo(
                key=key, session_id=sid, path=None, updated_at=updated,
                compaction_count=entry.get("compactionCount") if isinstance(entry.get("compactionCount"), int) else 0,
                total_tokens=entry.get("totalTokens") if isinstance(entry.get("totalTokens"), int) else None,
                context_tokens=entry.get("contextTokens") if isinstance(entry.get("contextTokens"), int) else None,
                model=entry.get("model"), model_provider=entry.get("modelProvider"), label=label,
                display_name=display, chat_type=entry.get("chatType") or entry.get("kind"), size=size,
                mtime=(updated or 0) / 1000, status=status, entry=entry)
            out.append(info)
        return out

    def archived_sessions(self) -> list[SessionInfo]:
        return []

    def resolve(self, ref: str, **_):
        return resolve_ref(self.sessions(), ref, self.agent)

    def latest(self) -> SessionInfo:
        s = self.sessions()
        if not s:
            raise OccdError(f"No sessions found for agent '{self.agent}'",
                            "OpenClaw creates a session on the agent's first turn", code="NO_SESSIONS")
        return s[0]

    def is_running(self, info: SessionInfo) -> bool:
        return info.status == "running"

    def read_lines(self, info: SessionInfo):
        """The transcript as .jsonl lines (bytes, each ending in \\n), in seq order."""
        cur = self.conn().execute(
            "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq", (info.session_id,))
        for ej, ez in cur:
            if ej is not None:
                yield ej.encode("utf-8") + b"\n"
            elif ez is not None:
                yield _decode_zstd(ez).rstrip(b"\n") + b"\n"


def gateway_running(state_dir: Path, now_ms: int | None = None) -> bool:
    """A gateway is running when state/openclaw.sqlite has a live gateway-owner lease."""
    import time

    db = state_dir / "state" / "openclaw.sqlite"
    if not db.exists():
        return False
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        c = connect_ro(db, timeout=2)
        try:
            row = c.execute("SELECT COUNT(*) FROM state_leases WHERE (scope LIKE '%gateway%' OR lease_key LIKE "
                            "'%gateway%') AND expires_at > ?", (now_ms,)).fetchone()
            return bool(row and row[0])
        finally:
            c.close()
    except (sqlite3.DatabaseError, OccdError):
        return False
