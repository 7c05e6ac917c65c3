"""Cold transcripts (OpenClaw 2026.9.5+, agent schema 20 on; opt-in `session.maintenance.coldStorage.enabled`):
an inactive window's events leave `transcript_events` for an immutable zstd JSONL archive, named by a row of
`session_transcript_cold_archives` (session_id, archive_name, archive_sha256, event_count, raw_bytes, last_seq,
storage 'file' | 'sqlite', archive_blob when 'sqlite'; the DDL in openclaw/openclaw
src/state/openclaw-agent-schema.sql). A 'file' archive is `agents/<id>/sessions/cold/<archive_name>`
(`<sha256>.jsonl.zst`). A cold session has NO hot rows: a reader that looks only at transcript_events sees it
empty.

occd reads the archive read-only (never restores it: OpenClaw's `chat.history` restores a cold transcript, a
write, so occd never calls it to look), checks its sha256 and its event count, and raises COLD_ARCHIVE_UNREADABLE
rather than ever showing a cold session as empty.

Lines are the original events' JSON, one per line, in seq order (the shared docs: "zstd JSONL of the original
events"); a line that is a {seq, event|event_json} record is unwrapped.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import orjson

from occd.errors import OccdError

TABLE = "session_transcript_cold_archives"
COLUMNS = ("archive_name", "archive_sha256", "event_count", "raw_bytes", "last_seq", "storage", "archive_blob")
MAX_RAW_BYTES = 1 << 30  # a bound on one decompressed archive when its row states none


def cold_rows(c: sqlite3.Connection, session_ids=None) -> dict[str, dict]:
    """{session_id: row} of the cold archive table (empty when the table is not there), the blob left out."""
    try:
        have = {r[1] for r in c.execute(f"PRAGMA table_info({TABLE})")}
    except sqlite3.DatabaseError:
        return {}
    if not {"session_id", "archive_name", "archive_sha256", "storage"} <= have:
        return {}
    cols = [x for x in COLUMNS if x in have and x != "archive_blob"]
    sql = f"SELECT session_id, {', '.join(cols)} FROM {TABLE}"
    args: tuple = ()
    if session_ids is not None:
        ids = list(session_ids)
        if not ids:
            return {}
        sql += f" WHERE session_id IN ({','.join('?' * len(ids))})"
        args = tuple(ids)
    return {r[0]: dict(zip(cols, r[1:])) for r in c.execute(sql, args).fetchall()}


def _bad(session_id: str, why: str) -> OccdError:
    return OccdError(f"{session_id}: cold transcript archive unreadable ({why})",
                     "OpenClaw restores it on the session's next use; occd never restores it and never reads the "
                     "session as empty (check the file under sessions/cold/, `openclaw doctor`)",
                     code="COLD_ARCHIVE_UNREADABLE", details={"sessionId": session_id, "why": why})


def archive_bytes(c: sqlite3.Connection, agent_dir: Path, session_id: str, row: dict) -> bytes:
    """The archive's compressed bytes (the file, opened read-only, or the row's blob), sha256 checked."""
    name = row.get("archive_name")
    if row.get("storage") == "sqlite":
        got = c.execute(f"SELECT archive_blob FROM {TABLE} WHERE session_id = ?", (session_id,)).fetchone()
        data = bytes(got[0]) if got and got[0] is not None else None
        if data is None:
            raise _bad(session_id, "storage 'sqlite' without archive_blob")
    else:
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise _bad(session_id, f"archive name {name!r}")
        p = agent_dir / "sessions" / "cold" / name
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as e:
            raise _bad(session_id, f"{p}: {e.strerror or e}") from None
    want = (row.get("archive_sha256") or "").lower()
    got_sha = hashlib.sha256(data).hexdigest()
    if got_sha != want:
        raise _bad(session_id, f"sha256 {got_sha[:12]}… is not the recorded {want[:12]}…")
    return data


def read_cold(c: sqlite3.Connection, agent_dir: Path, session_id: str, row: dict) -> list[bytes]:
    """The archived events as .jsonl lines (bytes ending in \\n), checked against the row's event_count."""
    import zstandard

    data = archive_bytes(c, agent_dir, session_id, row)
    raw = row.get("raw_bytes")
    limit = raw if isinstance(raw, int) and 0 < raw <= MAX_RAW_BYTES else MAX_RAW_BYTES
    try:
        with zstandard.ZstdDecompressor().stream_reader(data) as r:
            text = r.read(limit + 1)
    except zstandard.ZstdError as e:
        raise _bad(session_id, f"zstd: {e}") from None
    if len(text) > limit:
        raise _bad(session_id, f"more than {limit} bytes decompressed")
    out = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        try:
            o = orjson.loads(ln)
        except orjson.JSONDecodeError:
            raise _bad(session_id, f"line {len(out) + 1} is not JSON") from None
        if isinstance(o, dict) and "type" not in o and "seq" in o:  # a {seq, event} record
            ev = o.get("event", o.get("event_json"))
            ln = (ev.encode() if isinstance(ev, str) else orjson.dumps(ev))
        out.append(ln.rstrip(b"\n") + b"\n")
    n = row.get("event_count")
    if isinstance(n, int) and n != len(out):
        raise _bad(session_id, f"{len(out)} events, the row says {n}")
    return out
