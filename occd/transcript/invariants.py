"""The invariants of docs/openclaw-format.md that can be checked from a file alone.

`check_invariants(path_or_transcript, original=None)` returns a list of problems (empty: fine). With the
original Transcript it also checks what a rewrite must keep: the header id (unless `clone=True`), the leaf,
and that no problem is new. The action layer runs it on the temp file before the rename.
"""

from __future__ import annotations

import os

from occd.errors import ParseError
from occd.transcript.analysis import tool_pairing
from occd.transcript.model import REF_TYPES, Transcript
from occd.transcript.scan import scan


def _problems(t: Transcript) -> list[str]:
    out: list[str] = []
    if t.size == 0:
        return out
    if t.header is None or not t.header_ok:
        out.append("header: first line is not a session header with a string id")
    for m in t.malformed:
        out.append(f"line {m.lineno}: {m.kind}")
    if t.missing_final_newline or any(m.kind == "torn" for m in t.malformed):
        out.append("file does not end with a newline")
    if t.duplicate_ids:
        out.append(f"duplicate ids: {sorted(set(map(str, t.duplicate_ids)))[:5]}")
    by_id = t.by_id
    for e in t.entries:
        eid = e.id
        if eid is None:
            out.append(f"line {e.lineno}: entry without id")
        elif type(eid) is tuple:  # the scan's stand-in for an array/object id
            out.append(f"line {e.lineno}: id is an array or object")
        refs = (("parentId", e.parent),)
        if e.type in REF_TYPES:
            refs += (("firstKeptEntryId", e.first_kept), ("targetId", e.target_id), ("fromId", e.from_id))
        for name, ref in refs:
            if ref is not None and ref not in by_id:
                what = "is an array or object" if type(ref) is tuple else f"{ref} does not exist"
                out.append(f"line {e.lineno}: {name} {what}")
        if e.type == "compaction" and e.first_kept is None:
            out.append(f"line {e.lineno}: compaction without firstKeptEntryId")
    try:
        t.check_cycles()
    except ParseError as exc:
        out.append(f"parent cycle at line {exc.details.get('line')}")
        return out
    orphans, _unanswered = tool_pairing(t)
    for e in orphans:
        out.append(f"line {e.lineno}: tool result without its call on the active path")
    return out


def _same_entry(a, b) -> bool:
    """Same entry by id; an array/object id (the scan's stand-in, which holds the line number) by type alone."""
    if type(a.id) is tuple and type(b.id) is tuple:
        return a.type == b.type
    return a.id == b.id


def check_invariants(target: Transcript | str | os.PathLike, original: Transcript | None = None, *,
                     clone: bool = False) -> list[str]:
    t = target if isinstance(target, Transcript) else scan(target, check_cycles=False, prepare_strip=False)
    problems = _problems(t)
    if original is None:
        return problems
    # the original's own problems only matter when the new file has some (then they are not the rewrite's)
    before = set(_problems(original)) if original.size and problems else set()
    # a problem the original already had (same text) is not the rewrite's fault; line numbers may shift, so
    # compare by kind for line-bound messages
    def kind(p: str) -> str:
        return p.split(": ", 1)[1] if p.startswith("line ") else p
    before_kinds = {kind(p) for p in before}
    new = [p for p in problems if p not in before and kind(p) not in before_kinds]
    if clone:
        if t.session_id == original.session_id:
            new.append("clone kept the source's session id")
    elif t.session_id != original.session_id:
        new.append(f"header id changed: {original.session_id} -> {t.session_id}")
    if original.leaf is not None and (t.leaf is None or not _same_entry(t.leaf, original.leaf)):
        new.append("the last entry (the leaf the user was on) changed")
    return new
