"""Byte-preserving rewrite and atomic replace.

`rewrite` streams the source file again: runs of unchanged lines are copied byte-for-byte in large chunks,
removed lines are skipped, and only the lines with an edit are parsed and re-serialized (compact JSON, key
order kept, UTF-8 unescaped), except where the edit gives the new line without that: a line the scan prepared
(the strip plan's EntryEdit.base) or a new parentId spliced into the bytes (`splice_parent`). A v1/v2 file is written as v3 with the ids it was given in memory (OpenClaw's
own loader rewrites such files on open). The output always ends with a newline.

`atomic_write` puts the result in place: temp file in the same directory, fsync, rename, fsync the directory,
the original's mode kept, and a last check that the source did not change since it was read.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping

import orjson

from occd.errors import BusyError, WriteError
from occd.transcript.limits import dumps_compact
from occd.transcript.model import CURRENT_VERSION, Transcript, gc_paused
from occd.transcript import jsontext

EntryTransform = Callable[[dict], dict]
_CHUNK = 1 << 20


def serialize(obj) -> bytes:
    """One transcript line: compact JSON (orjson; json fallback for ints orjson cannot take) + newline."""
    return dumps_compact(obj) + b"\n"


# the first three members of an entry as OpenClaw (JSON.stringify) and occd write them: type, id, parentId; plain
# strings (no escapes) or null. Group 1 is the parentId value.
_ENTRY_PREFIX = re.compile(rb'\{"type":"[^"\\]*","id":(?:"[^"\\]*"|null),"parentId":("[^"\\]*"|null)[,}]')


_ESCAPE_U = re.compile(rb"\\u").search  # (twice as fast as `in` on text full of backslashes)


def splice_parent(raw: bytes, parent) -> bytes | None:
    """The line `raw` (one JSON object) with its top-level parentId set to `parent`, the other bytes kept as they
    are, without parsing it: when the line starts with `{"type":…,"id":…,"parentId":…` and `"parentId"` occurs
    nowhere else in it (so no duplicate key, no nested key of that name: the match is the member JSON.parse
    reads), and it holds no \\u escape (a touched line is written with non-ASCII text unescaped, which takes a
    re-serialization). None otherwise: the caller then parses and re-serializes the line. The result ends with
    a newline; for a line as OpenClaw (JSON.stringify) or orjson writes it, it is the bytes the re-serialization
    would give."""
    m = _ENTRY_PREFIX.match(raw)
    if m is None or raw.count(b'"parentId"') != 1 or _ESCAPE_U(raw) is not None:
        return None
    out = raw[:m.start(1)] + dumps_compact(parent) + raw[m.end(1):]
    return out if out[-1:] == b"\n" else out + b"\n"


def _copy_range(src: IO[bytes], out: IO[bytes], n: int) -> None:
    while n > 0:
        chunk = src.read(min(n, _CHUNK))
        if not chunk:
            raise OSError("source file shrank while it was being rewritten")
        out.write(chunk)
        n -= len(chunk)


def _migration_transform(t: Transcript):
    """Per-entry-line migration to v3 (None when the file is current). Uses the ids assigned by the scan."""
    if t.version >= CURRENT_VERSION:
        return None
    by_line = {e.line: e for e in t.entries}
    v1 = t.version < 2

    def migrate(line: int, obj: dict) -> dict:
        e = by_line.get(line)
        if e is None:
            return obj
        if v1:
            obj["id"] = e.id
            obj["parentId"] = e.parent
            if obj.get("type") == "compaction" and "firstKeptEntryIndex" in obj:
                if e.first_kept is not None:
                    obj["firstKeptEntryId"] = e.first_kept
                del obj["firstKeptEntryIndex"]
        if obj.get("type") == "message":
            msg = obj.get("message")
            if isinstance(msg, dict) and msg.get("role") == "hookMessage":
                msg["role"] = "custom"
        return obj

    return migrate


def _needs_migration_line(t: Transcript):
    if t.version >= CURRENT_VERSION:
        return set()
    if t.version < 2:
        return {e.line for e in t.entries}
    return {e.line for e in t.entries if e.type == "message" and e.role == "custom"}


def migrated_header(t: Transcript) -> dict | None:
    if t.header is None or t.version >= CURRENT_VERSION:
        return None
    h = dict(t.header)
    h["version"] = CURRENT_VERSION
    return h


def clone_header(t: Transcript, new_session_id: str, *, parent_session: str | None = None,
                 now: datetime | None = None) -> dict:
    """The header of a clone: the source's header with a new id, a fresh timestamp, version 3 and
    `parentSession` (the source path, or its id when no path is known)."""
    now = now or datetime.now(timezone.utc)
    h = dict(t.header or {"type": "session"})
    h["type"] = "session"
    h["version"] = CURRENT_VERSION
    h["id"] = new_session_id
    h["timestamp"] = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    h["parentSession"] = parent_session if parent_session is not None else (str(t.path) if t.path else t.session_id)
    return h


def rewrite(t: Transcript, out: IO[bytes], *, remove: Iterable[int] = (),
            edits: Mapping[int, EntryTransform] | None = None, header: dict | None = None,
            drop_malformed: bool = False, src: IO[bytes] | None = None) -> int:
    """Write the transcript `t` to `out` with entries removed/changed. Returns the number of bytes written.

    remove: physical line indices (EntryMeta.line) to drop. edits: line index -> function taking the parsed
    entry dict and returning the new one. header: a replacement header (clone); a v1/v2 file gets a v3
    header and migrated entries. drop_malformed: leave malformed lines out (otherwise copied as they are).
    """
    with gc_paused():
        return _rewrite(t, out, remove=remove, edits=edits, header=header, drop_malformed=drop_malformed, src=src)


_SKIP, _EDIT, _HEADER = 0, 1, 2


def _rewrite(t: Transcript, out: IO[bytes], *, remove, edits, header, drop_malformed, src) -> int:
    if edits is None:
        edits = {}
    edit_lines = set(edits)  # membership without calling into a Mapping per entry
    removed = remove if isinstance(remove, (set, frozenset)) else set(remove)
    migrate = _migration_transform(t)
    if header is None:
        header = migrated_header(t)
    mig_lines = _needs_migration_line(t)
    # (offset, length, line, action) for every line that is not copied as it is, in file order
    acts: list[tuple[int, int, int, int]] = []
    if header is not None and t.header is not None:
        acts.append((t.header_offset, t.header_length, -1, _HEADER))
    if removed or edit_lines or mig_lines:
        append = acts.append
        for e in t.entries:
            ln = e.line
            if ln in removed:
                append((e.offset, e.length, ln, _SKIP))
            elif ln in edit_lines or ln in mig_lines:
                append((e.offset, e.length, ln, _EDIT))
    if drop_malformed:
        for m in t.malformed:
            acts.append((m.offset, m.length, m.lineno - 1, _SKIP))
    acts.sort()
    written = 0
    own = src is None
    fh = open(t.path, "rb", buffering=_CHUNK) if own else src  # type: ignore[arg-type]
    try:
        size = t.size
        fh.seek(0)
        read = fh.read
        write = out.write
        loads = jsontext.loads
        get_edit = edits.get
        # an edit mapping may already hold some new lines (the strip plan's prepared ones); they are made for the
        # current format, so only when no migration is applied on the way
        prepared = getattr(edits, "prepared", None) if migrate is None else None
        pos = 0   # next source byte to deal with; the file is read strictly forward from here
        for offset, length, line, action in acts:
            gap = offset - pos
            if gap > 0:  # unchanged lines before this one: copied as they are
                if gap <= _CHUNK:
                    chunk = read(gap)
                    if len(chunk) != gap:
                        raise OSError("source file shrank while it was being rewritten")
                    write(chunk)
                else:
                    _copy_range(fh, out, gap)
                written += gap
            pos = offset + length
            if action == _SKIP:
                fh.seek(length, 1)
                continue
            raw = read(length)
            if len(raw) != length:
                raise OSError("source file shrank while it was being rewritten")
            if action == _HEADER:
                data = serialize(header)
            elif prepared is not None and (data := prepared(line, raw)) is not None:
                pass  # a line the edit makes without parsing this one (prepared by the scan, or spliced)
            else:
                obj = loads(raw)
                if migrate is not None:
                    obj = migrate(line, obj)
                fn = get_edit(line)
                if fn is not None:
                    obj = fn(obj)
                data = serialize(obj)
            write(data)
            written += len(data)
        last_nl = True
        if size > pos:
            _copy_range(fh, out, size - pos - 1)
            last = read(1)
            if len(last) != 1:
                raise OSError("source file shrank while it was being rewritten")
            write(last)
            written += size - pos
            last_nl = last == b"\n"
        if not last_nl:
            write(b"\n")
            written += 1
    finally:
        if own:
            fh.close()
    return written


def atomic_write(path: str | os.PathLike, write_fn: Callable[[IO[bytes]], object], *, mode: int | None = None,
                 expect_stat: tuple[int, int, int] | None = None, source: str | os.PathLike | None = None,
                 validate: Callable[[Path], None] | None = None, guard: Callable[[], None] | None = None):
    """Write `path` atomically: `write_fn(fh)` fills a temp file in the same directory, which is fsync'ed and
    renamed over `path`; then the directory is fsync'ed. Returns what write_fn returned.

    mode: the file mode (default: the existing file's mode, else 0600). expect_stat: (size, mtime_ns, inode)
    of `source` (default: `path`) when it was read; if it differs right before the rename, the temp file is
    deleted and BusyError is raised. validate(temp_path) may raise to abort (temp removed, original kept).
    guard() runs last, right before the rename (after the stat check), and may raise to abort the same way:
    the callers check there that no OpenClaw run took the session meanwhile.
    Any OSError becomes WriteError; the original is never touched then. Temp files that crashed writers left
    in the directory are removed first (clean_stale_temps).
    """
    import tempfile  # here: the scan/plan/rewrite path does not need it (import time)

    path = Path(path)
    src = Path(source) if source is not None else path
    tmp_name = None
    try:
        if mode is None:
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o600
        clean_stale_temps(path.parent)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            result = write_fn(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, mode)
        if validate is not None:
            validate(Path(tmp_name))
        if expect_stat is not None:
            try:
                st = os.stat(src)
                now = (st.st_size, st.st_mtime_ns, st.st_ino)
            except FileNotFoundError:
                now = None
            if now != tuple(expect_stat):
                raise BusyError(f"Session '{src.stem}' is in use",
                                "the transcript changed while occd was working on it; try again when the agent is idle")
        if guard is not None:
            guard()
        os.replace(tmp_name, path)
        tmp_name = None
        fsync_dir(path.parent)
        return result
    except OSError as exc:
        raise WriteError(f"Failed to write {path}", f"check disk space and permissions ({exc.strerror or exc})") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


TEMP_SUFFIX = ".occd-tmp"
STALE_TEMP_S = 600.0
# `.<file>.<pid>.<random>.occd-tmp` (atomic_write) and `.<file>.occd-tmp` (archive staging, older occd)
_TEMP_RE = re.compile(r"^\..+?(?:\.(?P<pid>\d+)\.[A-Za-z0-9_]+)?\.occd-tmp$")
# occd's own sessions.json temp files (occd.openclaw.filestore.write_index_atomic): `.sessions.json.<pid>.<random>.tmp`,
# `.sessions.json.<random>.tmp` from an older occd. OpenClaw's own temp names have no leading dot: never touched.
_INDEX_TEMP_RE = re.compile(r"^\.sessions\.json\.(?:(?P<pid>\d+)\.)?[A-Za-z0-9_]+\.tmp$")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return pid > 0


def clean_stale_temps(d: Path, *, now: float | None = None, max_age: float = STALE_TEMP_S) -> list[Path]:
    """Remove occd's temp files that a crashed write left in `d`: not written to for `max_age` seconds and with
    no live owner (the pid in the name is gone, or the name has none: an older occd's). A temp file being
    written is fresh, and the writer's pid is alive. Never raises; returns what was removed."""
    import time

    now = time.time() if now is None else now
    removed = []
    try:
        names = [n for n in os.listdir(d) if n.endswith(TEMP_SUFFIX) or n.startswith(".sessions.json.")]
    except OSError:
        return removed
    for name in names:
        m = _TEMP_RE.match(name) or _INDEX_TEMP_RE.match(name)
        if m is None:
            continue
        p = Path(d) / name
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if now - st.st_mtime < max_age:
            continue
        pid = m.group("pid")
        if pid is not None and _pid_alive(int(pid)):
            continue
        try:
            os.unlink(p)
            removed.append(p)
        except OSError:
            pass
    return removed


def fsync_dir(d: Path) -> None:
    """fsync a directory so a rename in it is durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
