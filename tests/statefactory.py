"""Build OpenClaw states in tmp dirs for tests: file era (sessions.json + transcripts, as 2026.7.1 writes them) and
database era (the real 2026.9.6 schema from tests/data, filled the way OpenClaw fills it).

    st = FileState(tmp_path / ".openclaw")              # agents/<agent>/sessions/...
    s = st.add_session(key="agent:main:main", turns=12, compaction_count=2)
    st.lock_transcript(s.path, pid=os.getpid())         # a run in progress
    db = DbState(tmp_path / ".openclaw")
    db.add_session("agent:main:main", events=[{...}, ...], entry={"compactionCount": 3})

Everything here writes only inside the given directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
AGENT_SCHEMA = DATA / "openclaw-2026.9.6-agent-schema.sql"
STATE_SCHEMA = DATA / "openclaw-2026.9.6-state-schema.sql"
# the database-era releases whose schemas are captured in tests/data (8.1 stands for 8.1–9.4: agent schema 19)
SCHEMA_RELEASES = ("2026.8.1", "2026.9.5", "2026.9.6")


def schema_files(release: str) -> tuple[Path, Path]:
    """(agent DDL, global state DDL) of a captured release; other releases get 2026.9.6's."""
    if release in SCHEMA_RELEASES:
        return DATA / f"openclaw-{release}-agent-schema.sql", DATA / f"openclaw-{release}-state-schema.sql"
    return AGENT_SCHEMA, STATE_SCHEMA


def header_version(release: str) -> int:
    """The transcript header's version: 3 in 2026.8.1–9.2, 4 from 9.3 on."""
    parts = tuple(int(x) for x in release.split(".")[:3]) if release[:4].isdigit() else (9999,)
    return 3 if parts < (2026, 9, 3) else 4


def user_version(sql_file: Path) -> int:
    import re

    return int(re.search(r"PRAGMA user_version = (\d+);", sql_file.read_text())[1])


def proc_starttime(pid: int) -> int | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(data[data.rfind(")") + 2:].split()[19])


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_lock(path: Path, pid: int, *, starttime: int | None | str = "auto", created_at: float | None = None,
               spelling: str = "starttime", extra: dict | None = None) -> Path:
    """A lock file in OpenClaw's payload shape. starttime "auto" = the pid's real start time."""
    st = proc_starttime(pid) if starttime == "auto" else starttime
    payload = {"pid": pid, "createdAt": iso(time.time() if created_at is None else created_at)}
    if st is not None:
        payload[spelling] = st
    payload.update(extra or {})
    path.write_text(json.dumps(payload))
    return path


@dataclass
class MadeSession:
    key: str | None
    session_id: str
    path: Path
    entry: dict


class FileState:
    """A file-era state (OpenClaw up to 2026.7.x)."""

    def __init__(self, state_dir: Path, config: dict | None = None):
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if config is not None:
            (self.state_dir / "openclaw.json").write_text(json.dumps(config, indent=2))

    def sessions_dir(self, agent: str = "main") -> Path:
        d = self.state_dir / "agents" / agent / "sessions"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def index_path(self, agent: str = "main") -> Path:
        return self.sessions_dir(agent) / "sessions.json"

    def read_index(self, agent: str = "main") -> dict:
        p = self.index_path(agent)
        return json.loads(p.read_text()) if p.exists() else {}

    def write_index(self, data: dict, agent: str = "main") -> None:
        p = self.index_path(agent)
        p.write_text(json.dumps(data, indent=2))
        os.chmod(p, 0o600)

    def add_session(self, key: str | None = "agent:main:main", *, agent: str = "main", session_id: str | None = None,
                    compaction_count: int = 0, updated_at: float | None = None, session_file: str = "absolute",
                    entry: dict | None = None, mtime: float | None = None, **synth) -> MadeSession:
        """A transcript written by occd.transcript.synth (OpenClaw's own shapes) and, unless key is None, its
        index entry. session_file: "absolute" (2026.7.1 style), "relative" (a name) or "none" (no sessionFile)."""
        from occd.openclaw import new_session_id
        from occd.transcript import synth as synth_mod

        sdir = self.sessions_dir(agent)
        info = synth_mod.generate_transcript(sdir, session_id=session_id or new_session_id(), **synth)
        t = time.time() - 3600 if updated_at is None else updated_at
        m = t if mtime is None else mtime
        os.utime(info.path, (m, m))
        e = {"sessionId": info.id, "updatedAt": int(t * 1000), "compactionCount": compaction_count,
             "model": "claude-opus-4-6", "modelProvider": "anthropic", "chatType": "direct",
             "someFutureField": {"kept": True}}
        if session_file == "absolute":
            e["sessionFile"] = str(info.path)
        elif session_file == "relative":
            e["sessionFile"] = info.path.name
        e.update(entry or {})
        if key is not None:
            idx = self.read_index(agent)
            idx[key] = e
            self.write_index(idx, agent)
        return MadeSession(key, info.id, info.path, e)

    def lock_transcript(self, transcript: Path, pid: int | None = None, **kw) -> Path:
        return write_lock(transcript.with_name(transcript.name + ".lock"), os.getpid() if pid is None else pid, **kw)


def _octet_length(v):
    if v is None:
        return None
    return len(v.encode("utf-8")) if isinstance(v, str) else len(bytes(v))


def open_rw(db: Path) -> sqlite3.Connection:
    """A writable connection for building fixtures (Python's SQLite may predate octet_length, which OpenClaw's
    CHECK constraints use: provide it)."""
    c = sqlite3.connect(db)
    c.create_function("octet_length", 1, _octet_length, deterministic=True)
    return c


class DbState:
    """A database-era state (OpenClaw 2026.8+) with the real schema of the tables occd reads: that of
    `app_version` when tests/data has it (SCHEMA_RELEASES), else 2026.9.6's."""

    def __init__(self, state_dir: Path, app_version: str = "2026.9.6"):
        self.state_dir = Path(state_dir)
        self.app_version = app_version
        self.agent_schema, self.state_schema = schema_files(app_version)
        (self.state_dir / "state").mkdir(parents=True, exist_ok=True)
        g = self.state_dir / "state" / "openclaw.sqlite"
        if not g.exists():
            c = open_rw(g)
            c.executescript(self.state_schema.read_text())
            now = int(time.time() * 1000)
            c.execute("INSERT INTO schema_meta VALUES ('primary','global',?,NULL,?,?,?)",
                      (user_version(self.state_schema), app_version, now, now))
            c.commit()
            c.close()

    def db_path(self, agent: str = "main") -> Path:
        return self.state_dir / "agents" / agent / "agent" / "openclaw-agent.sqlite"

    def connect(self, agent: str = "main") -> sqlite3.Connection:
        p = self.db_path(agent)
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            c = open_rw(p)
            c.executescript(self.agent_schema.read_text())
            now = int(time.time() * 1000)
            c.execute("INSERT INTO schema_meta VALUES ('primary','agent',?,?,?,?,?)",
                      (user_version(self.agent_schema), agent, self.app_version, now, now))
            if self.app_version == "2026.9.5":  # 9.5's second agent row (its app_version is not a release)
                c.execute("INSERT INTO schema_meta VALUES ('historical-transcript-directives-v1','agent',1,?,?,?,?)",
                          (agent, '{"phase":"complete"}', now + 1, now + 1))
            c.execute("PRAGMA journal_mode=WAL")
            c.commit()
            return c
        return open_rw(p)

    def add_session(self, key: str, *, agent: str = "main", session_id: str | None = None,
                    events: list[dict] | None = None, entry: dict | None = None, updated_at: int | None = None,
                    status: str | None = "done", valid: bool = True, archived: bool = False,
                    compress: bool = False) -> str:
        """One session_nodes row (+ its window and transcript events, seq 0 = the header). `compress` stores the
        events ≥ 1024 bytes as OpenClaw does (event_zstd + event_utf8_bytes + navigation_json)."""
        from occd.openclaw import new_session_id

        sid = session_id or new_session_id()
        now = int(time.time() * 1000) if updated_at is None else updated_at
        e = {"sessionId": sid, "updatedAt": now, "sessionStartedAt": now, "model": "fake-model",
             "modelProvider": "fake", "contextTokens": 128000}
        e.update(entry or {})
        c = self.connect(agent)
        with c:
            c.execute("INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at, status, "
                      "archived_at, last_interaction_at) VALUES (?,?,?,?,?,?,?)",
                      (key, sid, json.dumps(e), now, status, now if archived else None, now))
            # the insert trigger marks the row pending (0); OpenClaw validates it afterwards
            c.execute("UPDATE session_nodes SET entry_valid = ? WHERE session_key = ?", (1 if valid else -1, key))
            c.execute("INSERT INTO session_windows (session_id, session_key, created_at, updated_at) VALUES (?,?,?,?)",
                      (sid, key, now, now))
            header = {"type": "session", "version": header_version(self.app_version), "id": sid, "timestamp": iso(now / 1000), "cwd": "/ws"}
            for seq, ev in enumerate([header, *(events or [])]):
                text = json.dumps(ev, separators=(",", ":"), ensure_ascii=False)
                raw = text.encode("utf-8")
                if compress and len(raw) >= 1024 and seq > 0:
                    import zstandard

                    z = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(raw)
                    nav = json.dumps({"version": 1, "report": {"kind": "canonical"}, "navigation": {}, "reset": {},
                                      "model": {}, "modelBytes": len(raw), "modelWithoutCheckpointBytes": len(raw),
                                      "withoutCustomDataBytes": len(raw)})
                    c.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, "
                              "event_utf8_bytes, navigation_json) VALUES (?,?,NULL,?,?,?,?)",
                              (sid, seq, now, z, len(raw), nav))
                elif self.has_utf8_bytes(c):
                    c.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at, "
                              "event_utf8_bytes) VALUES (?,?,?,?,?)", (sid, seq, text, now, len(raw)))
                else:  # before 2026.9.6: plain event_json only
                    c.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
                              "VALUES (?,?,?,?)", (sid, seq, text, now))
                if isinstance(ev, dict) and isinstance(ev.get("id"), str) and seq > 0:
                    c.execute("INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, "
                              "parent_id, created_at) VALUES (?,?,?,?,?,?)",
                              (sid, ev["id"], seq, ev.get("type"), ev.get("parentId"), now))
        c.close()
        return sid

    @staticmethod
    def has_utf8_bytes(c) -> bool:
        return "event_utf8_bytes" in {r[1] for r in c.execute("PRAGMA table_info(transcript_events)")}

    def append_events(self, session_id: str, events: list[dict], *, agent: str = "main") -> None:
        """More events at the end of a session's transcript (a reset marker, the turns after it), plain JSON."""
        c = self.connect(agent)
        now = int(time.time() * 1000)
        with c:
            (seq,) = c.execute("SELECT COALESCE(MAX(seq), -1) FROM transcript_events WHERE session_id = ?",
                               (session_id,)).fetchone()
            for ev in events:
                seq += 1
                c.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?,?,?,?)",
                          (session_id, seq, json.dumps(ev, separators=(",", ":"), ensure_ascii=False), now))
                c.execute("INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, "
                          "parent_id, created_at) VALUES (?,?,?,?,?,?)",
                          (session_id, ev["id"], seq, ev.get("type"), ev.get("parentId"), now))
        c.close()

    def add_lease(self, pid: int, *, expires_at: int | None = None, host: str | None = None, port: int = 18789) -> None:
        import socket

        now = int(time.time() * 1000)
        payload = {"owner": {"pid": pid, "host": host or socket.gethostname(), "startedAt": 1}, "port": port,
                   "mode": "foreground", "supervisor": None}
        c = open_rw(self.state_dir / "state" / "openclaw.sqlite")
        with c:
            c.execute("INSERT OR REPLACE INTO state_leases VALUES ('gateway-owner','global','x',?,?,?,?,?)",
                      (now + 300_000 if expires_at is None else expires_at, now, json.dumps(payload), now, now))
        c.close()


def message(role: str, text: str, *, id: str, parent: str | None, usage: dict | None = None) -> dict:
    """A transcript message entry in OpenClaw's shape."""
    msg: dict = {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]}
    if usage:
        msg["usage"] = usage
    return {"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-23T00:00:00.000Z", "message": msg}


# --------------------------------------------------------------------------------------------------------------
# A workstation: many agents, each with a history of sessions (issue 29)
# --------------------------------------------------------------------------------------------------------------

WORKSTATION_WINDOW = 200_000
_TEMPLATE_ID = "00000000-0000-7000-8000-00000000f00d"


def build_workstation(state_dir: Path, agents: int, sessions: int, *, mean_bytes: int = 68_000, seed: int = 29,
                      now: float | None = None, max_age_s: float = 30 * 86400, templates: int = 24,
                      write_config: bool = True) -> dict:
    """A file-era state as a workstation has one: `agents` agents (agent0000, ...) with `sessions` sessions each,
    transcript sizes spread log-normally around `mean_bytes`, last used from a minute to `max_age_s` ago (spread
    log-uniformly: a few sessions busy today, most of them days or weeks old), a quarter of them compacted some
    time. Transcripts are real synth output: `templates` are generated once and copied under each session's id
    (the header's id rewritten), so a 5,000-session state builds in seconds. Returns counts and bytes."""
    import math
    import random
    import shutil

    from occd.openclaw import new_session_id
    from occd.transcript import synth

    state_dir = Path(state_dir)
    now = time.time() if now is None else now
    rnd = random.Random(seed)
    (state_dir / "agents").mkdir(parents=True, exist_ok=True)
    if write_config:
        (state_dir / "openclaw.json").write_text(json.dumps({"models": {"providers": {"anthropic": {"models": [
            {"id": "claude-opus-4-6", "contextWindow": WORKSTATION_WINDOW}]}}}}))
    pool = state_dir / ".templates"
    pool.mkdir(exist_ok=True)
    tpl: list[tuple[bytes, bytes]] = []  # (first line, rest)
    for t in range(templates):
        size = max(4_000, min(2_000_000, int(mean_bytes * math.exp(rnd.gauss(0, 0.9)) / 1.5)))
        info = synth.generate_transcript(pool, session_id=_TEMPLATE_ID, seed=seed + t, target_bytes=size,
                                         compactions=1 if t % 4 == 0 and size > 60_000 else 0,
                                         thinking=t % 3 == 0, big_results=t % 5 == 0)
        head, _, rest = info.path.read_bytes().partition(b"\n")
        tpl.append((head, rest))
    shutil.rmtree(pool)
    total = 0
    lo, hi = math.log(60), math.log(max_age_s)
    for a in range(agents):
        name = f"agent{a:04d}"
        sdir = state_dir / "agents" / name / "sessions"
        sdir.mkdir(parents=True, exist_ok=True)
        index = {}
        for i in range(sessions):
            sid = new_session_id()
            head, rest = tpl[rnd.randrange(len(tpl))]
            path = sdir / f"{sid}.jsonl"
            data = head.replace(_TEMPLATE_ID.encode(), sid.encode(), 1) + b"\n" + rest
            path.write_bytes(data)
            total += len(data)
            last = now - math.exp(rnd.uniform(lo, hi))
            os.utime(path, (last, last))
            index[f"agent:{name}:s{i}"] = {
                "sessionId": sid, "sessionFile": str(path), "updatedAt": int(last * 1000),
                "compactionCount": rnd.choice((0, 0, 0, 1)), "model": "claude-opus-4-6",
                "modelProvider": "anthropic", "chatType": "direct"}
        (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return {"agents": agents, "sessions": agents * sessions, "bytes": total}
