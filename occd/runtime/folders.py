"""The folders the watcher covers (issue 29, point 4): each one watched (the OS tells us of its writes) or polled
(it could not be watched: inotify limits, a filesystem without change notification), since when and why; the
snapshot a polled folder is compared with; and what `status`, `doctor` and the metrics say per agent."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

WATCHED, POLLED = "watched", "polled"


@dataclass
class Folder:
    path: str
    mode: str                      # WATCHED | POLLED
    since: float                   # wall time it entered this mode
    ident: tuple | None            # (st_dev, st_ino) when registered: a folder removed and recreated differs
    reason: str | None = None      # why it is polled
    watch: object = None           # watchdog's ObservedWatch while watched
    sig: dict = field(default_factory=dict)  # polled: {name: (mtime_ns, size) | "dir"}
    dir_mtime: int | None = None


def ident(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def wanted(state_dir: Path, extra_dirs=()) -> list[str]:
    """The folders to watch (those that exist): the state folder (its agents/ folder appearing again), agents/
    (a new agent), each agent's sessions/ (file era) and, when it holds the agent database, agent/ (database era);
    an agent folder itself only while it has no sessions/ yet (to see it appear). Few folders per agent: each
    watch costs an inotify instance (fs.inotify.max_user_instances, 128 by default)."""
    extra = [str(d) for d in extra_dirs if os.path.isdir(d)]
    out = [str(state_dir)] if state_dir.is_dir() else []
    root = state_dir / "agents"
    if not root.is_dir():
        return out + extra
    out.append(str(root))
    try:
        agents = sorted(e.path for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        agents = []
    for a in agents:
        sessions = os.path.join(a, "sessions")
        has_sessions = os.path.isdir(sessions)
        if has_sessions:
            out.append(sessions)
        adb = os.path.join(a, "agent")
        if _holds_db(adb):
            out.append(adb)
        elif not has_sessions:
            out.append(a)
    return out + extra


def _holds_db(folder: str) -> bool:
    try:
        return any(n.endswith((".sqlite", ".sqlite-wal")) for n in os.listdir(folder))
    except OSError:
        return False


# filesystems whose changes made elsewhere send no inotify event (another client of the share writes): polled
REMOTE_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "davfs",
                       "fuse.sshfs", "fuse.rclone", "fuse.s3fs", "fuse.gcsfuse", "fuse.glusterfs"})


def mounts(mountinfo: str = "/proc/self/mountinfo") -> list[tuple[str, str]]:
    """[(mount point, filesystem type)], longest mount point first; [] where there is no /proc (macOS)."""
    out = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                parts, rparts = left.split(), right.split()
                if len(parts) > 4 and rparts:
                    out.append((parts[4].replace("\\040", " "), rparts[0]))
    except OSError:
        return []
    return sorted(out, key=lambda m: len(m[0]), reverse=True)


def remote_fs(path: str, table: list[tuple[str, str]]) -> str | None:
    """The network filesystem type `path` lies on, None for a local one."""
    for point, fstype in table:
        if path == point or path.startswith(point.rstrip("/") + "/"):
            return fstype if fstype in REMOTE_FS else None
    return None


def snapshot(path: str, interesting: Callable[[str], bool]) -> dict:
    """{name: (mtime_ns, size)} of the files the watcher cares about, {name: "dir"} of the sub-folders."""
    out: dict = {}
    try:
        with os.scandir(path) as it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if not e.name.startswith("."):
                            out[e.name] = "dir"
                    elif interesting(e.path):
                        st = e.stat()
                        out[e.name] = (st.st_mtime_ns, st.st_size)
                except OSError:
                    continue
    except OSError:
        pass
    return out


def poll(f: Folder, interesting: Callable[[str], bool]) -> tuple[list[str], bool]:
    """Compare a polled folder with its last snapshot: (the files that changed, whether sub-folders came or went).
    A sessions/ folder is listed only when its own mtime moved: a run's lock is created and removed (and the
    index replaced) there, so a run's end always moves it."""
    try:
        mt = os.stat(f.path).st_mtime_ns
    except OSError:
        return [], True
    if os.path.basename(f.path) == "sessions" and mt == f.dir_mtime:
        return [], False
    f.dir_mtime = mt
    new = snapshot(f.path, interesting)
    old, f.sig = f.sig, new
    files = [os.path.join(f.path, n) for n in set(old) | set(new)
             if old.get(n) != new.get(n) and "dir" not in (old.get(n), new.get(n))]
    dirs = {n for n, v in old.items() if v == "dir"} != {n for n, v in new.items() if v == "dir"}
    return files, dirs


def agent_of(state_dir: Path, path: str) -> str | None:
    """The agent a folder belongs to (`<state>/agents/<id>/...`), None for the state and agents folders."""
    root = str(state_dir / "agents") + os.sep
    if not path.startswith(root):
        return None
    return path[len(root):].split(os.sep, 1)[0] or None


def summary(state_dir: Path, folders: dict[str, Folder]) -> dict:
    """What status/doctor/metrics show: counts, and per agent whether it is watched or polled and since when (an
    agent is polled when any of its folders is; since: when it entered that mode)."""
    agents: dict[str, dict] = {}
    other: dict[str, dict] = {}
    for f in folders.values():
        a = agent_of(state_dir, f.path)
        if a is None:
            other[f.path] = {"mode": f.mode, "since": f.since, **({"reason": f.reason} if f.reason else {})}
            continue
        cur = agents.get(a)
        if cur is None or (f.mode == POLLED and cur["mode"] == WATCHED) or (f.mode == cur["mode"] and f.since > cur["since"]):
            agents[a] = {"mode": f.mode, "since": f.since, **({"reason": f.reason} if f.reason else {})}
    return {"watched": sum(f.mode == WATCHED for f in folders.values()),
            "polled": sum(f.mode == POLLED for f in folders.values()), "agents": agents, "other": other}




def why(e: BaseException) -> str:
    """An OSError as one short line: 'ENOSPC: inotify watch limit reached'."""
    import errno

    name = errno.errorcode.get(getattr(e, "errno", None) or -1)
    text = getattr(e, "strerror", None) or str(e)
    return (f"{name}: {text}" if name else str(text)).splitlines()[0] if text else type(e).__name__


INOTIFY_LOGGER = "watchdog.observers.inotify_c"


class LostEvents(logging.Filter):
    """Calls `on_lost()` when the kernel dropped events: inotify's queue overflowed (IN_Q_OVERFLOW). watchdog
    (7.x) then rebuilds its watches and logs a warning, but tells no event handler: its log record is the only
    sign. Attached to watchdog's inotify logger while a watcher runs (`attach`, `detach`); every record passes."""

    def __init__(self, on_lost: Callable[[], None]):
        super().__init__()
        self.on_lost = on_lost

    def filter(self, record: logging.LogRecord) -> bool:
        if "overflow" in str(record.msg).lower():
            try:
                self.on_lost()
            except Exception:  # noqa: BLE001 - a log call must not fail
                pass
        return True

    def attach(self) -> "LostEvents":
        lg = logging.getLogger(INOTIFY_LOGGER)
        if not lg.isEnabledFor(logging.WARNING):  # the warning must be made for the filter to see it
            lg.setLevel(logging.WARNING)
        lg.addFilter(self)
        return self

    def detach(self) -> None:
        logging.getLogger(INOTIFY_LOGGER).removeFilter(self)


def live_run_lock(folder: Path) -> bool:
    """A run holds one of the folder's transcripts right now (a `.jsonl.lock` whose pid lives)."""
    try:
        names = [n.name for n in folder.iterdir() if n.name.endswith(".jsonl.lock")]
    except OSError:
        return False
    return any(lock_alive(folder / n) for n in names)


def lock_alive(p: Path) -> bool:
    from occd.openclaw.locks import read_lock

    lock = read_lock(p)
    return lock is not None and lock.alive


__all__ = ["Folder", "LostEvents", "POLLED", "REMOTE_FS", "WATCHED", "agent_of", "ident", "live_run_lock", "lock_alive",
           "mounts", "poll", "remote_fs", "snapshot", "summary", "wanted", "why"]
