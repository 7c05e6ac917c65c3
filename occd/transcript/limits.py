"""Truncation limits shared by the scan (which flags what would change) and the cleaner (which cuts).

A text is "within the limit" when it has at most 2 lines and at most 120 characters. Tool-call arguments are
measured as their compact JSON text (which never contains a raw newline, so the 120-character bound is the one
that applies). Truncated output is always within the limit, which makes truncation idempotent.
"""

from __future__ import annotations

import json

import orjson

MAX_CHARS = 120
MAX_LINES = 2


def jslen(s: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units): OpenClaw's chars/4 estimates use it."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def text_within_limit(text: str) -> bool:
    return len(text) <= MAX_CHARS and text.count("\n") < MAX_LINES


def dumps_compact(value) -> bytes:
    """Compact JSON, key order kept, UTF-8 unescaped; falls back to json for what orjson refuses (big ints)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        from occd.transcript.jsontext import escape_surrogates  # lone surrogates back as the escapes they were read from

        return escape_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":"))).encode("utf-8")


def json_text_len(value) -> int:
    b = dumps_compact(value)
    if len(b) <= MAX_CHARS or b.isascii():
        return len(b)
    return len(b.decode("utf-8", "replace"))


def args_within_limit(args) -> bool:
    return json_text_len(args) <= MAX_CHARS
