"""Did a database-era rotation take effect? Read from OpenClaw's own database (read-only), not from the gateway's
answer: OpenClaw's issue #126836 shows `sessions.reset` answering ok while changing nothing.

- The reset boundary: after the rotation started (the transcript's last seq then is recorded), a `{"type":"reset"}`
  transcript event appeared after that seq, or a `session_windows` row for the key with reason `reset`.
- The seed landed: after that boundary, a user message carrying the rotation's marker, followed by an assistant
  message (the seed turn's reply).

`DbEvidence(None)` (no state dir known, or no agent database) answers None: "cannot tell", and the caller falls
back on what the gateway reports (sessionStartedAt moving on).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import orjson

log = logging.getLogger("occd.rotation")


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


class DbEvidence:
    """What OpenClaw's agent database shows about one session (opened read-only, each question on a fresh
    connection so a running gateway's new rows are seen)."""

    def __init__(self, state_dir: Path | None, agent: str, key: str, session_id: str):
        self.state_dir, self.agent, self.key, self.session_id = state_dir, agent, key, session_id

    def _store(self):
        if self.state_dir is None:
            return None
        from occd.openclaw.dbstore import DB_NAME, DbStore

        db = Path(self.state_dir) / "agents" / self.agent / "agent" / DB_NAME
        if not db.exists():
            return None
        return DbStore(Path(self.state_dir), self.agent)

    def last_seq(self) -> int | None:
        st = self._store()
        if st is None:
            return None
        with st:
            rows = st._query("SELECT MAX(seq) FROM transcript_events WHERE session_id = ?", (self.session_id,))
        return rows[0][0] if rows and rows[0][0] is not None else -1

    def _events_after(self, st, seq: int) -> list[tuple[int, dict]]:
        from occd.openclaw.dbstore import decode_event

        cols = "seq, event_json, event_zstd, event_utf8_bytes" if st._has("transcript_events", "event_zstd") \
            else "seq, event_json, NULL, NULL"
        out = []
        for s, ej, ez, n in st._query(f"SELECT {cols} FROM transcript_events WHERE session_id = ? AND seq > ? "
                                      "ORDER BY seq", (self.session_id, seq)):
            try:
                o = orjson.loads(decode_event(ej, ez, n))
            except (ValueError, orjson.JSONDecodeError):
                continue
            if isinstance(o, dict):
                out.append((s, o))
        return out

    def reset_after(self, seq: int, since_ms: int) -> dict | None:
        """{"seq": n} (the reset event) or {"window": reason} when the boundary is there; {} when the database
        shows none; None when it cannot tell."""
        st = self._store()
        if st is None:
            return None
        with st:
            for s, o in self._events_after(st, seq):
                if o.get("type") == "reset":
                    return {"seq": s}
            if st._has("session_windows", "reason", "created_at", "session_key"):
                rows = st._query("SELECT session_id FROM session_windows WHERE session_key = ? AND reason = 'reset' "
                                 "AND created_at >= ?", (self.key, since_ms))
                if rows:
                    return {"window": "reset", "sessionId": rows[0][0]}
        return {}

    def seed_after(self, seq: int, marker: str) -> bool | None:
        """True when the seed message (its marker) and a reply after it are stored after `seq`."""
        st = self._store()
        if st is None:
            return None
        with st:
            seen = False
            for _s, o in self._events_after(st, seq):
                m = o.get("message") if o.get("type") == "message" else None
                if not isinstance(m, dict):
                    continue
                if m.get("role") == "user" and marker in _text(m.get("content")):
                    seen = True
                elif seen and m.get("role") == "assistant":
                    return True
        return False


def wait_for(check, *, seconds: float, poll: float = 0.5, sleep=time.sleep):
    """Ask `check()` until it answers something truthy or None (cannot tell), at most seconds/poll more times
    with `poll` seconds between (then its last answer). OpenClaw commits the reset before it answers; the short
    wait only covers a slow writer."""
    tries = max(1, int(seconds / poll) if poll > 0 else 1)
    for i in range(tries + 1):
        got = check()
        if got is None or got or i == tries:
            return got
        sleep(poll)
    return got
