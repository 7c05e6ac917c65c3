"""OpenClaw's "token pressure" estimate of one message (2026.7.x, src/agents/embedded-agent-runner: text at chars/4,
tool results at max(chars/2, chars/4), JSON payloads at chars/3, 12 tokens per message and 6 per content block,
2,000 per image), and the slim form of a transcript line the budget keeps (occd.policy.budget). Pure."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from occd.units import epoch_seconds, iso_seconds

SAFETY_MARGIN = 1.2
CHARS_PER_TOKEN = 4
TOOL_RESULT_CHARS_PER_TOKEN = 2
JSON_CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 12
BLOCK_OVERHEAD = 6
IMAGE_TOKENS = 2000

_NON_LATIN = re.compile("[\u2E80-\u9FFF\uA000-\uA4FF\uAC00-\uD7AF\uF900-\uFAFF\uFF01-\uFF60\uFFE0-\uFFE6"
                        "\U00020000-\U0002FA1F]")
_COMPACTION_PREFIX = ("The conversation history before this point was compacted into the following summary:\n\n"
                      "<summary>\n")
_COMPACTION_SUFFIX = "\n</summary>"
_BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
_BRANCH_SUFFIX = "\n</summary>"


def _js_len(s: str) -> int:
    """JavaScript's String.length (UTF-16 code units)."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def _chars(s: str) -> int:
    """OpenClaw's estimateStringChars: non-Latin (CJK, ...) characters count 4."""
    if not s:
        return 0
    if s.isascii():
        return len(s)
    n = len(_NON_LATIN.findall(s))
    return (_js_len(s) - sum(1 for ch in s if 0x20000 <= ord(ch) <= 0x2FA1F)) + 3 * n if n else _js_len(s)


def _str(s: str, cpt: int = CHARS_PER_TOKEN) -> int:
    return math.ceil(_chars(s) / cpt)


def _dumps(v: Any) -> str | None:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _json(v: Any, cpt: int = JSON_CHARS_PER_TOKEN) -> int:
    s = _dumps(v)
    return 256 if s is None else math.ceil(_chars(s) / cpt)


def _ident(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, (str, int, float, bool)):
        return _str(str(v), JSON_CHARS_PER_TOKEN)
    return _json(v)


def _result_str(s: str) -> int:
    return max(math.ceil(_js_len(s) / TOOL_RESULT_CHARS_PER_TOKEN), _str(s))


def _block(b: Any, text: Callable[[str], int] = _str) -> int:
    """One content block: its text (and a block that is not text, as JSON) measured by `text`: chars/4 in
    ordinary messages, _result_str (at least chars/2) in tool results."""
    if isinstance(b, str):
        return text(b)
    if not isinstance(b, dict):
        s = _dumps(b)
        return 256 if s is None else text(s)
    t = b.get("type")
    if t == "text" and isinstance(b.get("text"), str):
        return BLOCK_OVERHEAD + text(b["text"])
    if t == "thinking" and isinstance(b.get("thinking"), str):
        return BLOCK_OVERHEAD + text(b["thinking"])
    if t == "image":
        return IMAGE_TOKENS
    s = _dumps(b)
    return BLOCK_OVERHEAD + (256 if s is None else text(s))


def _content(c: Any) -> int:
    if isinstance(c, str):
        return _str(c)
    if isinstance(c, list):
        return sum(_block(b) for b in c)
    return 0 if c is None else _json(c)


def tool_call_tokens(b: dict) -> int:
    args = b.get("arguments", b.get("input", b.get("args", {})))
    if args is None:
        args = {}
    return BLOCK_OVERHEAD + _ident(b.get("name")) + _json(args)


def is_tool_call(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") in ("toolCall", "tool_use")


def message_tokens(m: dict) -> int:
    """OpenClaw's estimateMessageTokenPressure for one context message (before the safety margin)."""
    role = m.get("role")
    n = MESSAGE_OVERHEAD
    if role in ("toolResult", "tool") or m.get("type") == "toolResult":
        c = m.get("content")
        if isinstance(c, str):
            n += _result_str(c)
        elif isinstance(c, list):
            n += sum(_block(b, _result_str) for b in c)
        elif c is not None:
            s = _dumps(c)
            n += 256 if s is None else _result_str(s)
        return n + _ident(m.get("toolName", m.get("tool_name")))
    if role == "bashExecution":
        if m.get("excludeFromContext") is True:
            return 0
        return n + _str(f"{m.get('command', '')}\n{m.get('output', '')}")
    if role == "branchSummary":
        s = m.get("summary") if isinstance(m.get("summary"), str) else ""
        return n + _str(_BRANCH_PREFIX + s + _BRANCH_SUFFIX)
    if role == "compactionSummary":
        s = m.get("summary") if isinstance(m.get("summary"), str) else ""
        return n + _str(_COMPACTION_PREFIX + s + _COMPACTION_SUFFIX)
    if role == "assistant":
        c = m.get("content")
        if isinstance(c, list):
            for b in c:
                n += tool_call_tokens(b) if is_tool_call(b) else _block(b)
        else:
            n += _content(c)
        calls = m.get("toolCalls", m.get("tool_calls"))
        if isinstance(calls, list):
            n += sum(tool_call_tokens(x) if isinstance(x, dict) else _json(x) for x in calls)
        return n
    return n + _content(m.get("content"))


def tool_call_count(m: dict) -> int:
    c = m.get("content") if m.get("role") == "assistant" else None
    return sum(1 for b in c if is_tool_call(b)) if isinstance(c, list) else 0


def has_tool_calls(m: dict) -> bool:
    return m.get("role") == "assistant" and isinstance(m.get("content"), list) and any(is_tool_call(b) for b in m["content"])


def slim_entry(o: dict) -> dict:
    """A transcript line reduced to what the estimate and the emergency detection need: messages carry their
    estimate (`_est`), what a strip removes (`_strip`) and whether they call tools (`_tools`), not their content
    (an assistant's text is kept short, with its usage). Keeps a 100 MB transcript from being held in memory."""
    t = o.get("type")
    base = {"type": t, "id": o.get("id"), "parentId": o.get("parentId")}
    if t == "message" and isinstance(o.get("message"), dict):
        m = o["message"]
        sm = {"role": m.get("role"), "_est": message_tokens(m), "_strip": strippable_tokens(m),
              "_tools": has_tool_calls(m), "_calls": tool_call_count(m), "_ts": entry_time(o)}
        if m.get("role") == "assistant":
            c = m.get("content")
            text = c if isinstance(c, str) else " ".join(
                b.get("text", "") for b in c or [] if isinstance(b, dict) and isinstance(b.get("text"), str)) \
                if isinstance(c, list) else ""
            sm["content"] = text[:500]
            for k in ("usage", "errorMessage", "stopReason"):
                if k in m:
                    sm[k] = m[k] if k != "errorMessage" or not isinstance(m[k], str) else m[k][:500]
        base["message"] = sm
    elif t == "custom_message":
        m = {"role": "custom", "content": o.get("content")}
        base["_msg"] = {"role": "custom", "_est": message_tokens(m), "_strip": 0, "_tools": False}
    elif t in ("compaction", "branch_summary"):
        base["summary"] = o.get("summary")
        base["timestamp"] = o.get("timestamp")
        base["firstKeptEntryId"] = o.get("firstKeptEntryId")
    return base


def entry_time(o: dict) -> float | None:
    """When a transcript line was written, epoch seconds: its ISO `timestamp` (None when that does not parse),
    else its message's (epoch ms, or seconds for a figure too small to be ms); None without either."""
    v = o.get("timestamp")
    if isinstance(v, str):
        return iso_seconds(v)
    m = o.get("message") if isinstance(o.get("message"), dict) else {}
    v = m.get("timestamp")
    return epoch_seconds(v) if isinstance(v, (int, float)) else None


def strippable_tokens(m: dict) -> int:
    """What stripping a turn's tool calls takes out of this message's estimate: a tool result entirely; an
    assistant message's tool calls and thinking (the whole message when nothing else is left in it)."""
    role = m.get("role")
    if role in ("toolResult", "tool"):
        return message_tokens(m)
    if role != "assistant" or not isinstance(m.get("content"), list):
        return 0
    c = m["content"]
    if not any(is_tool_call(b) for b in c):
        return 0
    gone = [b for b in c if is_tool_call(b) or (isinstance(b, dict) and b.get("type") == "thinking")]
    if len(gone) == len(c):
        return message_tokens(m)
    return sum(tool_call_tokens(b) if is_tool_call(b) else _block(b) for b in gone)
