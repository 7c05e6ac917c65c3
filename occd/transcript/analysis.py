"""What is in a transcript (`occd info`), its context size, and cheap measures for `occd list` and the daemon.

Context tokens follow OpenClaw's own measure (estimateContextTokens): the usage of the latest assistant message
the model is sent that did not end in error/abort (`totalTokens`, or input+output+cacheRead+cacheWrite), plus a
chars/4 estimate of the messages after it. Without any usage: a chars/4 estimate of everything sent, labelled
"estimate".
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from occd.transcript.jsonl import iter_objects
from occd.transcript.model import Transcript
from occd.transcript.scan import entry_from_obj
from occd.transcript import jsontext


def context_tokens(t: Transcript) -> dict:
    """{"tokens": int, "source": "usage"|"estimate"|"empty", "usageTokens", "trailingTokens"}."""
    if t.empty:
        return {"tokens": 0, "source": "empty", "usageTokens": 0, "trailingTokens": 0}
    sent = t.sent_entries()
    last = None
    for i in range(len(sent) - 1, -1, -1):
        e = sent[i]
        if e.type == "message" and e.role == "assistant" and e.usage_tokens is not None:
            last = i
            break
    if last is None:
        est = sum(e.est_tokens for e in sent)
        return {"tokens": est, "source": "estimate", "usageTokens": 0, "trailingTokens": est}
    usage = sent[last].usage_tokens or 0
    trailing = sum(e.est_tokens for e in sent[last + 1:])
    return {"tokens": usage + trailing, "source": "usage", "usageTokens": usage, "trailingTokens": trailing}


def estimated_tokens(t: Transcript) -> int:
    """chars/4 estimate of everything the model would be sent (used for "estimated after cleaning")."""
    return sum(e.est_tokens for e in t.sent_entries())


def analyze(t: Transcript) -> dict:
    """The analysis `occd info` shows. Counts of messages are over the whole file unless named *Active*."""
    roles: dict[str, int] = {}
    tool_calls = tool_results = thinking = signed = images = compactions = labels = customs = 0
    custom_messages = branch_summaries = session_infos = model_changes = 0
    unknown: dict[str, int] = {}
    children: dict = {}
    for e in t.entries:
        if e.type == "message":
            r = e.role or "unknown"
            roles[r] = roles.get(r, 0) + 1
            tool_calls += len(e.call_ids)
            if e.role == "toolResult":
                tool_results += 1
            thinking += len(e.thinking_blocks)
            signed += e.signed_thinking
            images += e.images
            compactions += e.replay is not None  # a provider checkpoint (occd.transcript.compaction)
        elif e.type == "compaction":
            compactions += 1
        elif e.type == "label":
            labels += 1
        elif e.type == "custom":
            customs += 1
        elif e.type == "custom_message":
            custom_messages += 1
            images += e.images
        elif e.type == "branch_summary":
            branch_summaries += 1
        elif e.type == "session_info":
            session_infos += 1
        elif e.type in ("model_change", "thinking_level_change"):
            model_changes += e.type == "model_change"
        else:
            unknown[str(e.type)] = unknown.get(str(e.type), 0) + 1
        children[e.parent] = children.get(e.parent, 0) + 1
    branches = sum(1 for k, n in children.items() if k is not None and n > 1)
    path = t.active_path()
    turns = t.turns(path)
    active_msgs = sum(1 for e in path if e.type == "message")
    sent = t.sent_entries(path)
    orphans, unanswered = tool_pairing(t, sent)
    broken = t.broken_parent(path)
    out = {
        "empty": t.empty,
        "version": t.version if t.header_ok else None,  # no header: OpenClaw sees a new, empty session
        "sessionId": t.session_id,
        "fileSize": t.size,
        "entries": len(t.entries),
        "messages": sum(roles.values()),
        "messagesByRole": roles,
        "activePathEntries": len(path),
        "messagesActive": active_msgs,
        "messagesSent": len(sent),
        "toolCalls": tool_calls,
        "toolResults": tool_results,
        "thinkingBlocks": thinking,
        "signedThinkingBlocks": signed,
        "images": images,
        "compactions": compactions,
        "branches": branches,
        "branchSummaries": branch_summaries,
        "labels": labels,
        "customEntries": customs,
        "customMessages": custom_messages,
        "sessionInfo": session_infos,
        "unknownEntryTypes": unknown,
        "turns": len(turns),
        "turnsWithTools": sum(1 for x in turns if x.has_tools),
        "malformedLines": [m.to_json() for m in t.malformed],
        "missingFinalNewline": t.missing_final_newline,
        "headerValid": t.header_ok,
        "duplicateIds": len(t.duplicate_ids),
        "brokenParentLine": broken.lineno if broken else None,
        "orphanResults": len(orphans),
        "unansweredCalls": len(unanswered),
        "contextTokens": context_tokens(t),
    }
    out["openCall"] = open_tail(path, sent)
    out["warnings"] = warnings(t, out)
    return out


def open_tail(path, sent=None) -> str | None:
    """How the active path ends mid-run, if it does: "call" (the last tool call has no result and no user message
    came after it) or "result" (the last entry is a tool result the model has not answered). A live run, or a
    run that crashed (OpenClaw patches the unanswered call on the next turn): the lock and the file's age say
    which (occd.report.inspect)."""
    if path and path[-1].type == "message" and path[-1].role == "toolResult":
        return "result"
    answered: set = set()
    for e in reversed(path):
        if e.type == "message" and e.role == "user":
            return None
        if e.result_for is not None:
            answered.add(e.result_for)
        if e.call_ids:
            return "call" if any(c not in answered for c in e.call_ids) else None
    return None


def warnings(t: Transcript, a: dict) -> list[dict]:
    """What a person should know about the file's shape ({code, message}); `occd info` shows them."""
    out: list[dict] = []

    def w(code: str, message: str) -> None:
        out.append({"code": code, "message": message})

    if t.empty:
        return out
    if not t.header_ok:
        w("no-header", "the first line is not a session header: OpenClaw treats this file as a new, empty session "
          "(none of its entries are loaded); `occd edit` refuses it")
    elif t.version < 3:
        w("old-format", f"format version {t.version}" + (" (entries have no ids)" if t.version < 2 else "")
          + ": OpenClaw migrates it to version 3 when it opens it; `occd edit` writes version 3")
    if a.get("orphanResults"):
        w("orphan-results", f"{a['orphanResults']} tool result(s) with no call before them on the active path "
          "(providers reject such a request; `occd edit` removes those in the turns it strips)")
    if a.get("brokenParentLine"):
        w("broken-parent", f"line {a['brokenParentLine']}: its parentId names no entry, so OpenClaw loses the "
          "history before it")
    if a.get("duplicateIds"):
        w("duplicate-ids", f"{a['duplicateIds']} duplicate entry id(s)")
    if t.extra_sessions:
        w("extra-headers", f"{len(t.extra_sessions)} further session header line(s) (ignored by OpenClaw)")
    return out


def tool_pairing(t: Transcript, seq=None):
    """On a sequence of entries (default: what is sent): (orphan results, calls without a result).
    A result pairs with the latest earlier call of that id that is still open."""
    seq = t.sent_entries() if seq is None else seq
    open_calls: dict = {}
    orphans = []
    for e in seq:
        for cid in e.call_ids:
            open_calls[cid] = e
        if e.result_for is not None or (e.type == "message" and e.role == "toolResult"):
            if e.result_for in open_calls:
                del open_calls[e.result_for]
            else:
                orphans.append(e)
    return orphans, list(open_calls)


# --------------------------------------------------------------------------------------------------------------
# Cheap measures from the tail, and incremental summaries (daemon)
# --------------------------------------------------------------------------------------------------------------

def context_tokens_from_tail(path: str | os.PathLike, *, window: int = 256 * 1024,
                             max_bytes: int = 16 * 1024 * 1024, stats: dict | None = None) -> tuple[int | None, str]:
    """Context tokens from the end of the file only: the last assistant usage (not error/aborted) plus a chars/4
    estimate of the messages after it, in file order (branches and compaction cuts are not resolved: this is
    the cheap measure for `list` and the daemon scan). Reads backwards `window` bytes at a time, at most
    `max_bytes`. Returns (tokens, "usage"), (tokens, "estimate") when the whole file was read and it has no
    usage, (0, "empty") for an empty session, or (None, "unknown") when it gives up."""
    p = Path(path)
    with open(p, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return 0, "empty"
        end = size
        carry = b""
        trailing = 0
        read = 0
        seen_entry = False
        while end > 0 and read < max_bytes:
            start = max(0, end - window)
            fh.seek(start)
            buf = fh.read(end - start) + carry
            read += end - start
            if stats is not None:
                stats["bytes_read"] = read
            lines = buf.split(b"\n")
            if start > 0:
                carry = lines[0]  # may be a partial line: finish it with the next (earlier) block
                lines = lines[1:]
            else:
                carry = b""
            for o in iter_objects(reversed(lines)):
                if o.get("type") == "session":
                    continue
                seen_entry = True
                e = entry_from_obj(o, 0, 0, 0, 0, 3)
                if e.type == "message" and e.role == "assistant" and e.usage_tokens is not None:
                    return e.usage_tokens + trailing, "usage"
                if e.type in ("message", "custom_message") or (e.type == "branch_summary" and e.summary):
                    trailing += e.est_tokens
            end = start
        if end == 0:
            return (trailing, "estimate") if seen_entry else (0, "empty")
        return None, "unknown"


@dataclass
class RangeSummary:
    """Counters over a byte range [start, end) of a transcript, mergeable with the summary of the next range.

    Usage (daemon): `s = summarize_range(path)`; on the next scan, if the file's inode is the same and its size
    is >= s.end, `s = s.merge(summarize_range(path, s.end))`; otherwise (rewritten, truncated, replaced)
    start over from 0. `end` only advances past complete lines, so a line being appended is read next time.
    Tokens: `last_usage + trailing_est` approximates OpenClaw's context measure in file order.
    """

    start: int = 0
    end: int = 0
    entries: int = 0
    messages: int = 0
    tool_calls: int = 0
    compactions: int = 0
    last_timestamp: str | None = None
    last_usage: int | None = None
    trailing_est: int = 0
    malformed: int = 0
    header_id: str | None = None
    malformed_lines: list = field(default_factory=list)  # byte offsets of malformed lines

    @property
    def tokens(self) -> int | None:
        return None if self.last_usage is None else self.last_usage + self.trailing_est

    def merge(self, nxt: "RangeSummary") -> "RangeSummary":
        if nxt.start != self.end:
            raise ValueError(f"ranges do not touch: {self.end} != {nxt.start}")
        return RangeSummary(
            start=self.start, end=nxt.end, entries=self.entries + nxt.entries,
            messages=self.messages + nxt.messages, tool_calls=self.tool_calls + nxt.tool_calls,
            compactions=self.compactions + nxt.compactions,
            last_timestamp=nxt.last_timestamp or self.last_timestamp,
            last_usage=nxt.last_usage if nxt.last_usage is not None else self.last_usage,
            trailing_est=nxt.trailing_est if nxt.last_usage is not None else self.trailing_est + nxt.trailing_est,
            malformed=self.malformed + nxt.malformed, header_id=self.header_id or nxt.header_id,
            malformed_lines=self.malformed_lines + nxt.malformed_lines)

    def to_json(self) -> dict:
        d = asdict(self)
        d["tokens"] = self.tokens
        return d


def summarize_range(path: str | os.PathLike, start: int = 0, end: int | None = None) -> RangeSummary:
    """Summarize complete lines in [start, end) (end: the current size). `start` must be a line start (0 or a
    previous summary's `end`)."""
    s = RangeSummary(start=start, end=start)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        stop = size if end is None else min(end, size)
        fh.seek(start)
        pos = start
        while pos < stop:
            raw = fh.readline()
            if not raw or not raw.endswith(b"\n") or pos + len(raw) > stop:
                break  # an incomplete last line: leave it for the next scan
            offset = pos
            pos += len(raw)
            s.end = pos
            if not raw.strip():
                continue
            try:
                o = jsontext.loads(raw)
            except orjson.JSONDecodeError:
                s.malformed += 1
                s.malformed_lines.append(offset)
                continue
            if not isinstance(o, dict):
                s.malformed += 1
                s.malformed_lines.append(offset)
                continue
            if o.get("type") == "session":
                if offset == 0 and isinstance(o.get("id"), str):
                    s.header_id = o["id"]
                continue
            s.entries += 1
            ts = o.get("timestamp")
            if isinstance(ts, str):
                s.last_timestamp = ts
            e = entry_from_obj(o, 0, 0, 0, 0, 3)
            if e.is_compaction:  # a provider checkpoint too (occd.transcript.compaction)
                s.compactions += 1
            if e.type == "message":
                s.messages += 1
                s.tool_calls += len(e.call_ids)
            if e.type == "message" and e.role == "assistant" and e.usage_tokens is not None:
                s.last_usage = e.usage_tokens
                s.trailing_est = 0
            elif e.type in ("message", "custom_message") or (e.type == "branch_summary" and e.summary):
                s.trailing_est += e.est_tokens
    return s
