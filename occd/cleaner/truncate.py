"""Truncation rules (pure functions on parsed values).

- Tool-call arguments: their compact JSON text is cut to at most 120 characters (2 lines, which compact JSON
  never exceeds); the value stays an OBJECT with its keys (providers require an object): string values are
  shortened and marked with `...`, nested values are stringified and shortened the same way. Should even the
  keys not fit, trailing keys are dropped and a `"...": "..."` key marks it.
- Tool-result text: cut to 2 lines / 120 characters and marked `[truncated]`; images are dropped with a
  `[N image(s) removed]` marker.

Every output is within the limit, and input within the limit is returned unchanged: truncation is idempotent.
"""

from __future__ import annotations

import json

from occd.transcript.limits import MAX_CHARS, MAX_LINES, json_text_len, text_within_limit

ARGS_MARK = "..."
RESULT_MARK = "[truncated]"


def _esc_len(s: str) -> int:
    return len(json.dumps(s, ensure_ascii=False)) - 2


def _cut_string(s: str, max_escaped: int) -> str:
    """A prefix of s plus '...' whose JSON-escaped length is at most max_escaped (>= 3)."""
    budget = max_escaped - len(ARGS_MARK)
    out = []
    used = 0
    for ch in s:
        n = _esc_len(ch)
        if used + n > budget:
            break
        out.append(ch)
        used += n
    return "".join(out) + ARGS_MARK


def truncate_args(args):
    """Arguments whose compact JSON is at most 120 characters; unchanged when already within."""
    if json_text_len(args) <= MAX_CHARS:
        return args
    if not isinstance(args, dict):
        s = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        return _cut_string(s, MAX_CHARS - 2)
    vals: dict = {}
    for k, v in args.items():
        if isinstance(v, str):
            vals[k] = v
        elif v is None or isinstance(v, bool) or (isinstance(v, (int, float)) and json_text_len(v) <= 20):
            vals[k] = v
        else:
            vals[k] = json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    str_keys = [k for k, v in vals.items() if isinstance(v, str)]
    skeleton = {k: ("" if k in str_keys else v) for k, v in vals.items()}
    budget = MAX_CHARS - json_text_len(skeleton)
    if str_keys and budget >= len(ARGS_MARK) * len(str_keys):
        lens = {k: _esc_len(vals[k]) for k in str_keys}
        alloc: dict = {}
        remaining = budget
        order = sorted(str_keys, key=lambda k: lens[k])
        for i, k in enumerate(order):
            share = remaining // (len(order) - i)
            if lens[k] <= share:
                alloc[k] = None  # fits as it is
                remaining -= lens[k]
            else:
                alloc[k] = share
                remaining -= share
        out = {}
        for k, v in vals.items():
            out[k] = _cut_string(v, alloc[k]) if k in alloc and alloc[k] is not None else v
        if json_text_len(out) <= MAX_CHARS:
            return out
    # even the keys do not fit: keep leading keys with "..." values while they fit, and mark the cut
    out = {}
    for k in vals:
        trial = dict(out)
        trial[k] = ARGS_MARK
        trial[ARGS_MARK] = ARGS_MARK
        if json_text_len(trial) > MAX_CHARS:
            break
        out[k] = ARGS_MARK
    out[ARGS_MARK] = ARGS_MARK
    return out


def _cut_text(text: str, budget: int) -> str:
    lines = text[:MAX_CHARS + 1].split("\n")[:MAX_LINES]  # only the head matters (texts can be megabytes)
    s = "\n".join(lines)
    if len(s) > budget:
        s = s[:max(0, budget)]
    return s.rstrip()


def truncate_result_content(content):
    """A tool result's content cut to one text block within the limit, images dropped with a marker.
    Content already within the limit (and without images) is returned unchanged."""
    if isinstance(content, str):
        if text_within_limit(content):
            return content
        return _cut_text(content, MAX_CHARS - len(RESULT_MARK) - 1) + " " + RESULT_MARK
    if not isinstance(content, list):
        return content
    texts = []
    head_len = 0
    images = 0
    others = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            if head_len <= MAX_CHARS:  # keep only what can matter for the cut (plus one char to see overflow)
                texts.append(b["text"][:MAX_CHARS + 1])
                head_len += min(len(b["text"]), MAX_CHARS + 1) + 1
            else:
                head_len += 1
        elif isinstance(b, dict) and b.get("type") == "image":
            images += 1
        else:
            others.append(b)
    text = "\n".join(texts)  # the head of the joined texts: enough to cut, and to see it is over the limit
    if images == 0 and len(text) == head_len - 1 and text_within_limit(text):
        return content
    marks = [RESULT_MARK]
    if images:
        marks.append(f"[{images} image{'s' if images != 1 else ''} removed]")
    tail = " ".join(marks)
    cut = _cut_text(text, MAX_CHARS - len(tail) - 1)
    new_text = f"{cut} {tail}" if cut else tail
    return [{"type": "text", "text": new_text}] + others
