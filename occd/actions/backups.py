"""Backups of transcripts: `{stem}.backup.{n}.jsonl` beside the transcript, n monotonic, newest `keep` kept;
`{stem}.backup.{n}.pinned.jsonl` is kept until the user deletes it (never pruned).

A backup is made at the instant of the replace, by hard-linking the original inode to the backup name just
before the new file is renamed over it: the backup is then exactly the bytes that were replaced (the old inode
belongs to the backup alone), it costs no copy of a 100 MB file, and a crash between the link and the rename
leaves the untouched original under both names. Where links are not possible the file is copied (fsync'ed).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from occd.transcript.rewrite import fsync_dir  # noqa: F401 - re-exported for the actions

_BACKUP_RE = re.compile(r"^(?P<stem>.+)\.backup\.(?P<n>\d+)(?P<pinned>\.pinned)?\.jsonl$")
PINNED = ".pinned"  # `{stem}.backup.{n}.pinned.jsonl`: kept until the user deletes it, never pruned


@dataclass(frozen=True)
class Backup:
    path: Path
    number: int
    pinned: bool = False

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def _stem(transcript: Path) -> str:
    name = transcript.name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name


def is_backup_name(name: str) -> bool:
    return bool(_BACKUP_RE.match(name))


def backup_files(state_dir: Path | None) -> list[Path]:
    """Every backup file in every agent's sessions folder (what `occd check` holds against the ledger's record)."""
    root = Path(state_dir) / "agents" if state_dir is not None else None
    out: list[Path] = []
    try:
        agents = sorted(os.listdir(root)) if root is not None else []
    except OSError:
        return out
    for a in agents:
        sdir = root / a / "sessions"
        try:
            out += [sdir / n for n in sorted(os.listdir(sdir)) if is_backup_name(n)]
        except OSError:
            continue
    return out


def list_backups(transcript: Path) -> list[Backup]:
    """Backups of this transcript, oldest first."""
    stem = _stem(transcript)
    out = []
    try:
        names = os.listdir(transcript.parent)
    except FileNotFoundError:
        return []
    for name in names:
        m = _BACKUP_RE.match(name)
        if m and m.group("stem") == stem:
            out.append(Backup(transcript.parent / name, int(m.group("n")), bool(m.group("pinned"))))
    return sorted(out, key=lambda b: b.number)


def _name(transcript: Path, n: int, pinned: bool = False) -> str:
    return f"{_stem(transcript)}.backup.{n}{PINNED if pinned else ''}.jsonl"


def next_backup_path(transcript: Path, pinned: bool = False) -> Path:
    existing = list_backups(transcript)
    n = existing[-1].number + 1 if existing else 1
    return transcript.parent / _name(transcript, n, pinned)


# link(2) errors that mean "this file system cannot make the link here": only then is the file copied.
# EEXIST is never one of them: the name is taken, and the next number is tried instead.
_NO_LINK = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOSYS, errno.EOPNOTSUPP,
            getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


def snapshot(src: Path, dst: Path | None = None, *, expect_inode: int | None = None, pinned: bool = False) -> Path:
    """Give the current bytes of `src` a new backup name, taken exclusively: a hard link (O(1)) made with
    link(2), which fails on an existing name — then the next number is tried; an existing backup is never
    replaced. Only where the file system cannot link (EPERM, EXDEV, ENOTSUP, ...) is the file copied, into a
    name reserved with O_EXCL. expect_inode: the inode the caller read; if `src` is another file now, the
    new name is removed again and BusyError raised. Returns the backup path."""
    from occd.errors import BusyError

    path = dst or (next_backup_path(src, True) if pinned else next_backup_path(src))
    m = _BACKUP_RE.match(path.name)
    n = int(m.group("n")) if m else 1
    pinned = bool(m and m.group("pinned"))
    for _ in range(10000):
        try:
            _link(src, path)
            made = "link"
            break
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in _NO_LINK:
                raise
            if _copy_exclusive(src, path, expect_inode):
                made = "copy"
                break
        n += 1
        path = src.parent / _name(src, n, pinned)
    else:
        raise FileExistsError(f"no free backup name for {src}")
    if made == "link" and expect_inode is not None:
        try:
            same = os.stat(path).st_ino == expect_inode
        except OSError:
            same = False
        if not same:
            path.unlink(missing_ok=True)
            raise BusyError(f"Session '{src.stem}' was replaced while occd was working on it",
                            "nothing was changed; try again when the agent is idle")
    return path


def _link(src: Path, dst: Path) -> None:
    os.link(src, dst)  # tests make it fail to exercise the copy (a file system without hard links)


def _copy_exclusive(src: Path, dst: Path, expect_inode: int | None) -> bool:
    """Copy src to the backup name dst, reserved with O_EXCL (False when taken). The bytes go to a temp file
    first (fsync'ed) and replace only the reservation this call made."""
    from occd.errors import BusyError

    try:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.copy.occd-tmp")
    try:
        with open(src, "rb") as fin:
            st = os.fstat(fin.fileno())
            if expect_inode is not None and st.st_ino != expect_inode:
                raise BusyError(f"Session '{src.stem}' was replaced while occd was working on it",
                                "nothing was changed; try again when the agent is idle")
            with open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
                fout.flush()
                os.fchmod(fout.fileno(), st.st_mode & 0o7777)
                os.fsync(fout.fileno())
        os.replace(tmp, dst)
    except BaseException:
        dst.unlink(missing_ok=True)
        raise
    finally:
        if tmp.exists():
            tmp.unlink()
    return True


def prune(transcript: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` backups; returns the deleted paths. Pinned backups (a restore that
    discarded newer turns keeps the file it replaced so) are never pruned and do not count."""
    backups = [b for b in list_backups(transcript) if not b.pinned]
    doomed = backups[: max(0, len(backups) - keep)]
    removed = []
    for b in doomed:
        try:
            b.path.unlink()
            removed.append(b.path)
        except FileNotFoundError:
            pass
    if removed:
        fsync_dir(transcript.parent)
    return removed
