"""Streaming scan of a transcript file into compact metadata (see occd.transcript.model).

The file is read once, line by line in binary; each line is parsed once with orjson and reduced to an
`EntryMeta`; the parsed dict is dropped right away. Lines OpenClaw would skip are recorded in
`Transcript.malformed` with their 1-based line number (never an exception). Old versions are migrated in
memory the way OpenClaw's loader does it (v1: ids assigned and chained in file order, `firstKeptEntryIndex`
mapped to an id; v2: role `hookMessage` read as `custom`).
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import IO, Iterator


from occd.errors import NotFoundError, ParseError
from occd.transcript.entries import as_ref, entry_from_obj, fill_message, v1_id
from occd.transcript.model import REF_TYPES, EntryMeta, Malformed, Transcript, gc_paused
from occd.transcript import jsontext

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20


def iter_lines(fh: IO[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | None, int, bool]]:
    """Yield (offset, line bytes without the newline or None if longer than max_line_bytes, length including
    the newline, ends_with_newline). Memory stays bounded by max_line_bytes."""
    offset = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        if raw.endswith(b"\n"):
            yield offset, raw[:-1], len(raw), True
            offset += len(raw)
            continue
        if len(raw) <= max_line_bytes:  # last line, no newline
            yield offset, raw, len(raw), False
            offset += len(raw)
            continue
        # a line over the limit: skip the rest of it without keeping it
        length = len(raw)
        nl = False
        while True:
            more = fh.readline(_CHUNK)
            if not more:
                break
            length += len(more)
            if more.endswith(b"\n"):
                nl = True
                break
        yield offset, None, length, nl
        offset += length



def scan(path: str | os.PathLike, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
         check_cycles: bool = True, prepare_strip: bool = True, src: IO[bytes] | None = None) -> Transcript:
    """Read a transcript once, streaming, into a Transcript (compact metadata only).

    Raises NotFoundError when the file does not exist, ParseError on a parent cycle (OpenClaw would loop
    forever on it). Everything else that is wrong with lines is recorded in `malformed`.
    prepare_strip: keep, for each assistant message with tool calls and other content, its line as removing
    the tool calls leaves it (EntryMeta.stripped; small: the text blocks), so an edit's rewrite need not
    parse those lines again. Read-only callers can turn it off.
    """
    p = Path(path)
    own = src is None
    fh = open_transcript(p) if own else src
    try:
        with gc_paused():
            fh.seek(0)
            st = os.fstat(fh.fileno())
            t = scan_stream(fh, path=p, max_line_bytes=max_line_bytes, prepare_strip=prepare_strip)
            t.stat = (st.st_size, st.st_mtime_ns, st.st_ino)
            if check_cycles:
                t.check_cycles()
    finally:
        if own:
            fh.close()
    return t


def open_transcript(path: str | os.PathLike, *, follow_symlinks: bool = True) -> IO[bytes]:
    """Open a transcript for reading without ever blocking: O_NONBLOCK (a FIFO or device named like a
    transcript cannot hang the open), then fstat: only a regular file is accepted (the check is made on the
    opened file itself, so nothing can be swapped in between). follow_symlinks=False refuses a symbolic link
    (O_NOFOLLOW), for the paths occd writes. The returned file is blocking again and buffered."""
    import stat as _stat

    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise NotFoundError(f"Transcript not found: {p}", "run `occd list`") from None
    except IsADirectoryError:
        raise ParseError(f"{p} is a directory, not a session file", "name a transcript (.jsonl) file") from None
    except OSError as exc:
        if not follow_symlinks and exc.errno == 40:  # ELOOP: the last component is a symlink
            raise ParseError(f"{p} is a symbolic link", "occd only changes a transcript that is a regular file; "
                             "point the session at the real file") from None
        raise ParseError(f"Failed to read session file {p}", exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            kind = "a directory" if _stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ParseError(f"{p} is {kind}, not a session file", "occd only reads regular transcript files")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=_CHUNK)
    except BaseException:
        os.close(fd)
        raise


def scan_stream(fh: IO[bytes], *, path: Path | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                prepare_strip: bool = False) -> Transcript:
    header: dict | None = None
    header_length = 0
    header_offset = 0
    header_ok = False
    version = 3
    entries: list[EntryMeta] = []
    malformed: list[Malformed] = []
    extra_sessions: list[int] = []
    size = 0
    pos = 0  # parsed objects so far
    missing_nl = False
    line = -1
    loads = jsontext.loads
    v1_pending: list[tuple[EntryMeta, int]] = []  # (compaction entry, firstKeptEntryIndex)
    shared: tuple[dict, dict] = ({}, {})  # interned index and flag tuples (see fill_message)
    refs: list[EntryMeta] = []  # entries that reference other entries besides their parent
    readline = fh.readline
    offset = 0
    line = -1
    cap = max_line_bytes + 1
    while True:
        # inline line loop (no generator, no copy: orjson takes the line with its newline)
        raw = readline(cap)
        if not raw:
            break
        line += 1
        length = len(raw)
        if length == cap and raw[-1] != 10:  # longer than allowed: skip the rest of it without keeping it
            while True:
                more = readline(_CHUNK)
                if not more:
                    break
                length += len(more)
                if more[-1] == 10:
                    break
            malformed.append(Malformed(line + 1, "too-long", offset, length))
            offset += length
            continue
        start = offset
        offset += length
        if length <= 2 and not raw.strip():
            continue
        try:
            o = loads(raw)
        except ValueError:
            if not raw.strip():
                continue  # a blank line: OpenClaw skips it
            try:
                raw.decode("utf-8")
                kind = "invalid-json" if raw[-1] == 10 else "torn"
            except UnicodeDecodeError:
                kind = "non-utf8"
            malformed.append(Malformed(line + 1, kind, start, length))
            continue
        if type(o) is not dict:  # orjson makes plain dicts
            malformed.append(Malformed(line + 1, "not-object", start, length))
            continue
        if raw[-1] != 10:  # only the last line can end without one
            missing_nl = True
        if pos == 0:
            pos = 1
            if o.get("type") == "session":
                header = o
                header_length = length
                header_offset = start
                header_ok = isinstance(o.get("id"), str)
                v = o.get("version", 1)
                version = int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 1
                if line != 0:
                    header_ok = False  # something unparseable came before it: not the first line
                continue
            header_ok = False
            version = 3
        etype = o.get("type")
        if etype == "message":  # the common case, inline (entry_from_obj does the same for every type)
            e = EntryMeta(line, start, length, pos, etype, o.get("id"), o.get("parentId"))
            msg = o.get("message")
            if type(msg) is dict:
                fill_message(e, msg, version, shared, o if prepare_strip else None)
        elif etype == "session":
            extra_sessions.append(line + 1)
            pos += 1
            continue
        else:
            e = entry_from_obj(o, line, start, length, pos, version, shared, prepare_strip)
            if e.type in REF_TYPES:
                refs.append(e)
        if version < 2 and e.type == "compaction":
            idx = o.get("firstKeptEntryIndex")
            e.first_kept = None
            if isinstance(idx, int) and not isinstance(idx, bool):
                v1_pending.append((e, idx))
        entries.append(e)
        pos += 1
        del o
    size = offset
    t = Transcript(path=path, header=header, header_length=header_length, version=version, entries=entries,
                   malformed=malformed, size=size, stat=None, missing_final_newline=missing_nl,
                   header_ok=header_ok, extra_sessions=extra_sessions, lines=line + 1,
                   header_offset=header_offset)
    if version < 2:
        _migrate_v1(t, v1_pending)
    t.by_id, t.duplicate_ids, pidx = _index(entries)
    if pidx is not None:
        # every parentId names an earlier line (ids unique): following parents always goes up the file, so no
        # chain can loop and the full cycle check has nothing to find; the parent indices are final
        t._acyclic = True
        t.parent_index = pidx
    t._refs = refs
    return t


def _index(entries: list[EntryMeta]) -> tuple[dict, list, array | None]:
    """(by_id: id -> entry index, a later duplicate winning; the duplicate ids, each repeat once; the parent
    index of every entry (-1: none) when ids are unique and every parentId names an EARLIER entry, else None).

    Built after the loop in comprehensions (cheaper than per-line bookkeeping). An id or parentId that is a JSON
    array or object is replaced first by a stand-in that names nothing (entries._not_an_id), as in OpenClaw's
    Map."""
    try:
        by_id = {e.id: i for i, e in enumerate(entries)}
    except TypeError:
        for e in entries:
            e.id = as_ref(e.id, e.line, "id")
        by_id = {e.id: i for i, e in enumerate(entries)}
    get = by_id.get
    try:
        parents = [-1 if e.parent is None else get(e.parent, -2) for e in entries]  # -2: names no entry
    except TypeError:
        for e in entries:
            e.parent = as_ref(e.parent, e.line, "parentId")
        parents = [-1 if e.parent is None else get(e.parent, -2) for e in entries]
    if len(by_id) != len(entries):
        seen: set = set()
        dups = [e.id for e in entries if e.id in seen or seen.add(e.id)]
        return by_id, dups, None
    if -2 in parents or any(p >= i for i, p in enumerate(parents)):
        return by_id, [], None
    return by_id, [], array("l", parents)


def _migrate_v1(t: Transcript, pending: list[tuple[EntryMeta, int]]) -> None:
    """OpenClaw's migrateV1ToV2, in memory: every entry gets an id, chained in file order."""
    taken: set = set()
    sid = t.session_id or ""
    prev = None
    by_pos: dict[int, EntryMeta] = {}
    for e in t.entries:
        e.id = v1_id(sid, e.pos, taken)
        e.parent = prev
        prev = e.id
        by_pos[e.pos] = e
    for comp, idx in pending:
        target = by_pos.get(idx)  # index into the parsed objects, header = 0
        if target is not None:
            comp.first_kept = target.id
