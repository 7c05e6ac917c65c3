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
from occd.transcript import jsontext

SESSION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_NOT_SESSION = re.compile(
    r"(\.backup\.\d+(\.pinned)?\.jsonl$)"          # occd's own backups
    r"|(\.(reset|deleted|bak)\.[^/]*$)"             # OpenClaw's archives (<file>.jsonl.reset.<time>, ...)
    r"|(\.checkpoint\.[0-9a-f-]{36}\.jsonl$)"       # OpenClaw's compaction checkpoints
    r"|(\.zst$)|(\.lock$)|(\.tmp$)|(\.occd-tmp$)"
    r"|(\.trajectory\.jsonl$)|(\.trajectory-path\.json$)", re.IGNORECASE)
ARCHIVE_DIR = "archive"
# OpenClaw writes a new session's index entry first and its transcript with the first reply, seconds later:
# a missing transcript of an entry updated this recently is a session being born, not a problem
NEW_TRANSCRIPT_GRACE_S = 300
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


_CHECKPOINT = re.compile(r"\.checkpoint\.[0-9a-f-]{36}\.jsonl$", re.IGNORECASE)


def valid_session_id(sid) -> bool:
    """OpenClaw's validateSessionId (config/sessions/paths.ts, 2026.7.1 and 2026.7.35): the trimmed id matches
    SAFE_SESSION_ID_RE and `<id>.jsonl` is not a compaction checkpoint name. OpenClaw throws on anything else;
    occd skips such an entry (with a warning) and never builds a path from it. Unlike OpenClaw, occd does not
    trim: an id with surrounding blanks is not one OpenClaw wrote."""
    return (isinstance(sid, str) and bool(SESSION_ID_RE.match(sid)) and "\n" not in sid
            and not _CHECKPOINT.search(f"{sid}.jsonl"))


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

        data = jsontext.loads(p.read_bytes())
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
    named = _session_file(sessions_dir, entry, agent)
    return named if named is not None else sessions_dir / f"{sid}.jsonl"


def _session_file(sessions_dir: Path, entry: dict, agent: str | None) -> Path | None:
    """The entry's `sessionFile` when OpenClaw uses it (_resolve_file), else None."""
    sf = _str(entry.get("sessionFile"))
    if not sf or not sf.strip():
        return None
    sf = sf.strip()
    base = os.path.abspath(sessions_dir)
    if os.path.isabs(sf):
        cand = os.path.normpath(sf)
        if cand.startswith(base + os.sep):  # inside the sessions directory (string work: 5,000 entries a listing)
            return Path(cand)
        if cand == base:
            return None
        parts = cand.split(os.sep)
        if (len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"
                and (agent is None or parts[-3].lower() == agent.lower())):
            return Path(cand)
        return None
    rel = os.path.normpath(sf)
    if rel.startswith("..") or os.path.isabs(rel) or rel == ".":
        return None
    return Path(base, rel)


def info_from_entry(sessions_dir: Path, key: str | None, entry: dict, agent: str | None = None) -> SessionInfo | None:
    sid = _str(entry.get("sessionId"))
    if not sid or not valid_session_id(sid):
        return None
    path = _resolve_file(sessions_dir, entry, sid, agent)
    return SessionInfo(
        key=key, session_id=sid, path=path, updated_at=_int(entry.get("updatedAt")),
        compaction_count=_int(entry.get("compactionCount")), total_tokens=_int(entry.get("totalTokens")),
        context_tokens=_int(entry.get("contextTokens")), model=_str(entry.get("model")),
        model_provider=_str(entry.get("modelProvider")), label=_str(entry.get("label")),
        display_name=_str(entry.get("displayName")), chat_type=_str(entry.get("chatType")), entry=entry)


def _stat_into(info: SessionInfo) -> bool:
    """Fill size/mtime/inode from the file; False when it is missing or not a regular file (a FIFO, a device or
    a directory named like a transcript is never opened: reading one would block or fail)."""
    import stat as _stat

    try:
        st = os.stat(info.path)
    except (OSError, TypeError, ValueError):
        return False
    if not _stat.S_ISREG(st.st_mode):
        info.status = "not-a-file"
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
        self.pending: list[str] = []    # new sessions whose transcript is not written yet (not warnings)

    def index(self) -> dict:
        data, warnings = load_index(self.sessions_dir)
        self.warnings = self.notes + warnings
        return data

    def sessions(self) -> list[SessionInfo]:
        """Indexed sessions (missing transcripts reported as warnings) plus transcripts on disk that no index
        entry names (`unindexed`), newest first. File stats only; transcripts are not parsed."""
        data = self.index()
        self.pending = []
        now_ms = time.time() * 1000
        out: list[SessionInfo] = []
        for key, entry in data.items():
            if not isinstance(entry, dict):
                self.warnings.append(f"index entry {key!r} is not an object")
                continue
            info = info_from_entry(self.sessions_dir, key, entry, self.agent)
            if info is None:
                sid = entry.get("sessionId")
                self.warnings.append(f"index entry {key!r} has no sessionId" if not sid else
                                     f"index entry {key!r} has an invalid sessionId {str(sid)[:80]!r} (skipped)")
                continue
            if not _stat_into(info):
                if info.status != "not-a-file" and info.updated_at is not None \
                        and now_ms - info.updated_at < NEW_TRANSCRIPT_GRACE_S * 1000:
                    self.pending.append(f"{key}: new session, transcript {info.path} not written yet")
                    continue
                self.warnings.append(f"{key}: transcript {info.path} is not a regular file (skipped)"
                                     if info.status == "not-a-file" else f"{key}: transcript {info.path} is missing")
                continue
            out.append(info)
        try:
            names = os.listdir(self.sessions_dir)
        except FileNotFoundError:
            names = []
        except OSError as e:
            raise OccdError(f"Cannot read {self.sessions_dir}: {e.strerror}", "check its permissions",
                            code="STATE_UNREADABLE") from None
        indexed = {i.session_id for i in out}  # a file named like an indexed session whose entry names another
        # file (a moved state's absolute sessionFile): OpenClaw uses that one. Most names are indexed: asked first.
        unindexed = [name for name in names if name[: -len(".jsonl")] not in indexed and is_session_file(name)]
        seen = {os.path.abspath(i.path) for i in out} if unindexed else set()
        for name in unindexed:
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
        from occd.transcript.scan import open_transcript

        with open_transcript(info.path) as fh:
            yield from fh


def resolve_ref(sessions: list[SessionInfo], ref: str, agent: str) -> SessionInfo:
    """Exact id, exact session key, a prefix of the session id or any unique part of it (occd.openclaw.ids)."""
    from occd.openclaw.ids import resolve

    return resolve(sessions, ref, id_of=lambda s: s.session_id, key_of=lambda s: s.key,
                   hint_list=f"run `occd list --agent {agent}` to see the sessions")


def _index_stat(path: Path):
    """(inode, size, mtime_ns, bytes) of the index, None when it does not exist. The bytes are compared too:
    a writer's temp file can get the inode number just freed, with the same size, within one timestamp tick."""
    try:
        st = os.stat(path)
        data = path.read_bytes() if st.st_size <= MAX_INDEX_BYTES else None
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, data)


def write_index_atomic(path: Path, data: dict, expect=False) -> bool:
    """Write sessions.json as OpenClaw does (2-space JSON, temp file + rename, mode 0600), fsync'ed. expect: the
    _index_stat the index had when it was read (None: it did not exist); when given and the index is another
    file (or other bytes) at the moment of the rename, the index is left as it is and False is returned.

    Where the platform can (occd.openclaw.swap), the check and the rename are one step: the temp file and the
    index are exchanged and what came out is compared with what was read; a write that landed in between is
    swapped back in, so it is never lost. Elsewhere the check comes right before the rename."""
    import tempfile

    from occd.openclaw.swap import exchange

    text = jsontext.dumps_text(data, indent=2) + "\n"
    # `.sessions.json.<pid>.<random>.tmp`: occd.transcript.rewrite.clean_stale_temps removes one a kill left
    fd, tmp = tempfile.mkstemp(prefix=f".sessions.json.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        if expect is None:
            try:
                os.link(tmp, path)  # create only if there still is none
            except FileExistsError:
                return False
            except OSError:
                if path.exists():
                    return False
                os.replace(tmp, path)
                tmp = None
        elif expect is not False and exchange(tmp, path):
            if not _displaced_is(tmp, expect):
                _swap_back(tmp, path, text)
                return False
        else:
            if expect is not False and _index_stat(path) != expect:
                return False
            os.replace(tmp, path)
            tmp = None
        from occd.transcript.rewrite import fsync_dir

        fsync_dir(path.parent)
        return True
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _displaced_is(displaced: str, expect) -> bool:
    """The file an exchange took out of the index is the one occd read (same bytes: nothing of it is lost)."""
    try:
        return Path(displaced).read_bytes() == expect[3]
    except OSError:
        return False


def _swap_back(tmp: str, path: Path, ours: str) -> None:
    """A writer landed between occd's read and its exchange: put the index back as the writers left it. If yet
    another write came in during the microseconds ours was in place, that one is the newest: keep it."""
    from occd.openclaw.swap import exchange

    exchange(tmp, path)  # path: the write we displaced; tmp: ours, or a newer write that replaced ours
    try:
        came_out = Path(tmp).read_text(encoding="utf-8")
    except OSError:
        return
    if came_out != ours:
        exchange(tmp, path)


INDEX_SETTLE_S = 0.1
INDEX_ATTEMPTS = 25


def _changes(old: dict, new: dict) -> dict:
    """key -> new value (or a marker for removal) for every top-level key fn changed."""
    gone = object()
    out = {k: new.get(k, gone) for k in set(old) | set(new) if old.get(k, gone) != new.get(k, gone)}
    return {k: (None if v is gone else v) for k, v in out.items()} | {"\0removed": [k for k, v in out.items()
                                                                                   if v is gone]}


def _has_changes(index: dict, changes: dict) -> bool:
    removed = set(changes.get("\0removed", ()))
    for k, v in changes.items():
        if k == "\0removed":
            continue
        if k in removed:
            if k in index:
                return False
        elif json.dumps(index.get(k), sort_keys=True) != json.dumps(v, sort_keys=True):
            return False
    return True


def update_index(sessions_dir: Path, fn: Callable[[dict], dict | None], *,
                 done: Callable[[dict], bool] | None = None, settle: float | None = None) -> dict:
    """Change sessions.json safely against the writers OpenClaw really has.

    What OpenClaw does (read in the dist code of 2026.7.1 and 2026.7.35, config/sessions/store.ts and
    store-writer.ts): no lock file at all — writes are serialized only inside its own process
    (runExclusiveSessionStoreWrite, an in-memory queue per store path); each write re-reads the index unless
    its cache's (mtimeMs, size) still match the file, applies its mutation and writes the whole index with
    writeTextAtomic (temp file + rename, mode 0600). So a write from outside is lost when it lands between
    OpenClaw's read and its rename, and OpenClaw's is lost when it lands between ours.

    occd therefore: (1) takes sessions.json.lock the way older file-era releases do (harmless here);
    (2) re-reads, applies fn and writes a temp file, then compares the index's (inode, size, mtime_ns) with
    what it read right before the rename — if OpenClaw wrote meanwhile, it starts over on the new content
    (OpenClaw's update is kept); (3) after the rename waits `settle` seconds (longer than OpenClaw's
    read-to-rename) and reads the index again: if an OpenClaw write that had read the old index replaced
    ours, fn is applied again on what is there now (`done(index)` says whether the change is in; default: the
    keys fn changed have the values it gave them). A broken index is never overwritten (INDEX_DAMAGED)."""
    from occd.errors import WriteError

    path = sessions_dir / "sessions.json"
    settle = INDEX_SETTLE_S if settle is None else settle
    with IndexLock(path):
        from occd.transcript.rewrite import clean_stale_temps

        clean_stale_temps(sessions_dir)  # what a killed write left (old ones only, never a live writer's)
        changes = None
        for _attempt in range(INDEX_ATTEMPTS):
            before = _index_stat(path)
            data, warnings = load_index(sessions_dir)
            if warnings and path.exists():
                raise OccdError(f"Refusing to write {path}: {warnings[0]}",
                                "fix or restore sessions.json first (openclaw doctor can help)", code="INDEX_DAMAGED")
            if changes is not None and (done(data) if done else _has_changes(data, changes)):
                return data  # a later look: the change is in (ours, re-read)
            base = json.loads(json.dumps(data))
            new = fn(data)
            if new is None:
                new = data
            changes = _changes(base, new)
            try:
                wrote = write_index_atomic(path, new, expect=before)
            except OSError as e:
                raise WriteError(f"Failed to write {path}", f"check disk space and permissions ({e.strerror})") from None
            if not wrote:
                time.sleep(0.01)
                continue  # OpenClaw wrote between our read and our rename: start over on its index
            if settle > 0:
                time.sleep(settle)
            check, warnings = load_index(sessions_dir)
            if not warnings and (done(check) if done else _has_changes(check, changes)):
                return new
        raise OccdError(f"sessions.json keeps changing under occd while writing {path}",
                        "OpenClaw is writing it all the time; run the command again when the gateway is idle",
                        code="INDEX_RACE")
