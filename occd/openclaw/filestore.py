"""File-era sessions (OpenClaw up to 2026.7.x): `agents/<id>/sessions/sessions.json` + `<sessionId>.jsonl`.

Reads are tolerant (a broken index gives warnings and the transcripts found on disk, never a traceback);
the index is written only through `update_index` (re-read under the lock, change only what the caller
changes, 2-space JSON, temp file + fsync + rename, mode 0600, verified by re-reading).
"""

from __future__ import annotations

import json
import os
import re
import uuid
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from occd.errors import OccdError
from occd.openclaw.locks import IndexLock, transcript_lock

SESSION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_NOT_SESSION = re.compile(
    r"(\.backup\.\d+\.jsonl$)"                     # occd's own backups
    r"|(\.(reset|deleted|bak)\.[^/]*$)"             # OpenClaw's archives (<file>.jsonl.reset.<time>, ...)
    r"|(\.checkpoint\.[0-9a-f-]{36}\.jsonl$)"       # OpenClaw's compaction checkpoints
    r"|(\.zst$)|(\.lock$)|(\.tmp$)|(\.occd-tmp$)"
    r"|(\.trajectory\.jsonl$)|(\.trajectory-path\.json$)", re.IGNORECASE)
ARCHIVE_DIR = "archive"
MAX_INDEX_BYTES = 256 * 1024 * 1024


def is_session_file(name: str | os.PathLike) -> bool:
    """A transcript that is a session: `<id>.jsonl` or `<id>-topic-<t>.jsonl`; not occd's backups or archive
    folder (`sessions/archive/`), not OpenClaw's own archives (.reset/.deleted/.bak, .zst), compaction
    checkpoints, locks, temp files or trajectory side files. Takes a file name or a path relative to sessions/."""
    parts = Path(name).parts
    if not parts or any(p == ARCHIVE_DIR for p in parts[:-1]):
        return False
    name = parts[-1]
    if not name.endswith(".jsonl") or name.startswith("."):
        return False
    if _NOT_SESSION.search(name):
        return False
    return bool(SESSION_ID_RE.match(name[: -len(".jsonl")]))


def new_session_id() -> str:
    """A UUIDv7 string (time-ordered), the id style of recent OpenClaw releases."""
    ms = int(time.time() * 1000)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | ((rand >> 62) & 0xFFF) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


@dataclass
class SessionInfo:
    key: str | None
    session_id: str
    path: Path | None
    updated_at: float | None = None          # epoch ms (OpenClaw's updatedAt), else file mtime in ms
    compaction_count: int | None = None
    total_tokens: int | None = None
    context_tokens: int | None = None
    model: str | None = None
    model_provider: str | None = None
    label: str | None = None
    display_name: str | None = None
    chat_type: str | None = None
    size: int | None = None
    mtime: float | None = None
    inode: int | None = None
    unindexed: bool = False
    archived: bool = False
    status: str | None = None
    entry: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"key": self.key, "sessionId": self.session_id, "path": str(self.path) if self.path else None,
                "updatedAt": self.updated_at, "compactionCount": self.compaction_count,
                "totalTokens": self.total_tokens, "size": self.size, "unindexed": self.unindexed,
                "archived": self.archived}


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v) -> str | None:
    return v if isinstance(v, str) and v else None


def load_index(sessions_dir: Path) -> tuple[dict, list[str]]:
    """(index dict, warnings). Missing → {}; empty, truncated or invalid → {} with a warning."""
    p = sessions_dir / "sessions.json"
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        return {}, []
    except OSError as e:
        return {}, [f"cannot read {p}: {e.strerror}"]
    if size == 0:
        return {}, [f"{p} is empty"]
    if size > MAX_INDEX_BYTES:
        return {}, [f"{p} is {size // (1024 * 1024)} MB, too large to read safely"]
    try:
        import orjson

        data = orjson.loads(p.read_bytes())
    except OSError as e:
        return {}, [f"cannot read {p}: {e.strerror}"]
    except ValueError as e:
        return {}, [f"{p} is not valid JSON ({str(e).splitlines()[0]}); OpenClaw may be mid-write or it is damaged"]
    if not isinstance(data, dict):
        return {}, [f"{p} is not a JSON object"]
    return data, []


def _resolve_file(sessions_dir: Path, entry: dict, sid: str, agent: str | None = None) -> Path:
    """The transcript path as OpenClaw resolves it (config/sessions/paths.ts, 2026.7.1): `sessionFile` inside the
    sessions directory (relative, or absolute under it); an absolute path of the shape
    `.../agents/<this agent>/sessions/<file>` elsewhere (a state written by another install) as it is; anything
    else (escaping paths, foreign layouts) falls back to `<sessionsDir>/<sessionId>.jsonl`."""
    fallback = sessions_dir / f"{sid}.jsonl"
    sf = _str(entry.get("sessionFile"))
    if not sf or not sf.strip():
        return fallback
    sf = sf.strip()
    base = Path(os.path.abspath(sessions_dir))
    if os.path.isabs(sf):
        cand = Path(os.path.normpath(sf))
        try:
            rel = cand.relative_to(base)
            return base / rel if rel.parts else fallback
        except ValueError:
            pass
        parts = cand.parts
        if (len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"
                and (agent is None or parts[-3].lower() == agent.lower())):
            return cand
        return fallback
    rel = os.path.normpath(sf)
    if rel.startswith("..") or os.path.isabs(rel) or rel == ".":
        return fallback
    return base / rel


def info_from_entry(sessions_dir: Path, key: str | None, entry: dict, agent: str | None = None) -> SessionInfo | None:
    sid = _str(entry.get("sessionId"))
    if not sid:
        return None
    path = _resolve_file(sessions_dir, entry, sid, agent)
    return SessionInfo(
        key=key, session_id=sid, path=path, updated_at=_int(entry.get("updatedAt")),
        compaction_count=_int(entry.get("compactionCount")), total_tokens=_int(entry.get("totalTokens")),
        context_tokens=_int(entry.get("contextTokens")), model=_str(entry.get("model")),
        model_provider=_str(entry.get("modelProvider")), label=_str(entry.get("label")),
        display_name=_str(entry.get("displayName")), chat_type=_str(entry.get("chatType")), entry=entry)


def _stat_into(info: SessionInfo) -> bool:
    try:
        st = os.stat(info.path)
    except (OSError, TypeError):
        return False
    info.size, info.mtime, info.inode = st.st_size, st.st_mtime, st.st_ino
    if info.updated_at is None:
        info.updated_at = st.st_mtime * 1000
    return True


class FileStore:
    era = "file"

    def __init__(self, state_dir: Path, agent: str, agent_dir: Path | None = None):
        self.state_dir = state_dir
        self.agent = agent
        self.agent_dir = agent_dir or state_dir / "agents" / agent
        self.sessions_dir = self.agent_dir / "sessions"
        self.notes: list[str] = []      # standing remarks about this store (e.g. it still needs migration)
        self.warnings: list[str] = []   # notes + what the last read found

    def index(self) -> dict:
        data, warnings = load_index(self.sessions_dir)
        self.warnings = self.notes + warnings
        return data

    def sessions(self) -> list[SessionInfo]:
        """Indexed sessions (missing transcripts reported as warnings) plus transcripts on disk that no index
        entry names (`unindexed`), newest first. File stats only; transcripts are not parsed."""
        data = self.index()
        out: list[SessionInfo] = []
        seen: set[str] = set()
        for key, entry in data.items():
            if not isinstance(entry, dict):
                self.warnings.append(f"index entry {key!r} is not an object")
                continue
            info = info_from_entry(self.sessions_dir, key, entry, self.agent)
            if info is None:
                self.warnings.append(f"index entry {key!r} has no sessionId")
                continue
            if not _stat_into(info):
                self.warnings.append(f"{key}: transcript {info.path} is missing")
                continue
            seen.add(os.path.abspath(info.path))
            out.append(info)
        try:
            names = os.listdir(self.sessions_dir)
        except FileNotFoundError:
            names = []
        except OSError as e:
            raise OccdError(f"Cannot read {self.sessions_dir}: {e.strerror}", "check its permissions",
                            code="STATE_UNREADABLE") from None
        for name in names:
            if is_session_file(name):
                p = self.sessions_dir / name
                if os.path.abspath(p) not in seen:
                    info = SessionInfo(key=None, session_id=name[: -len(".jsonl")], path=p, unindexed=True)
                    if _stat_into(info):
                        out.append(info)
        out.sort(key=lambda i: (i.updated_at or 0), reverse=True)
        return out

    def archived_sessions(self) -> list[SessionInfo]:
        d = self.sessions_dir / ARCHIVE_DIR
        out = []
        try:
            names = os.listdir(d)
        except OSError:
            return []
        for name in names:
            if is_session_file(name):
                info = SessionInfo(key=None, session_id=name[: -len(".jsonl")], path=d / name, archived=True)
                if _stat_into(info):
                    out.append(info)
        out.sort(key=lambda i: (i.updated_at or 0), reverse=True)
        return out

    def resolve(self, ref: str, *, include_archived: bool = False) -> SessionInfo:
        try:
            return resolve_ref(self.sessions() + (self.archived_sessions() if include_archived else []), ref,
                               self.agent)
        except OccdError as e:
            if include_archived or e.code != "SESSION_NOT_FOUND":
                raise
            try:  # an archived session is not "not found": say where it is
                hit = resolve_ref(self.archived_sessions(), ref, self.agent)
            except OccdError:
                raise e from None
            raise OccdError(f"Session '{ref}' is archived ({hit.session_id})",
                            f"`occd list --archived --agent {self.agent}` shows it; its transcript is "
                            f"{hit.path}", code="SESSION_ARCHIVED") from None

    def latest(self) -> SessionInfo:
        s = self.sessions()
        if not s:
            raise OccdError(f"No sessions found for agent '{self.agent}'",
                            "OpenClaw creates a session on the agent's first turn", code="NO_SESSIONS")
        return s[0]

    def is_running(self, info: SessionInfo) -> bool:
        if info.path is None:
            return False
        lock = transcript_lock(info.path)
        return bool(lock and lock.alive)

    def read_lines(self, info: SessionInfo):
        with open(info.path, "rb") as fh:
            yield from fh


def resolve_ref(sessions: list[SessionInfo], ref: str, agent: str) -> SessionInfo:
    """Exact id, exact session key, a prefix of the session id or any unique part of it (occd.ids)."""
    from occd.ids import resolve

    return resolve(sessions, ref, id_of=lambda s: s.session_id, key_of=lambda s: s.key,
                   hint_list=f"run `occd list --agent {agent}` to see the sessions")


def write_index_atomic(path: Path, data: dict) -> None:
    import tempfile

    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".sessions.json.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        tmp = None
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def update_index(sessions_dir: Path, fn: Callable[[dict], dict | None]) -> dict:
    """Change sessions.json: re-read it inside sessions.json.lock (taken as older releases take it; harmless on
    2026.7.x, which has no lock file), apply fn, write atomically, verify by re-reading. A broken index is
    never overwritten (OccdError): OpenClaw's own data would be lost."""
    from occd.errors import WriteError

    path = sessions_dir / "sessions.json"
    with IndexLock(path):
        data, warnings = load_index(sessions_dir)
        if warnings and path.exists():
            raise OccdError(f"Refusing to write {path}: {warnings[0]}",
                            "fix or restore sessions.json first (openclaw doctor can help)", code="INDEX_DAMAGED")
        new = fn(data)
        if new is None:
            new = data
        try:
            write_index_atomic(path, new)
        except OSError as e:
            raise WriteError(f"Failed to write {path}", f"check disk space and permissions ({e.strerror})") from None
        check, warnings = load_index(sessions_dir)
        if warnings or check != json.loads(json.dumps(new)):
            raise OccdError(f"sessions.json changed under occd while writing {path}",
                            "OpenClaw wrote it at the same time; run the command again when the gateway is idle",
                            code="INDEX_RACE")
        return new
