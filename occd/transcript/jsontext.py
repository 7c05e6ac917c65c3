"""JSON as OpenClaw (Node's JSON.parse/JSON.stringify) reads and writes it, for every parse of OpenClaw's data.

orjson is fast but refuses a lone surrogate escape (`"\\ud83d"`, which JSON.stringify writes when a string is cut
inside an emoji), which JSON.parse accepts. `loads` takes orjson's answer when it has one and otherwise asks
Python's json; it still refuses what JSON.parse refuses (NaN, Infinity, a BOM). Bytes that are not UTF-8 stay
refused (occd reports them as `non-utf8`: Node would read U+FFFD there, and a rewrite would lose the bytes). A lone surrogate becomes a lone
surrogate code point in the Python string; `dumps` writes it back as the same `\\uXXXX` escape (never as bytes
that are not UTF-8), so a value read and written again is what OpenClaw wrote.
"""

from __future__ import annotations

import json
import re

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | bytearray | memoryview | str):
    """Parse one JSON text as JSON.parse does; ValueError (orjson.JSONDecodeError) when JSON.parse would fail."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as first:
        try:
            text = data if isinstance(data, str) else bytes(data).decode("utf-8")
            if text.startswith("\ufeff"):  # JSON.parse refuses a BOM too
                raise first
            return json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise first from None


def escape_surrogates(text: str) -> str:
    """Lone surrogate code points as `\\uXXXX` (valid inside a JSON string, where they can only be)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def dumps(value, *, indent: int | None = None, sort_keys: bool = False) -> bytes:
    """Compact (or indented) JSON in UTF-8, key order kept; json for what orjson refuses (lone surrogates, big
    ints), with lone surrogates written as escapes."""
    opt = (orjson.OPT_INDENT_2 if indent == 2 else 0) | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    if indent in (None, 2):
        try:
            return orjson.dumps(value, option=opt or None)
        except TypeError:
            pass
    seps = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, ensure_ascii=False, separators=seps, indent=indent, sort_keys=sort_keys)
    return escape_surrogates(text).encode("utf-8")


def dumps_text(value, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """json.dumps(ensure_ascii=False) that can always be encoded as UTF-8 (lone surrogates escaped)."""
    seps = (",", ":") if indent is None else (",", ": ")
    return escape_surrogates(json.dumps(value, ensure_ascii=False, separators=seps, indent=indent,
                                        sort_keys=sort_keys))
