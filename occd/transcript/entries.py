"""One transcript entry, parsed, reduced to its metadata (EntryMeta): ids and references as read (a JSON array or
object standing in as an id names no entry, as in OpenClaw's Map), message facts (role, tool calls and results,
usage, sizes, the token estimate), v1 ids. Split out of occd/transcript/scan.py (issue 25), unchanged but for
the names scan.py now imports (fill_message, as_ref, v1_id: no longer private)."""

from __future__ import annotations

from occd.transcript.compaction import provider_checkpoint
from occd.transcript.limits import MAX_CHARS, MAX_LINES, dumps_compact, json_text_len, jslen, text_within_limit
from occd.transcript.model import CURRENT_VERSION, EntryMeta


def _not_an_id(line: int, field: str) -> tuple:
    """Stands in for an id/reference that is a JSON array or object: hashable, equal to no JSON value and to no
    other stand-in (so it names no entry, as such a value names none in OpenClaw's Map), never written back
    (the line is)."""
    return ("not-an-id", line + 1, field)


_NOT_A_CALL_ID = ("not-an-id", 0, "toolCall.id")


def as_ref(v, line: int, field: str):
    """An id or reference as read: itself when it is a JSON scalar (hashable), else its stand-in."""
    return v if v is None or type(v) in (str, int, float, bool) else _not_an_id(line, field)


def v1_id(session_id: str, pos: int, taken: set) -> str:
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


def fill_message(e: EntryMeta, msg: dict, version: int, shared: tuple[dict, dict], root: dict | None = None) -> None:
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
            fill_message(e, msg, version, ({}, {}) if shared is None else shared, o if prepare_strip else None)
    elif etype == "compaction":
        e.first_kept = as_ref(o.get("firstKeptEntryId"), line, "firstKeptEntryId")
        s = o.get("summary")
        e.est_tokens = _ceil4(jslen(s)) if isinstance(s, str) else 0
    elif etype == "branch_summary":
        e.from_id = as_ref(o.get("fromId"), line, "fromId")
        s = o.get("summary")
        e.summary = bool(s)
        e.est_tokens = _ceil4(jslen(s)) if isinstance(s, str) else 0
    elif etype == "custom_message":
        e.role = "custom"
        e.display = o.get("display")
        e.est_tokens = _ceil4(_content_facts(e, o.get("content"), count_images_est=True))
    elif etype == "label":
        e.target_id = as_ref(o.get("targetId"), line, "targetId")
    return e
