"""Database-era sessions (OpenClaw 2026.8+): `agents/<id>/agent/openclaw-agent.sqlite`, READ-ONLY.

occd never writes this database (OpenClaw's triggers mark an edited row invalid and the session goes offline until
`openclaw doctor --fix`); it opens it with `mode=ro` (and `query_only`), checks the schema, and reads
`session_nodes` (entry_valid = 1, not archived) and `transcript_events` (event_json, or event_zstd decompressed).
Actions go through OpenClaw (gateway.py).

Schemas (tests/data/openclaw-<release>-agent-schema.sql are the DDL of the tables occd reads, dumped from real
states): `PRAGMA user_version` 19 in 2026.8.1–2026.9.4 (transcript header version 3 until 9.2, 4 from 9.3), 21 in
2026.9.5, 23 in 2026.9.6; the release is the `app_version` of the schema_meta row with meta_key 'primary' (9.5
adds a second agent row, 'historical-transcript-directives-v1', whose app_version is a JSON status). The columns
occd reads are all present since 8.1 (REQUIRED_COLUMNS); 9.6 adds `event_zstd` and `event_utf8_bytes`
(OPTIONAL_COLUMNS): before it every event is plain `event_json`. 9.6 stores an event compressed (a plain zstd
frame with checksum, level 1, `event_utf8_bytes` = decoded length) when it is at least 1024 bytes, has no `\\u`
escapes and shrinks by 10%+.

Reset markers: `sessions.reset` resets a session in place (same id) by appending a `{"type":"reset"}` entry
(every database-era release has the writer; occd's rotation makes one). What comes before the last marker is
history, not context: `read_lines` (info, the rotation seed) and the listed size start at it; `read_history`
gives what came before it. A marker with `firstKeptEntryId` (OpenClaw's "preserve-tail" reset) keeps the user and
assistant messages from that entry on, as OpenClaw's own projection does.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from occd.errors import BusyError, OccdError
from occd.openclaw.filestore import SessionInfo, resolve_ref
from occd.openclaw.state import DB_NAME, GLOBAL_DB
from occd.transcript import jsontext

from occd.openclaw.dbschema import (DOCUMENTED_SCHEMAS, KNOWN, KNOWN_SCHEMAS, MAX_EVENT_BYTES,  # noqa: F401
                                    OPTIONAL_COLUMNS, REQUIRED_COLUMNS, UNVERIFIED, VERIFIED_SCHEMA_VERSIONS,
                                    VERIFIED_SCHEMAS, check_schema, connect_ro, ensure_actionable,
                                    inspect_schema, schema_meta_row, schema_version, table_columns,
                                    unverified_words)


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


def _is_reset(line: bytes) -> bool:
    if b'"reset"' not in line:
        return False
    try:
        o = jsontext.loads(line)
    except ValueError:
        return False
    return isinstance(o, dict) and o.get("type") == "reset"


def _relink(lines: list[bytes]) -> list[bytes]:
    """The kept entries and the marker chained to each other (the first to none): their parents before the
    reset are history, and a parentId naming an entry outside the view would read as a broken tree. Only the
    lines whose parentId changes are rewritten (this is occd's read-only view, never written anywhere)."""
    out, prev = [], None
    for ln in lines:
        try:
            o = jsontext.loads(ln)
        except ValueError:
            out.append(ln)
            continue
        if isinstance(o, dict) and o.get("parentId") != prev:
            o["parentId"] = prev
            ln = jsontext.dumps(o) + b"\n"
        if isinstance(o, dict) and isinstance(o.get("id"), str):
            prev = o["id"]
        out.append(ln)
    return out


def context_window_lines(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """(context, history) of a transcript's lines split at its last reset marker. Context: the header, the user
    and assistant messages a `firstKeptEntryId` on the marker keeps (OpenClaw's preserve-tail reset), the marker
    and everything after it (the kept messages and the marker chained to each other, see _relink). History:
    what came before the marker (back to the previous marker: older history was already history then).
    Without a marker: (lines, [])."""
    marks = [i for i, ln in enumerate(lines) if i > 0 and _is_reset(ln)]
    if not marks:
        return lines, []
    last = marks[-1]
    start = marks[-2] + 1 if len(marks) > 1 else 1
    head = lines[:1] if lines and b'"session"' in lines[0] else []
    history = lines[start:last]
    kept: list[bytes] = []
    try:
        first_kept = jsontext.loads(lines[last]).get("firstKeptEntryId")
    except (ValueError, AttributeError):
        first_kept = None
    if isinstance(first_kept, str):
        seen = False
        for ln in lines[1:last]:
            try:
                o = jsontext.loads(ln)
            except ValueError:
                continue
            if not isinstance(o, dict):
                continue
            seen = seen or o.get("id") == first_kept
            if seen and o.get("type") == "message" and (o.get("message") or {}).get("role") in ("user", "assistant"):
                kept.append(ln)
    return head + _relink(kept + [lines[last]]) + lines[last + 1:], history


OVERFLOW_WORDS = ("context overflow", "context length exceeded", "prompt is too long", "maximum context length",
                  "context_length_exceeded")  # 9.6 stores the provider's refusal as the failed turn's errorMessage


def _msg_text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(b.get("text", "") for b in c if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def loop_signals(lines: list[bytes], recent_turns: int = 10) -> dict:
    """Read-only inputs for the daemon's spiral / blocked-session policies in the database era (OpenClaw's
    database is never written: occd acts through the lean view or reset + seed). From a transcript's stored
    lines (all of them, reset markers included):
      resets, lastResetAt           reset markers in the whole transcript, and the last one's timestamp;
      turns                         user turns since the last reset (the context);
      compactionsPerTurn            compaction entries in each of the last `recent_turns` turns (oldest first;
                                    a turn = a user message and what follows it; compactions before the first
                                    user message count for turn 0);
      compactions                   compaction entries since the last reset;
      overflowNotices, blocked      OpenClaw's "Context overflow ... Try /reset" replies since the last reset, and
                                    whether the last assistant message is one (the session is blocked);
      lastReply                     the newest assistant message since the last reset: {text (500 characters, its
                                    errorMessage appended), zeroUsage (all its usage counters zero: OpenClaw wrote
                                    it, not the model), afterLastUser}, or None;
      lastCompactionAt              the newest compaction entry's timestamp since the last reset (ISO), or None.
    occd.policy.emergency.observations_from_signals turns them into the detection's Observations."""
    ctx, _ = context_window_lines(lines)
    resets, last_reset_at = 0, None
    for ln in lines[1:]:
        if _is_reset(ln):
            resets += 1
            try:
                last_reset_at = jsontext.loads(ln).get("timestamp")
            except (ValueError, AttributeError):
                pass
    per_turn = [0]
    turns = compactions = overflow = 0
    blocked = False
    last_reply: dict | None = None
    last_comp_at = None
    from occd.transcript.compaction import is_compaction
    from occd.transcript.jsonl import iter_objects

    for o in iter_objects(ctx[1:]):
        t = o.get("type")
        if is_compaction(o):  # OpenClaw's entry, or a provider checkpoint on an assistant message (10.2+)
            compactions += 1
            per_turn[-1] += 1
            last_comp_at = o.get("timestamp") if isinstance(o.get("timestamp"), str) else last_comp_at
        if t == "message" and isinstance(o.get("message"), dict):
            m = o["message"]
            if m.get("role") == "user":
                turns += 1
                per_turn.append(0)
                if last_reply is not None:
                    last_reply["afterLastUser"] = False
            elif m.get("role") == "assistant":
                text = _msg_text(m)
                em = m.get("errorMessage")
                if isinstance(em, str) and em:
                    text = f"{text} {em}".strip()
                notice = any(w in text.lower() for w in OVERFLOW_WORDS)
                overflow += notice
                blocked = notice
                u = m.get("usage")
                zero = isinstance(u, dict) and not any(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for k, v in u.items()
                    if k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"))
                last_reply = {"text": text[:500], "zeroUsage": zero, "afterLastUser": True}
    if per_turn[0] == 0 and turns:
        per_turn = per_turn[1:]
    return {"resets": resets, "lastResetAt": last_reset_at, "turns": turns, "compactions": compactions,
            "compactionsPerTurn": per_turn[-recent_turns:], "overflowNotices": overflow, "blocked": blocked,
            "lastReply": last_reply, "lastCompactionAt": last_comp_at}


class DbStore:
    era = "db"

    def __init__(self, state_dir: Path, agent: str, agent_dir: Path | None = None,
                 cli_release: tuple[int, int, int] | None = None):
        self.state_dir = state_dir
        self.cli_release = cli_release  # given (the daemon's scan): a database of another release is named
        self.agent = agent
        self.agent_dir = agent_dir or state_dir / "agents" / agent
        self.db_path = self.agent_dir / "agent" / DB_NAME
        self.sessions_dir = None
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self._conn: sqlite3.Connection | None = None
        self._schema: dict = {}
        self._schema_warnings: list[str] = []

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            c = connect_ro(self.db_path)
            try:
                self._schema = inspect_schema(c, self.db_path)
                self._schema_warnings = self._schema["warnings"]
            except BaseException:
                c.close()
                raise
            self._conn = c
        return self._conn

    def schema(self) -> dict:
        """inspect_schema of this agent's database: {userVersion, appVersion, meta, level, actionable, reason,
        columns, warnings} (UNSUPPORTED_SCHEMA if occd cannot read it)."""
        self.conn()
        return self._schema

    @property
    def actionable(self) -> bool:
        """occd may act on this agent's sessions (its schema is KNOWN); otherwise it only reads them."""
        return bool(self.schema().get("actionable"))

    def _has(self, table: str, *cols: str) -> bool:
        self.conn()
        return set(cols) <= self._schema.get("columns", {}).get(table, set())

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

    def _size_sql(self) -> str:
        """SQL for a session's context size (uncompressed bytes of its events from the last reset marker on, and
        the header); `n.current_session_id` names the session."""
        ln = ("COALESCE(e.event_utf8_bytes, length(CAST(e.event_json AS BLOB)), 0)"
              if self._has("transcript_events", "event_utf8_bytes") else "COALESCE(length(CAST(e.event_json AS BLOB)), 0)")
        if self._has("transcript_event_identities", "session_id", "seq", "event_type"):
            last_reset = ("(SELECT MAX(i.seq) FROM transcript_event_identities i "
                          "WHERE i.session_id = n.current_session_id AND i.event_type = 'reset')")
        else:  # reset markers are small: plain event_json
            last_reset = ("(SELECT MAX(r.seq) FROM transcript_events r WHERE r.session_id = n.current_session_id "
                          "AND r.seq > 0 AND r.event_json LIKE '%\"type\":\"reset\"%')")
        return (f"(SELECT COALESCE(SUM({ln}), 0) FROM transcript_events e WHERE e.session_id = n.current_session_id "
                f"AND (e.seq = 0 OR e.seq >= COALESCE({last_reset}, 0)))")

    def sessions(self) -> list[SessionInfo]:
        """Valid, not archived sessions, newest first (as `openclaw sessions list`). `size` is the sum of the
        transcript's event sizes (uncompressed) from its last reset marker on: what came before is history."""
        self.conn()
        rows = self._query(
            "SELECT n.session_key, n.current_session_id, n.entry_json, n.updated_at, n.status, n.label, "
            f"n.display_name, {self._size_sql()} "
            "FROM session_nodes n WHERE n.entry_valid = 1 AND n.archived_at IS NULL "
            "ORDER BY n.updated_at DESC, n.session_key")
        self.warnings = self.notes + self._schema_warnings
        if self.cli_release is not None:
            from occd.openclaw.release import release_mismatch
            from occd.openclaw.state import parse_version

            words = release_mismatch(parse_version(self._schema.get("appVersion")), self.cli_release,
                                     self._schema.get("userVersion"))
            if words:
                self.warnings.append(words)
        ((invalid,),) = self._query("SELECT COUNT(*) FROM session_nodes WHERE entry_valid != 1")
        from occd.openclaw.cold import cold_rows

        cold = cold_rows(self.conn())  # a cold session's size is its archive's raw bytes, not 0
        out = []
        for key, sid, entry_json, updated, status, label, display, size in rows:
            if not size and sid in cold and isinstance(cold[sid].get("raw_bytes"), int):
                size = cold[sid]["raw_bytes"]
            try:
                entry = jsontext.loads(entry_json) if entry_json else {}
            except ValueError:
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

    def all_lines(self, info: SessionInfo) -> list[bytes]:
        """Every stored event of the transcript as .jsonl lines (bytes, each ending in \\n), in seq order, reset
        markers and what came before them included. A row that cannot be decoded is skipped and named in
        `warnings` (seq and why)."""
        self.conn()
        if self._has("transcript_events", "event_zstd", "event_utf8_bytes"):
            sql = ("SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events "
                   "WHERE session_id = ? ORDER BY seq")
        else:
            sql = "SELECT seq, event_json, NULL, NULL FROM transcript_events WHERE session_id = ? ORDER BY seq"
        out = []
        rows = self._query(sql, (info.session_id,))
        for seq, ej, ez, nbytes in rows:
            try:
                out.append(decode_event(ej, ez, nbytes) + b"\n")
            except ValueError as e:
                self.warnings.append(f"{info.session_id}: transcript event seq {seq} is unreadable ({e})")
        if not rows:  # no hot rows: a cold session is read from its archive (never restored), never empty
            from occd.openclaw.cold import cold_rows, read_cold

            cold = cold_rows(self.conn(), [info.session_id]).get(info.session_id)
            if cold is not None:
                return read_cold(self.conn(), self.agent_dir, info.session_id, cold)
        return out

    def is_cold(self, info: SessionInfo) -> bool:
        """The session's events are in a cold archive (no hot rows)."""
        from occd.openclaw.cold import cold_rows

        if info.session_id not in cold_rows(self.conn(), [info.session_id]):
            return False
        return not self._query("SELECT 1 FROM transcript_events WHERE session_id = ? LIMIT 1", (info.session_id,))

    def read_lines(self, info: SessionInfo) -> list[bytes]:
        """The transcript as OpenClaw's context sees it: from the last reset marker on (see context_window_lines)."""
        return context_window_lines(self.all_lines(info))[0]

    def read_history(self, info: SessionInfo) -> list[bytes]:
        """What came before the last reset marker (back to the one before it), after the header: what a rotation
        that already reset the session is seeded from."""
        lines = self.all_lines(info)
        ctx, hist = context_window_lines(lines)
        return (lines[:1] + hist) if hist else []

    def signals(self, info: SessionInfo, recent_turns: int = 10) -> dict:
        """loop_signals of the session (spirals and blocked sessions, read-only)."""
        return loop_signals(self.all_lines(info), recent_turns)

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
        owner = (jsontext.loads(payload_json) or {}).get("owner") or {}
    except (ValueError, TypeError, AttributeError):
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
                        p = jsontext.loads(payload) if payload else {}
                    except ValueError:
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
