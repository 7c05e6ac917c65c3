"""Taking a transcript's name away from OpenClaw without losing a line: the one fence every occd step that
retires a file-era transcript goes through (a rotation's old session, the idle-archive, `rotate --undo`'s seeded
session).

OpenClaw appends by path (appendFileSync: open, O_APPEND, write, close) into the file it resolved when its run
started. A run that starts while occd retires the file would, after a plain unlink, write its reply into a new
headerless file at the old name, indexed by nothing. So, right after the index stopped pointing at the file
(the index write has waited INDEX_SETTLE_S, longer than a writer needs to show itself):

  1. the file must still have the stat planned before the change and no live run lock (`writer_seen`);
  2. its name is taken away: renamed to a hidden `.<file>.occd-rotating` beside it (never listed as a session)
     and the name must stay free — a writer appending by path would create a new file there (`take_name`);
  3. any sign of a writer: the caller's `revert` puts the index back, the held file goes back under its name
     with every line (those of such a new file appended after its own, `give_back`), BusyError (75);
  4. otherwise the held file is removed once its archive holds every byte (`release`), and lines appended to
     the old name after that are added to the archive's end (`absorb_strays`, the caller's very last step).
"""

from __future__ import annotations

import errno
import os
import stat as _stat
import time
from pathlib import Path
from typing import Callable

from occd.errors import BusyError, OccdError

HELD_SUFFIX = ".occd-rotating"
STRAY_SETTLE_S = 0.25


def file_stat(p: Path) -> list[int] | None:
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def held_path(path: Path) -> Path:
    """The name a retired transcript is held under while the index change is confirmed."""
    return path.with_name(f".{path.name}{HELD_SUFFIX}")


def writer_seen(path: Path, planned: list[int] | None) -> str | None:
    """Why `path` is (or may be) being written by OpenClaw, or None: a live run lock, or a stat that is not the
    planned one (appended, replaced, removed)."""
    from occd.openclaw import transcript_lock

    lock = transcript_lock(path)
    if lock is not None and getattr(lock, "alive", False):
        return f"an OpenClaw run holds the session (pid {lock.pid})"
    if file_stat(path) != planned:
        return "OpenClaw wrote to the session"
    return None


def absorb_strays(old_path: Path, into: Path) -> bool:
    """Move whatever a writer appended by path to `old_path` (a new file there, created after occd took the name
    away) to the end of `into`, and remove it; True when there was something. The stray is renamed first, so
    a writer that goes on appending makes yet another file, which the next round picks up."""
    found = False
    for _ in range(100):
        try:
            st = os.lstat(old_path)
        except FileNotFoundError:
            return found
        if not _stat.S_ISREG(st.st_mode):
            return found  # not ours to touch
        stray = old_path.with_name(f".{old_path.name}.occd-stray")
        os.rename(old_path, stray)
        with open(stray, "rb") as fin, open(into, "ab") as fout:
            # a writer that opened the name before the rename may still be writing through its descriptor:
            # the stray is removed only after it stayed quiet for STRAY_SETTLE_S (appendFileSync writes at once)
            quiet = 0.0
            while quiet < STRAY_SETTLE_S:
                chunk = fin.read(1 << 20)
                if chunk:
                    fout.write(chunk)
                    quiet = 0.0
                    continue
                time.sleep(0.01)
                quiet += 0.01
            fout.flush()
            os.fsync(fout.fileno())
        stray.unlink()
        found = True
    return found


def give_back(held: Path, path: Path, on_strays: Callable[[], None] | None = None) -> None:
    """The held file goes back under `path`, with any lines a writer appended to a new file at that name
    meanwhile added after its own (in the order they were written)."""
    for _ in range(100):
        if absorb_strays(path, held) and on_strays is not None:
            on_strays()
        try:
            os.link(held, path)  # fails if a writer made the name again: absorb and retry
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            if path.exists():
                continue
            os.rename(held, path)  # no hard links here: the rename is the best there is
            return
        held.unlink()
        return
    raise OccdError(f"Could not put {path.name} back: something keeps writing to it",
                    f"its content is in {held} and the archive", code="ROTATION_FAILED")


def take_name(path: Path, planned: list[int] | None, revert: Callable[[Path | None], None],
              after_rename: Callable[[], None] | None = None) -> Path:
    """Steps 1–3 of the module doc, called right after the index stopped pointing at `path`. `revert(held)` must
    undo the caller's index change, put `held` (None: the file is still at its name) back with `give_back` and
    raise (BusyError); it is called on any sign of a writer. Returns the held path."""
    if writer_seen(path, planned):
        revert(None)
        raise BusyError(f"{path.name} changed while occd took it away", "nothing was lost; retried when idle")
    held = held_path(path)
    if held.exists():
        held.unlink()  # a leftover of an aborted attempt; the transcript is at its name (checked above)
    os.rename(path, held)
    if after_rename is not None:
        after_rename()
    if path.exists():
        revert(held)
        raise BusyError(f"{path.name} was written while occd took it away", "nothing was lost; retried when idle")
    return held


def release(path: Path, held: Path, archive: Path, session_id: str, archived_stat) -> list[int] | None:
    """Step 4: lines appended by path meanwhile go after the held file's own; the archive (verified against
    `archived_stat`) is made again from the final file when it is not that very inode or the file changed;
    then the held name goes. Returns the archive's stat as verified."""
    from occd.transcript.archive import copy_verified, same_file
    from occd.transcript.rewrite import fsync_dir

    absorb_strays(path, held)
    if not same_file(held, archive) and (file_stat(held) != archived_stat or not archive.exists()):
        archived_stat = copy_verified(held, archive, session_id)
    held.unlink()
    fsync_dir(path.parent)
    return archived_stat

