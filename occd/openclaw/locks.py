"""OpenClaw's lock files: `<transcript>.jsonl.lock` (a run holds the session) and `sessions.json.lock` (older
file-era releases serialize index writes with it). Payload: {"pid", "createdAt", "starttime"/"startTime", ...}.

A lock is live when its pid is alive and (where both are known) its start time matches /proc/<pid>/stat field
22, so a reused pid is not mistaken for the holder.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from occd.errors import BusyError, OccdError, WriteError
from occd.units import iso_seconds

STALE_AFTER_S = 30.0
# an empty or unparsable sessions.json.lock (no pid to check) this old was left by a kill mid-write: OpenClaw's
# writers (and occd's) write the payload right after the O_EXCL create. Transcript run locks keep STALE_AFTER_S.
PIDLESS_STALE_S = 2.0


def proc_starttime(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # field 2 (comm) may contain spaces and parentheses: split after the last ')'
    rest = data[data.rfind(")") + 2:].split()
    try:
        return int(rest[19])  # field 22 overall = index 19 after pid and comm
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class LockInfo:
    path: Path
    pid: int | None
    created_at: str | None
    starttime: int | None
    alive: bool
    reason: str  # live | dead-pid | pid-reused | unreadable | too-old

    def to_json(self) -> dict:
        return {"path": str(self.path), "pid": self.pid, "createdAt": self.created_at, "alive": self.alive,
                "reason": self.reason}


def read_lock(lock_path: Path | str, now: float | None = None, stale_after: float | None = None,
              pidless_stale: float = STALE_AFTER_S) -> LockInfo | None:
    """None when there is no lock file. `pidless_stale`: after how many seconds a lock without a readable pid
    (empty or unparsable: its writer was killed between create and write) is stale."""
    try:
        with open(lock_path, "rb") as fh:  # (no Path made for the usual answer, no lock: 5,000 sessions a listing)
            raw = fh.read()
    except FileNotFoundError:
        return None
    except OSError:
        return LockInfo(Path(lock_path), None, None, None, True, "unreadable")
    lock_path = Path(lock_path)
    try:
        d = json.loads(raw or b"{}")
    except ValueError:
        d = {}
    pid = d.get("pid") if isinstance(d.get("pid"), int) else None
    st = d.get("starttime", d.get("startTime"))
    st = st if isinstance(st, int) else None
    created = d.get("createdAt") if isinstance(d.get("createdAt"), str) else None
    if pid is None:
        # a lock being written right now (created, payload not yet written) counts as held for a moment; one
        # that stays without a readable pid longer than a writer needs (OpenClaw writes the payload right after
        # its O_EXCL create) was left by a kill between the two: stale, or it would block every writer for 30 s
        try:
            age = (now or time.time()) - lock_path.stat().st_mtime
        except OSError:
            return None  # released between the read and the stat
        alive = age < pidless_stale
        return LockInfo(lock_path, None, created, st, alive, "live" if alive else "unreadable")
    if not pid_alive(pid):
        return LockInfo(lock_path, pid, created, st, False, "dead-pid")
    if st is not None:
        actual = proc_starttime(pid)
        if actual is not None and actual != st:
            return LockInfo(lock_path, pid, created, st, False, "pid-reused")
    if stale_after is not None and created:
        t = iso_seconds(created)
        if t is not None and (now or time.time()) - t > stale_after:
            return LockInfo(lock_path, pid, created, st, False, "too-old")
    return LockInfo(lock_path, pid, created, st, True, "live")


def transcript_lock(transcript: Path) -> LockInfo | None:
    """The run lock of a transcript (`<file>.lock`), or None. `.alive` says whether a run holds it now."""
    return read_lock(f"{os.fspath(transcript)}.lock")


class IndexLock:
    """`sessions.json.lock` taken the way older file-era OpenClaw releases take it (O_CREAT|O_EXCL, payload
    with our pid and start time). Stale locks (dead pid, reused pid, older than 30 s) are removed and taken.
    Waits up to `timeout` seconds, then BusyError."""

    def __init__(self, index_path: Path, timeout: float = 10.0):
        self.path = index_path.with_name(index_path.name + ".lock")
        self.timeout = timeout
        self.held = False

    def __enter__(self):
        deadline = time.monotonic() + self.timeout
        pid = os.getpid()
        payload = json.dumps({"pid": pid, "createdAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
                              "starttime": proc_starttime(pid), "startTime": proc_starttime(pid)}).encode()
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except (FileNotFoundError, NotADirectoryError):
                raise OccdError(f"Cannot lock {self.path}: {self.path.parent} does not exist",
                                "check the agent and the OpenClaw state directory", code="STATE_NOT_FOUND") from None
            except PermissionError:
                raise WriteError(f"Cannot lock {self.path}: permission denied",
                                 f"occd needs write access to {self.path.parent}") from None
            except FileExistsError:
                info = read_lock(self.path, stale_after=STALE_AFTER_S, pidless_stale=PIDLESS_STALE_S)
                if info is not None and not info.alive:
                    try:
                        self.path.unlink()
                    except FileNotFoundError:
                        pass
                    continue
                if time.monotonic() >= deadline:
                    holder = f" (pid {info.pid})" if info and info.pid else ""
                    raise BusyError(f"sessions.json is locked{holder}",
                                    "OpenClaw is writing its session index; try again in a moment") from None
                time.sleep(0.05)
                continue
            try:
                os.write(fd, payload)
            finally:
                os.close(fd)
            self.held = True
            return self

    def __exit__(self, *exc):
        if self.held:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            self.held = False
