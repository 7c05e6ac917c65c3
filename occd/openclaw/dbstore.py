"""Database-era sessions (OpenClaw 2026.8+): `agents/<id>/agent/openclaw-agent.sqlite`, READ-ONLY.

occd never writes this database (OpenClaw's triggers mark an edited row invalid and the session goes offline until
`openclaw doctor --fix`); it opens it with `mode=ro` (and `query_only`), checks the schema, and reads
`session_nodes` (entry_valid = 1, not archived) and `transcript_events` (event_json, or event_zstd decompressed).
Actions go through OpenClaw (gateway.py).

Schema as observed on 2026.9.6 (`PRAGMA user_version` 23, schema_meta row role 'agent' with app_version; the
columns occd reads are listed in REQUIRED_COLUMNS; tests/data/openclaw-2026.9.6-agent-schema.sql is the DDL of
those tables). OpenClaw stores an event compressed (`event_zstd`, a plain zstd frame with checksum, level 1,
`event_utf8_bytes` = decoded length) when it is at least 1024 bytes, has no `\\u` escapes and shrinks by 10%+.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import orjson

from occd.errors import BusyError, OccdError
from occd.openclaw.filestore import SessionInfo, resolve_ref
from occd.openclaw.state import DB_NAME, GLOBAL_DB

VERIFIED_SCHEMA_VERSIONS = frozenset({23})  # 2026.9.6
REQUIRED_COLUMNS = {
    "session_nodes": {"session_key", "current_session_id", "entry_json", "entry_valid", "updated_at", "status",
                      "label", "display_name", "archived_at"},
    "transcript_events": {"session_id", "seq", "event_json", "event_zstd", "event_utf8_bytes"},
}
MAX_EVENT_BYTES = 4 * 1024 * 1024  # OpenClaw's own bound on one stored event


def connect_ro(db: Path, timeout: float = 5.0) -> sqlite3.Connection:
    """A read-only connection (`mode=ro`, `query_only`): any write raises sqlite3.OperationalError."""
    if not db.is_file():
        raise OccdError(f"OpenClaw database {db} does not exist", "run OpenClaw once for this agent", code="DB_MISSING")
    try:
        c = sqlite3.connect(f"{Path(os.path.abspath(db)).as_uri()}?mode=ro", uri=True, timeout=timeout,
                            check_same_thread=False)
        c.execute("PRAGMA query_only = ON")
        return c
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise BusyError(f"OpenClaw database {db} is busy", "try again in a moment") from None
        raise OccdError(f"Cannot open OpenClaw database {db}: {e}", "check the file's permissions",
                        code="DB_UNREADABLE") from None
    except sqlite3.DatabaseError as e:
        raise OccdError(f"Cannot open OpenClaw database {db}: {e}", "check the file; `openclaw doctor` can help",
                        code="DB_UNREADABLE") from None


def schema_version(c: sqlite3.Connection) -> tuple[int, str | None]:
    """(PRAGMA user_version, the OpenClaw release in schema_meta for the agent database or None)."""
    (uv,) = c.execute("PRAGMA user_version").fetchone()
    app = None
    try:
        row = c.execute("SELECT app_version FROM schema_meta WHERE role = 'agent' "
                        "ORDER BY updated_at DESC LIMIT 1").fetchone()
        app = row[0] if row else None
    except sqlite3.DatabaseError:
        pass
    return uv, app


def check_schema(c: sqlite3.Connection, db: Path) -> list[str]:
    """Raise UNSUPPORTED_SCHEMA when the tables/columns occd reads are not there; return warnings (an unverified
    user_version that still has every column occd reads is read, with a warning)."""
    try:
        uv, app = schema_version(c)
        cols: dict[str, set[str]] = {}
        for table in REQUIRED_COLUMNS:
            cols[table] = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError as e:
        raise OccdError(f"Cannot read OpenClaw database {db}: {e}", "check the file; `openclaw doctor` can help",
                        code="UNSUPPORTED_SCHEMA") from None
    release = app or "unknown release"
    missing = [f"{t}.{col}" for t, need in REQUIRED_COLUMNS.items() for col in sorted(need - cols[t])]
    if missing:
        what = "has no " + ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise OccdError(f"OpenClaw database schema {uv} ({release}) is not one occd knows: it {what}",
                        "update occd; meanwhile `openclaw sessions list --json` shows the sessions",
                        code="UNSUPPORTED_SCHEMA", details={"userVersion": uv, "appVersion": app, "missing": missing})
    if uv not in VERIFIED_SCHEMA_VERSIONS:
        return [f"OpenClaw database schema {uv} ({release}) was not verified with occd; the columns occd reads "
                "are present, so it reads them"]
    return []


def decode_event(event_json: str | None, event_zstd: bytes | None, utf8_bytes: int | None) -> bytes:
    """One stored transcript event as the bytes of a .jsonl line (without the newline)."""
    if event_json is not None:
        return event_json.encode("utf-8")
    if event_zstd is None:
        raise ValueError("row has neither event_json nor event_zstd")
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise OccdError("A compressed transcript row needs the zstandard package", "pip install zstandard",
                        code="ZSTD_MISSING") from None
    limit = utf8_bytes if isinstance(utf8_bytes, int) and 0 < utf8_bytes <= MAX_EVENT_BYTES else MAX_EVENT_BYTES
    try:
        out = zstandard.ZstdDecompressor().decompress(bytes(event_zstd), max_output_size=limit)
    except zstandard.ZstdError as e:
        raise ValueError(f"zstd: {e}") from None
    if isinstance(utf8_bytes, int) and len(out) != utf8_bytes:
        raise ValueError(f"decoded {len(out)} bytes, the row says {utf8_bytes}")
    return out.rstrip(b"\n")


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v) -> str | None:
    return v if isinstance(v, str) and v else None


class DbStore:
    era = "db"

    def __init__(self, state_dir: Path, agent: str, agent_dir: Path | None = None):
        self.state_dir = state_dir
        self.agent = agent
        self.agent_dir = agent_dir or state_dir / "agents" / agent
        self.db_path = self.agent_dir / "agent" / DB_NAME
        self.sessions_dir = None
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self._conn: sqlite3.Connection | None = None
        self._schema_warnings: list[str] = []

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            c = connect_ro(self.db_path)
            try:
                self._schema_warnings = check_schema(c, self.db_path)
            except BaseException:
                c.close()
                raise
            self._conn = c
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _query(self, sql: str, args=()):
        try:
            return self.conn().execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise BusyError(f"OpenClaw database {self.db_path} is busy", "try again in a moment") from None
            raise OccdError(f"Cannot read OpenClaw database {self.db_path}: {e}", "`openclaw doctor` can help",
                            code="UNSUPPORTED_SCHEMA") from None
        except sqlite3.DatabaseError as e:
            raise OccdError(f"Cannot read OpenClaw database {self.db_path}: {e}", "`openclaw doctor` can help",
                            code="DB_UNREADABLE") from None

    def sessions(self) -> list[SessionInfo]:
        """Valid, not archived sessions, newest first (as `openclaw sessions list`). `size` is the sum of the
        transcript's event sizes (uncompressed)."""
        rows = self._query(
            "SELECT n.session_key, n.current_session_id, n.entry_json, n.updated_at, n.status, n.label, "
            "n.display_name, "
            "(SELECT COALESCE(SUM(COALESCE(e.event_utf8_bytes, length(CAST(e.event_json AS BLOB)))), 0) "
            "   FROM transcript_events e WHERE e.session_id = n.current_session_id) "
            "FROM session_nodes n WHERE n.entry_valid = 1 AND n.archived_at IS NULL "
            "ORDER BY n.updated_at DESC, n.session_key")
        self.warnings = self.notes + self._schema_warnings
        ((invalid,),) = self._query("SELECT COUNT(*) FROM session_nodes WHERE entry_valid != 1")
        out = []
        for key, sid, entry_json, updated, status, label, display, size in rows:
            try:
                entry = orjson.loads(entry_json) if entry_json else {}
            except orjson.JSONDecodeError:
                self.warnings.append(f"{key}: entry_json is not valid JSON")
                entry = {}
            if not isinstance(entry, dict):
                entry = {}
            out.append(SessionInfo(
                key=key, session_id=sid, path=None, updated_at=_int(entry.get("updatedAt")) or updated,
                compaction_count=_int(entry.get("compactionCount")) or 0,
                total_tokens=_int(entry.get("totalTokens")), context_tokens=_int(entry.get("contextTokens")),
                model=_str(entry.get("model")), model_provider=_str(entry.get("modelProvider")),
                label=label or _str(entry.get("label")), display_name=display or _str(entry.get("displayName")),
                chat_type=_str(entry.get("chatType")) or _str(entry.get("kind")), size=size,
                mtime=(updated or 0) / 1000, status=status, entry=entry))
        if invalid:
            self.warnings.append(f"{invalid} session(s) of agent '{self.agent}' are marked invalid by OpenClaw and "
                                 "not shown (`openclaw doctor --fix` repairs them)")
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
        """The transcript as .jsonl lines (bytes, each ending in \\n), in seq order. A row that cannot be decoded
        is skipped and named in `warnings` (seq and why)."""
        rows = self._query("SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events "
                           "WHERE session_id = ? ORDER BY seq", (info.session_id,))
        for seq, ej, ez, nbytes in rows:
            try:
                yield decode_event(ej, ez, nbytes) + b"\n"
            except ValueError as e:
                self.warnings.append(f"{info.session_id}: transcript event seq {seq} is unreadable ({e})")

    read_bytes_lines = read_lines


# --------------------------------------------------------------------------------------------------------------
# Is a gateway running?
# --------------------------------------------------------------------------------------------------------------

def _lease_alive(payload_json: str | None) -> bool:
    """A lease names its owner {pid, host}; on this host a dead pid means a crashed gateway (its lease lingers
    until expires_at, 5 minutes after the last heartbeat)."""
    import socket

    from occd.openclaw.locks import pid_alive

    try:
        owner = (orjson.loads(payload_json) or {}).get("owner") or {}
    except (orjson.JSONDecodeError, TypeError, AttributeError):
        return True
    pid, host = owner.get("pid"), owner.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        return pid_alive(pid)
    return True


def gateway_status(state_dir: Path, now_ms: int | None = None, uid: int | None = None) -> dict:
    """{running, source, pid, port}: a live `gateway-owner` lease in state/openclaw.sqlite (2026.9.6 writes
    {"owner": {"pid", "host", "startedAt"}, "port", "mode"} and removes the row on a clean stop), or a
    `tmp/openclaw-<uid>/gateway.*.lock` file (JSON, present while it runs) with a live pid."""
    from occd.openclaw.locks import read_lock

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    db = state_dir / GLOBAL_DB
    if db.is_file():
        try:
            c = sqlite3.connect(f"{Path(os.path.abspath(db)).as_uri()}?mode=ro", uri=True, timeout=2.0)
            try:
                rows = c.execute("SELECT payload_json FROM state_leases WHERE scope = 'gateway-owner' "
                                 "AND (expires_at IS NULL OR expires_at > ?)", (now_ms,)).fetchall()
            finally:
                c.close()
            for (payload,) in rows:
                if _lease_alive(payload):
                    try:
                        p = orjson.loads(payload) if payload else {}
                    except orjson.JSONDecodeError:
                        p = {}
                    return {"running": True, "source": "lease", "pid": (p.get("owner") or {}).get("pid"),
                            "port": p.get("port")}
        except sqlite3.Error:
            pass
    uid = os.getuid() if uid is None and hasattr(os, "getuid") else uid
    lock_dir = state_dir / "tmp" / (f"openclaw-{uid}" if uid is not None else "openclaw")
    try:
        names = sorted(os.listdir(lock_dir))
    except OSError:
        names = []
    for name in names:
        if name.startswith("gateway.") and name.endswith(".lock"):
            info = read_lock(lock_dir / name)
            if info is not None and info.alive and info.pid is not None:
                return {"running": True, "source": "lock", "pid": info.pid, "port": None}
    return {"running": False, "source": None, "pid": None, "port": None}


def gateway_running(state_dir: Path, now_ms: int | None = None) -> bool:
    return bool(gateway_status(state_dir, now_ms)["running"])
