"""Transcript lines as JSON objects, for the readers that only need the entries (not byte offsets or counts of
what was malformed: `occd.transcript.scan` keeps those)."""

from __future__ import annotations

from typing import Iterable, Iterator

import orjson
from occd.transcript import jsontext


def iter_objects(lines: Iterable[bytes | str]) -> Iterator[dict]:
    """The JSON objects among `lines`, in order: blank lines, lines that do not parse and JSON values that are
    not objects are skipped."""
    for raw in lines:
        if not raw.strip():
            continue
        try:
            o = jsontext.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(o, dict):
            yield o
