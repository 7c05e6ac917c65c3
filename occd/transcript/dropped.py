"""`--drop-malformed` without breaking the parent chain.

A malformed line may still be an entry other entries hang on (a torn write, a trailing comma): dropping it would
cut the path from the leaf to the root there, and OpenClaw would lose the history before it. Its `id` and
`parentId` are read from its bytes where they can be (entries start with type, id, parentId); its children are
re-parented to its parent (through any chain of dropped lines). When some entry's parent is missing and a dropped
line's id cannot be read, occd cannot tell whether that line was the parent: it refuses.
"""

from __future__ import annotations

import re
from typing import IO, Callable, Mapping

from occd.errors import OccdError

_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,200})"')
_PARENT = re.compile(rb'"parentId"\s*:\s*(?:"([^"\\]{1,200})"|null)')


def _ids_of(raw: bytes) -> tuple[str | None, str | None, bool]:
    """(id, parentId, readable) of a malformed line, from its bytes."""
    head = raw[:4096]
    m = _ID.search(head)
    p = _PARENT.search(head)
    if not m or not p:
        return None, None, False
    parent = p.group(1).decode("utf-8", "replace") if p.group(1) is not None else None
    return m.group(1).decode("utf-8", "replace"), parent, True


def reparent_for_dropped(t, src: IO[bytes] | None, edits: Mapping[int, Callable[[dict], dict]]) -> dict:
    """The edits to apply with drop_malformed: `edits` plus, for each entry whose parent is a dropped line, its
    parentId set to the nearest kept ancestor. OccdError (PARENT_CHAIN) when that cannot be done safely."""
    if not t.malformed:
        return dict(edits) if not isinstance(edits, dict) else edits
    own = src is None
    fh = open(t.path, "rb") if own else src
    dropped: dict[str, str | None] = {}
    unreadable: list[int] = []
    try:
        pos = fh.tell()
        for m in t.malformed:
            fh.seek(m.offset)
            eid, parent, ok = _ids_of(fh.read(min(m.length, 1 << 16)))
            if ok and eid:
                dropped[eid] = parent
            else:
                unreadable.append(m.lineno)
        fh.seek(pos)
    finally:
        if own:
            fh.close()
    known = {e.id for e in t.entries if e.id is not None}
    for eid in list(dropped):
        if eid in known:  # an entry with that id was kept: the malformed line was not it
            dropped.pop(eid)

    def resolve(pid):
        seen = set()
        while pid in dropped and pid not in seen:
            seen.add(pid)
            pid = dropped[pid]
        return pid

    out = {ln: edits[ln] for ln in edits}
    for e in t.entries:
        if e.parent is None or e.parent in known:
            continue
        if e.parent in dropped:
            new = resolve(e.parent)
            if new is not None and new not in known:
                raise OccdError(f"Dropping the malformed lines would cut the parent chain at line {e.line + 1}",
                                "fix the malformed lines by hand, or `occd restore` a backup", code="PARENT_CHAIN")
        elif unreadable:
            raise OccdError(f"Malformed line {unreadable[0]} may be the parent of line {e.line + 1} (its id cannot "
                            "be read): dropping it would cut the parent chain",
                            "fix that line by hand (its id and parentId), then run the edit again", code="PARENT_CHAIN")
        else:
            continue  # its parent was missing before anything was dropped
        out[e.line] = _then_set_parent(out.get(e.line), new)
    if dropped:  # an entry the plan re-parents may now point at a dropped line
        for ln, fn in list(out.items()):
            out[ln] = _then_remap(fn, dropped, resolve)
    return out


def _then_set_parent(fn, parent):
    def apply(o: dict) -> dict:
        o = fn(o) if fn is not None else o
        o["parentId"] = parent
        return o
    return apply


def _then_remap(fn, dropped, resolve):
    def apply(o: dict) -> dict:
        o = fn(o)
        if isinstance(o, dict) and o.get("parentId") in dropped:
            o["parentId"] = resolve(o["parentId"])
        return o
    return apply
