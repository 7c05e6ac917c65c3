"""Session ids people can type: one resolver and one short form for every command.

OpenClaw's ids are UUIDv7: the first group is a timestamp, so every session of a week starts with the same
8 hex digits. The short form therefore starts at the second group (`bb86`, or `bb86-7d1` when needed) and is
as short as keeps it unique among the ids shown; the resolver accepts any unique part of an id (4 characters
or more; a prefix of any length), an exact id, or a session key. On a miss it names the closest ids.
"""

from __future__ import annotations

import difflib
import os
from typing import Callable, Iterable, Sequence, TypeVar

from occd.errors import OccdError

T = TypeVar("T")
MIN_PART = 4


def _tail(session_id: str) -> int:
    """Where the short form starts: after a UUID's first (time) group, else at the beginning."""
    return 9 if len(session_id) >= 13 and session_id[8] == "-" else 0


def short_forms(ids: Iterable[str]) -> dict[str, str]:
    """id -> the shortest part from its second group on (at least 4 characters) that no other id contains.

    First one sort: an id whose part starts like another id's part (time-ordered ids share their second group's
    first digits) cannot be shorter than what they share plus one, so it starts there (_shared_lengths). Then
    length by length for the ids still without a form: each round counts, over all ids, only the substrings some
    remaining id wants, so 5,000 ids take a round or two of one pass each (the old way counted each candidate in
    the whole text: quadratic, minutes for 5,000 ids)."""
    uniq = sorted({i for i in ids if i})
    lows = [i.lower() for i in uniq]
    starts = [_tail(i) for i in uniq]
    out: dict[str, str] = {}
    pending: dict[int, list[int]] = {}  # length to try next -> the ids to try it for
    for k, shared in enumerate(_shared_lengths(lows, starts)):
        pending.setdefault(max(MIN_PART, shared + 1), []).append(k)
    hay = "\n".join(lows)
    while pending:
        n = min(pending)
        todo = pending.pop(n)
        wanted: dict[str, int] = {}
        for k in todo:
            if starts[k] + n <= len(uniq[k]):
                wanted[lows[k][starts[k]:starts[k] + n]] = 0
        # a few: counting each in the text is quicker. One count is one pass over the text in C; the pass below
        # builds every id's parts in Python and costs about as much as ~100 counts, however many ids there are
        # (10,000 time-ordered ids: 1.2 s with 1,250 counts allowed, 0.47 s with 64; measured 2026-11-28)
        if len(wanted) < 64:
            for p in wanted:
                wanted[p] = min(hay.count(p), 2)
        else:
            for low in lows:  # how many ids hold each wanted part
                for p in {low[j:j + n] for j in range(len(low) - n + 1)}:
                    if p in wanted:
                        wanted[p] += 1
        for k in todo:
            sid, low, start = uniq[k], lows[k], starts[k]
            if start + n > len(sid):
                out[sid] = sid
                continue
            cand = low[start:start + n]
            # unique: no other id holds it and it occurs once in its own (what counting it in the text said)
            if not cand.endswith("-") and wanted[cand] == 1 and low.count(cand) == 1:  # (in the text: == 1 says both)
                out[sid] = sid[start:start + n]
            else:
                pending.setdefault(n + 1, []).append(k)
    return out


def _shared_lengths(lows: list[str], starts: list[int]) -> list[int]:
    """For each id, how many characters from its start (`starts`) on another id has at its own start too: the
    longest common prefix with its neighbours once these parts are sorted (one sort, no comparing of all pairs)."""
    parts = [low[s:] for low, s in zip(lows, starts)]
    order = sorted(range(len(parts)), key=parts.__getitem__)
    shared = [0] * len(parts)
    for a, b in zip(order, order[1:]):
        n = len(os.path.commonprefix([parts[a], parts[b]]))
        shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
    return shared


_FORMS: dict = {}  # the last `among` of short_id and its forms: a table asks for every row's form among the same ids


def short_id(session_id: str | None, among: Iterable[str] | None = None) -> str:
    """The short form of one id: unique among `among` when given, else its second group (4 characters)."""
    if not session_id:
        return "-"
    if among is not None:
        among = among if isinstance(among, (list, tuple)) else list(among)
        forms = _FORMS.get("forms")
        if _FORMS.get("among") is not among or _FORMS.get("n") != len(among) or session_id not in forms:
            key = list(among)
            forms = short_forms(key + [session_id])
            _FORMS.clear()
            if session_id in key:  # (the same list object asked again, unchanged in length: the same forms)
                _FORMS.update(among=among, n=len(key), forms=forms)
        return forms.get(session_id, session_id)
    start = _tail(session_id)
    return session_id[start:start + MIN_PART] if start else session_id[:13]


def resolve(items: Sequence[T], ref: str, *, id_of: Callable[[T], str], key_of: Callable[[T], str | None] = lambda _: None,
            label_of: Callable[[T], str | None] | None = None, what: str = "Session",
            hint_list: str = "run `occd list` to see the sessions") -> T:
    """The one item `ref` names: an exact id or key, a prefix of an id, or any unique part of 4+ characters.
    Several items with the same id (two keys naming one transcript) count as one."""
    ref = (ref or "").strip().strip("…").strip()
    if not ref:
        raise OccdError(f"Empty {what.lower()} reference", hint_list, code="SESSION_NOT_FOUND")
    for it in items:
        if id_of(it) == ref or (key_of(it) and key_of(it) == ref):
            return it
    low = ref.lower()
    matches: dict[str, T] = {}
    for it in items:
        sid = id_of(it).lower()
        if sid.startswith(low) or (len(low) >= MIN_PART and low in sid):
            matches.setdefault(id_of(it), it)
    if len(matches) == 1:
        return next(iter(matches.values()))
    label_of = label_of or key_of
    if not matches:
        near = closest([id_of(it) for it in items], ref)
        forms = short_forms(id_of(it) for it in items)
        labels = {id_of(it): label_of(it) for it in items}
        hint = hint_list
        if near:
            hint = "closest: " + ", ".join(f"{forms.get(n, n)} ({labels.get(n) or n})" for n in near) + "; " + hint_list
        raise OccdError(f"{what} '{ref}' not found", hint, code="SESSION_NOT_FOUND",
                        details={"closest": near} if near else None)
    ms = list(matches.values())
    shown = ", ".join(f"{id_of(m)} ({label_of(m) or 'unindexed'})" for m in ms[:8])
    more = f" and {len(ms) - 8} more" if len(ms) > 8 else ""
    raise OccdError(f"Multiple sessions match '{ref}'", f"say which: {shown}{more}", code="AMBIGUOUS_SESSION",
                    details={"matches": [id_of(m) for m in ms]})


def closest(ids: Iterable[str], ref: str, n: int = 3) -> list[str]:
    """The ids most like `ref` (compared on their parts after the time group, and whole)."""
    ids = list(dict.fromkeys(i for i in ids if i))
    low = ref.lower()
    scored = []
    for sid in ids:
        tail = sid[_tail(sid):].lower()
        r1 = difflib.SequenceMatcher(None, low, tail[: max(len(low), MIN_PART)]).ratio()
        r2 = difflib.SequenceMatcher(None, low, sid.lower()).ratio()
        best_part = max((difflib.SequenceMatcher(None, low, tail[i:i + len(low)]).ratio()
                         for i in range(0, max(1, len(tail) - len(low) + 1))), default=0)
        scored.append((max(r1, r2, best_part), sid))
    scored.sort(key=lambda x: -x[0])
    return [sid for score, sid in scored[:n] if score >= 0.5]
