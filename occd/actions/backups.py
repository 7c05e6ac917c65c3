"""Backups of transcripts: `{stem}.backup.{n}.jsonl` beside the transcript, n monotonic, newest `keep` kept.

A backup is made at the instant of the replace, by hard-linking the original inode to the backup name just
before the new file is renamed over it: the backup is then exactly the bytes that were replaced (the old inode
belongs to the backup alone), it costs no copy of a 100 MB file, and a crash between the link and the rename
leaves the untouched original under both names. Where links are not possible the file is copied (fsync'ed).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from occd.transcript.rewrite import fsync_dir  # noqa: F401 - re-exported for the actions

_BACKUP_RE = re.compile(r"^(?P<stem>.+)\.backup\.(?P<n>\d+)\.jsonl$")


@dataclass(frozen=True)
class Backup:
    path: Path
    number: int

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def _stem(transcript: Path) -> str:
    name = transcript.name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name


def is_backup_name(name: str) -> bool:
    return bool(_BACKUP_RE.match(name))


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
            out.append(Backup(transcript.parent / name, int(m.group("n"))))
    return sorted(out, key=lambda b: b.number)


def next_backup_path(transcript: Path) -> Path:
    existing = list_backups(transcript)
    n = existing[-1].number + 1 if existing else 1
    return transcript.parent / f"{_stem(transcript)}.backup.{n}.jsonl"


def snapshot(src: Path, dst: Path) -> None:
    """Make `dst` hold the current bytes of `src`: a hard link (O(1)) or, failing that, an fsync'ed copy."""
    try:
        os.link(src, dst)
        return
    except OSError:
        pass
    tmp = dst.with_name(dst.name + ".tmp")
    try:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()


def prune(transcript: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` backups; returns the deleted paths."""
    backups = list_backups(transcript)
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
