"""File-level primitives for archiving a file-era transcript, used by occd.actions.archive (the score job's
archiving of idle sessions) and occd.rotation.machine: archive paths, verified copies, hard links.

An archive is always complete before the original name goes: a hard link under the archive name (same
filesystem: the very same bytes, O(1), no disk space needed) or, where links are impossible, a verified copy
(temp file in the archive folder, fsync, check, rename, fsync the folder). "Verified" means: the copy's first and
last lines are valid JSON, it ends with a newline, its header id is the source's, and it has the source's size
and line count. A copy that fails any of these is deleted and the source is left alone, so a full disk or a
crash never costs a byte of the transcript.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import orjson

from occd.errors import BusyError, OccdError, WriteError
from occd.transcript import jsontext

ARCHIVE_DIR = "archive"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def no_symlink(p: Path, what: str = "folder") -> None:
    """OccdError (SYMLINK_REFUSED) when `p` is a symbolic link: occd never writes through one into a place it
    does not know (a symlinked `sessions/archive` would put transcripts into its target)."""
    if os.path.islink(p):
        raise OccdError(f"{p} is a symbolic link; occd does not write through it",
                        f"replace it with a real {what} (move the link aside), then try again", code="SYMLINK_REFUSED")


def safe_archive_dir(d: Path) -> Path:
    """The archive folder, created (0700) when missing; refused when it (the folder itself) is a symlink or not a
    folder."""
    no_symlink(d)
    try:
        d.mkdir(exist_ok=True, mode=0o700)
    except FileExistsError:
        pass
    no_symlink(d)
    if not d.is_dir():
        raise OccdError(f"{d} is not a folder", "move it aside, then try again", code="ARCHIVE_FAILED")
    return d


def _copy_range(fd_in: int, fd_out: int, offset: int, count: int) -> int:
    """Copy up to `count` bytes at `offset` inside the kernel (copy_file_range, else sendfile, else read and
    write); returns how many were copied (0 at the end of the file). The one place archive bytes are written:
    tests make it fail like a full disk."""
    if hasattr(os, "copy_file_range"):
        try:
            return os.copy_file_range(fd_in, fd_out, count, offset)
        except OSError as e:
            if e.errno not in (18, 38, 95, 22):  # EXDEV, ENOSYS, EOPNOTSUPP, EINVAL: try the next way
                raise
    if hasattr(os, "sendfile"):
        try:
            return os.sendfile(fd_out, fd_in, offset, count)
        except OSError as e:
            if e.errno not in (38, 95, 22):
                raise
    data = os.pread(fd_in, count, offset)
    return os.write(fd_out, data) if data else 0


def count_lines(p: Path) -> int:
    n = 0
    with open(p, "rb") as fh:
        while chunk := fh.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def header_id(p: Path) -> str | None:
    from occd.errors import OccdError
    from occd.transcript.scan import open_transcript

    try:
        with open_transcript(p) as fh:  # never blocks on a FIFO
            h = jsontext.loads(fh.readline(1 << 20))
    except (OSError, ValueError, OccdError):
        return None
    return h.get("id") if isinstance(h, dict) else None


def verify_copy(copy: Path, *, lines: int | None, size: int | None, src_id: str | None) -> str | None:
    """None when `copy` is a complete copy of a source with that many lines, size and header id; else what
    is wrong with it. lines/size None: not compared (a hard link is the source itself)."""
    try:
        with open(copy, "rb") as fh:
            first = fh.readline()
            csize = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, csize - (1 << 16)))
            tail = fh.read()
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if size is not None and csize != size:
        return f"{csize} bytes, the source has {size}"
    try:
        head = jsontext.loads(first)
    except ValueError:
        return "first line is not valid JSON"
    if not tail.endswith(b"\n"):
        return "does not end with a newline"
    last = [ln for ln in tail.split(b"\n") if ln.strip()]
    try:
        if last:
            jsontext.loads(last[-1])
    except ValueError:
        return "last line is not valid JSON"
    if src_id is not None and (not isinstance(head, dict) or head.get("id") != src_id):
        return "header id differs from the source"
    n = count_lines(copy) if lines is not None else None
    if n != lines:
        return f"{n} lines, the source has {lines}"
    return None


def verify_against(src: Path, copy: Path, src_id: str | None = None) -> str | None:
    """verify_copy with the source's current size, line count and header id (a hard link is the source)."""
    if same_file(src, copy):
        return verify_copy(copy, lines=None, size=None, src_id=src_id)
    try:
        size = src.stat().st_size
    except OSError as e:
        return f"source unreadable ({e.strerror})"
    return verify_copy(copy, lines=count_lines(src), size=size,
                       src_id=src_id if src_id is not None else header_id(src))


@contextlib.contextmanager
def _staged(src: Path, dst: Path):
    """A temp name beside `dst` (any leftover of an earlier attempt removed first) for the archive to be built
    and checked under; it is always removed afterwards, and an OSError becomes one WriteError."""
    tmp = dst.with_name(f".{dst.name}.occd-tmp")
    if dst.parent.name == ARCHIVE_DIR:
        safe_archive_dir(dst.parent)
    no_symlink(dst, "file")
    try:
        dst.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.unlink(missing_ok=True)
        yield tmp
    except OSError as e:
        raise WriteError(f"Failed to archive {src.name} to {dst.parent}",
                         f"check disk space and permissions ({e.strerror or e}); the session was not changed") from None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass


def copy_verified(src: Path, dst: Path, src_id: str | None = None) -> list[int]:
    """Copy src to dst through a temp file (counting the source's lines on the way), verify the copy (read
    back: size, line count, first/last line, header id) before it takes dst's name; fsync file and folder.
    Returns the source's [size, mtime_ns, inode] the verified copy matches. On any failure (disk full, short
    copy, source changed while copying) the temp file is removed and OccdError raised; src is never touched."""
    from occd.transcript.rewrite import fsync_dir

    with _staged(src, dst) as tmp:
        with open(src, "rb") as fin:
            before = os.fstat(fin.fileno())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            try:
                off = 0
                while off < before.st_size:
                    n = _copy_range(fin.fileno(), fd, off, min(1 << 30, before.st_size - off))
                    if n <= 0:
                        break
                    off += n
                os.fsync(fd)
            finally:
                os.close(fd)
            lines = 0
            while chunk := fin.read(1 << 22):  # the source's line count, from the page cache just read
                lines += chunk.count(b"\n")
        os.chmod(tmp, before.st_mode & 0o7777)
        after = src.stat()
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
            raise BusyError(f"Session '{src.stem}' changed while it was being archived",
                            "nothing was lost; it is retried when the agent is idle")
        problem = verify_copy(tmp, lines=lines, size=after.st_size, src_id=src_id)
        if problem:
            raise OccdError(f"The archive copy of {src.name} is incomplete: {problem}",
                            "check free disk space; the session was not changed", code="ARCHIVE_FAILED")
        os.replace(tmp, dst)
        fsync_dir(dst.parent)
        return [after.st_size, after.st_mtime_ns, after.st_ino]


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def archive_file(src: Path, dst: Path, src_id: str | None = None) -> tuple[list[int], str]:
    """Give the transcript its archive name: a hard link when the archive folder is on the same filesystem (the
    same bytes by construction, O(1), no extra disk space, so a full disk cannot stop it), else a verified copy
    (copy_verified). The link is made under a temp name, checked (same inode, header id, size, last line) and
    renamed into place. Returns (the source's [size, mtime_ns, inode] the archive matches, "link"|"copy")."""
    from occd.transcript.rewrite import fsync_dir

    with _staged(src, dst) as tmp:
        try:
            _link(src, tmp)
        except OSError:
            return copy_verified(src, dst, src_id), "copy"
        st = src.stat()
        problem = None if same_file(src, tmp) else "not the same file"
        problem = problem or verify_copy(tmp, lines=None, size=st.st_size, src_id=src_id)
        if problem:
            raise OccdError(f"The archive of {src.name} is not complete: {problem}", "the session was not changed",
                            code="ARCHIVE_FAILED")
        os.replace(tmp, dst)
        fsync_dir(dst.parent)
        return [st.st_size, st.st_mtime_ns, st.st_ino], "link"


def _link(src: Path, dst: Path) -> None:
    os.link(src, dst)  # tests make it fail to exercise the copy (another filesystem, no hard links)


def archive_path_for(transcript: Path) -> Path:
    """`sessions/archive/<name>`, or `<stem>.<n>.jsonl` when that name is taken (never overwrites)."""
    d = transcript.parent / ARCHIVE_DIR
    no_symlink(d)
    p = d / transcript.name
    n = 1
    while os.path.lexists(p):
        p = d / f"{transcript.stem}.{n}{transcript.suffix}"
        n += 1
    return p
