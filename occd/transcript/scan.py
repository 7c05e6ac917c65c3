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
from occd.transcript.compaction import provider_checkpoint
from occd.transcript.limits import MAX_CHARS, MAX_LINES, dumps_compact, json_text_len, jslen, text_within_limit
from occd.transcript.model import CURRENT_VERSION, REF_TYPES, EntryMeta, Malformed, Transcript, gc_paused
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


def _not_an_id(line: int, field: str) -> tuple:
    """Stands in for an id/reference that is a JSON array or object: hashable, equal to no JSON value and to no
    other stand-in (so it names no entry, as such a value names none in OpenClaw's Map), never written back
    (the line is)."""
    return ("not-an-id", line + 1, field)


_NOT_A_CALL_ID = ("not-an-id", 0, "toolCall.id")


def _ref(v, line: int, field: str):
    """An id or reference as read: itself when it is a JSON scalar (hashable), else its stand-in."""
    return v if v is None or type(v) in (str, int, float, bool) else _not_an_id(line, field)


def _v1_id(session_id: str, pos: int, taken: set) -> str:
    """Deterministic 8-hex ids for v1 entries (OpenClaw uses random ones; any unique 8-hex id is valid)."""
    import hashlib  # here: only v1 files need it (keeps the scan's import light)

    n = 0
    while True:
        h = hashlib.blake2b(f"{session_id}:{pos}:{n}".encode(), digest_size=4).hexdigest()
        if h not in taken:
            taken.add(h)
            return h
        n += 1


def _usage_tokens(u) -> int | None:
    if not isinstance(u, dict):
        return None
    tt = u.get("totalTokens")
    if isinstance(tt, (int, float)) and tt:
        return int(tt)
    total = 0
    for k in ("input", "output", "cacheRead", "cacheWrite"):
        v = u.get(k)
        if isinstance(v, (int, float)):
            total += v
    # all zeros is not a measurement: OpenClaw's mirror replies (provider "openclaw", model "delivery-mirror" /
    # "gateway-injected") and its overflow notice carry such usage; the context measure skips them, as
    # OpenClaw's own statistics do
    return int(total) if total > 0 else None


def _content_facts(e: EntryMeta, content, *, count_images_est: bool) -> int:
    """Fill has_text / images / n_blocks from a string-or-blocks content; return text chars for the estimate."""
    chars = 0
    if isinstance(content, str):
        e.has_text = e.has_text or bool(content)
        return jslen(content)
    if isinstance(content, list):
        e.n_blocks = len(content)
        for b in content:
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "text":
                t = b.get("text")
                if isinstance(t, str) and t:
                    e.has_text = True
                    chars += jslen(t)
            elif bt == "image":
                e.images += 1
                if count_images_est:
                    chars += 4800
    return chars


def _ceil4(n: int) -> int:
    return -(-n // 4)


def _fill_message(e: EntryMeta, msg: dict, version: int, shared: tuple[dict, dict], root: dict | None = None) -> None:
    """Fill the message facts of `e`. root: the parsed line, when the stripped form of an assistant message
    with tool calls is to be prepared (EntryMeta.stripped)."""
    role = msg.get("role")
    if role == "hookMessage" and version < 3:
        role = "custom"
    if not isinstance(role, str):
        return
    e.role = role
    content = msg.get("content")
    if role == "assistant":
        e.replay = provider_checkpoint(msg)
        stop = msg.get("stopReason")
        e.stop_reason = stop
        chars = 0
        if type(content) is list:
            e.n_blocks = len(content)
            call_ids = call_blocks = call_trunc = thinking = None
            has_text = False
            kept = []  # the blocks removing the tool calls leaves (not toolCall, not thinking), in order
            for i, b in enumerate(content):
                if type(b) is not dict:
                    kept.append(b)
                    continue
                bt = b.get("type")
                if bt == "text":
                    kept.append(b)
                    t = b.get("text")
                    if type(t) is str and t:
                        has_text = True
                        chars += len(t) if t.isascii() else jslen(t)
                elif bt == "toolCall":
                    if call_ids is None:
                        call_ids, call_blocks, call_trunc = [], [], []
                    cid = b.get("id")
                    if cid is not None and type(cid) is not str and type(cid) is not int:
                        cid = _NOT_A_CALL_ID  # an array or object: matches no toolCallId (those are strings)
                    call_ids.append(cid)
                    call_blocks.append(i)
                    name = b.get("name")
                    if type(name) is str:
                        chars += len(name)
                    n = json_text_len(b.get("arguments"))
                    chars += n
                    call_trunc.append(n > MAX_CHARS)
                elif bt == "thinking":
                    if thinking is None:
                        thinking = []
                    thinking.append(i)
                    if b.get("thinkingSignature") or b.get("redacted"):
                        e.signed_thinking += 1
                    t = b.get("thinking")
                    if type(t) is str:
                        chars += len(t) if t.isascii() else jslen(t)
                else:
                    kept.append(b)
                    if bt == "image":
                        e.images += 1
            if has_text:
                e.has_text = True
            # the index/flag tuples repeat from message to message: one shared copy each (fewer objects to
            # allocate, keep and have the garbage collector walk). Index tuples and flag tuples live in separate
            # tables: (1,) == (True,), and a block index must stay an int.
            idx, flags = shared
            if call_ids is not None:
                e.call_ids = tuple(call_ids)
                k = tuple(call_blocks)
                e.call_blocks = idx.setdefault(k, k)
                k = tuple(call_trunc)
                e.call_trunc = flags.setdefault(k, k)
                if root is not None and kept and version >= CURRENT_VERSION:
                    # the line as removing this message's tool calls leaves it (toolCall and thinking blocks
                    # dropped), serialized now from this parse so the rewrite need not parse the line again
                    msg["content"] = kept
                    e.stripped = dumps_compact(root) + b"\n"
                    msg["content"] = content
            if thinking is not None:
                k = tuple(thinking)
                e.thinking_blocks = idx.setdefault(k, k)
        if stop != "aborted" and stop != "error":
            u = msg.get("usage")
            if type(u) is dict:
                tt = u.get("totalTokens")
                e.usage_tokens = tt if type(tt) is int and tt > 0 else _usage_tokens(u)
        e.est_tokens = -(-chars // 4)
    elif role == "toolResult":
        tcid = msg.get("toolCallId")
        e.result_for = tcid if type(tcid) is str else None
        if type(content) is list and len(content) == 1 and type(b := content[0]) is dict \
                and b.get("type") == "text" and type(t := b.get("text")) is str:
            # one text block, the common case (the loop below gives the same for it)
            e.n_blocks = 1
            lt = len(t)
            if lt:
                e.has_text = True
                e.result_trunc = lt > MAX_CHARS or t.count("\n", 0, MAX_CHARS + 1) >= MAX_LINES
                e.est_tokens = -(-(lt if t.isascii() else jslen(t)) // 4)
        elif type(content) is list:
            e.n_blocks = len(content)
            chars = 0
            plen = 0  # code points, as the truncation rules count
            n_text = 0
            lines = 0
            images = 0
            for b in content:
                if type(b) is not dict:
                    continue
                bt = b.get("type")
                if bt == "text":
                    t = b.get("text")
                    if type(t) is str:
                        n_text += 1
                        if t:
                            e.has_text = True
                            lt = len(t)
                            plen += lt
                            chars += lt if t.isascii() else jslen(t)
                            lines += t.count("\n", 0, MAX_CHARS + 1)
                elif bt == "image":
                    images += 1
            e.images = images
            # within the limit when the texts joined by "\n" have <= 120 chars and < 2 newlines
            joined_len = plen + max(0, n_text - 1)
            e.result_trunc = images > 0 or joined_len > MAX_CHARS or lines + max(0, n_text - 1) >= MAX_LINES
            e.est_tokens = -(-(chars + 4800 * images) // 4)
        else:
            chars = _content_facts(e, content, count_images_est=True)
            e.result_trunc = isinstance(content, str) and not text_within_limit(content)
            e.est_tokens = -(-chars // 4)
    elif role == "user":
        if type(content) is str:  # the common case, inline (_content_facts does the same)
            if content:
                e.has_text = True
                e.est_tokens = -(-(len(content) if content.isascii() else jslen(content)) // 4)
        else:
            e.est_tokens = _ceil4(_content_facts(e, content, count_images_est=False))
    elif role == "custom":
        e.display = msg.get("display")
        e.est_tokens = _ceil4(_content_facts(e, content, count_images_est=True))
    elif role == "bashExecution":
        cmd, out = msg.get("command"), msg.get("output")
        e.has_text = bool(cmd or out)
        e.est_tokens = _ceil4((jslen(cmd) if isinstance(cmd, str) else 0) + (jslen(out) if isinstance(out, str) else 0))
    else:
        _content_facts(e, content, count_images_est=True)


def entry_from_obj(o: dict, line: int, offset: int, length: int, pos: int, version: int,
                   shared: tuple[dict, dict] | None = None, prepare_strip: bool = False) -> EntryMeta:
    """Reduce one parsed entry to its metadata (ids as in the file; v1 ids are assigned by the caller)."""
    etype = o.get("type")
    e = EntryMeta(line, offset, length, pos, etype if isinstance(etype, str) else None, o.get("id"), o.get("parentId"))
    if etype == "message":
        msg = o.get("message")
        if isinstance(msg, dict):
            _fill_message(e, msg, version, ({}, {}) if shared is None else shared, o if prepare_strip else None)
    elif etype == "compaction":
        e.first_kept = _ref(o.get("firstKeptEntryId"), line, "firstKeptEntryId")
        s = o.get("summary")
        e.est_tokens = _ceil4(jslen(s)) if isinstance(s, str) else 0
    elif etype == "branch_summary":
        e.from_id = _ref(o.get("fromId"), line, "fromId")
        s = o.get("summary")
        e.summary = bool(s)
        e.est_tokens = _ceil4(jslen(s)) if isinstance(s, str) else 0
    elif etype == "custom_message":
        e.role = "custom"
        e.display = o.get("display")
        e.est_tokens = _ceil4(_content_facts(e, o.get("content"), count_images_est=True))
    elif etype == "label":
        e.target_id = _ref(o.get("targetId"), line, "targetId")
    return e


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
    shared: tuple[dict, dict] = ({}, {})  # interned index and flag tuples (see _fill_message)
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
                _fill_message(e, msg, version, shared, o if prepare_strip else None)
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
    array or object is replaced first by a stand-in that names nothing (_not_an_id), as in OpenClaw's Map."""
    try:
        by_id = {e.id: i for i, e in enumerate(entries)}
    except TypeError:
        for e in entries:
            e.id = _ref(e.id, e.line, "id")
        by_id = {e.id: i for i, e in enumerate(entries)}
    get = by_id.get
    try:
        parents = [-1 if e.parent is None else get(e.parent, -2) for e in entries]  # -2: names no entry
    except TypeError:
        for e in entries:
            e.parent = _ref(e.parent, e.line, "parentId")
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
        e.id = _v1_id(sid, e.pos, taken)
        e.parent = prev
        prev = e.id
        by_pos[e.pos] = e
    for comp, idx in pending:
        target = by_pos.get(idx)  # index into the parsed objects, header = 0
        if target is not None:
            comp.first_kept = target.id
