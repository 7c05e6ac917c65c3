"""The daemon's single-instance lock: a non-blocking flock on `<runtime dir>/occd.lock`, which holds our pid; a
second `occd run` exits 75 naming that pid. The kernel drops the lock when the process dies, so a crash never
leaves it stale. Split out of occd/runtime/daemon.py (issue 25), unchanged."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from occd import paths
from occd.errors import BusyError, OccdError


def lock_path() -> Path:
    return paths.runtime_dir() / "occd.lock"


class InstanceLock:
    """The single-instance lock: flock(LOCK_EX|LOCK_NB) on a file holding the owner's pid."""

    def __init__(self, path: Path | None = None):
        self.path = path or lock_path()
        self.fd: int | None = None

    def acquire(self) -> "InstanceLock":
        paths.ensure_dir(self.path.parent)
        try:  # never through a symlink planted at the lock's name
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as e:
            raise OccdError(f"Cannot take occd's lock {self.path}: {e.strerror}", "remove it", code="LOCK_FAILED") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            finally:
                os.close(fd)
            raise BusyError(f"occd is already running (pid {holder})",
                            "`occd scan-now` asks it to scan now; `occd status` shows what it is doing (to stop it: "
                            "`systemctl --user stop occd` or kill that pid)", code="ALREADY_RUNNING") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:  # a full OCCD_HOME: the lock is let go, the caller says "Failed to write <lock>"
            os.close(fd)
            raise OSError(e.errno, e.strerror, str(self.path)) from None
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self) -> "InstanceLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    @staticmethod
    def holder(path: Path | None = None) -> int | None:
        """The pid of a running daemon (-1 when it cannot be read), or None when nobody holds the lock."""
        p = path or lock_path()
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None  # we could lock it: nobody holds it
            except BlockingIOError:
                txt = os.read(fd, 32).decode(errors="replace").strip()
                return int(txt) if txt.isdigit() else -1
        finally:
            os.close(fd)

