"""occd.openclaw.ids.short_forms: the sort that lets each id start at the length it shares with its neighbours
(issue 29, `occd sessions` on 5,000 sessions) gives the forms the round-by-round count gave from length 4 on."""

from __future__ import annotations

import random

from occd.openclaw import ids


def reference(xs) -> dict[str, str]:
    """short_forms before the sort: every id from length MIN_PART on, one round per length (kept as the oracle)."""
    uniq = sorted({i for i in xs if i})
    lows = [i.lower() for i in uniq]
    out: dict[str, str] = {}
    todo = list(range(len(uniq)))
    n = ids.MIN_PART
    longest = max((len(i) for i in uniq), default=0)
    hay = "\n".join(lows)
    while todo and n <= longest:
        wanted: dict[str, int] = {}
        for k in todo:
            start = ids._tail(uniq[k])
            if start + n <= len(uniq[k]):
                wanted[lows[k][start:start + n]] = 0
        if len(wanted) * 8 < len(lows):
            for p in wanted:
                wanted[p] = min(hay.count(p), 2)
        else:
            for low in lows:
                for p in {low[j:j + n] for j in range(len(low) - n + 1)}:
                    if p in wanted:
                        wanted[p] += 1
        rest = []
        for k in todo:
            sid, low = uniq[k], lows[k]
            start = ids._tail(sid)
            if start + n > len(sid):
                out[sid] = sid
                continue
            cand = low[start:start + n]
            if not cand.endswith("-") and wanted[cand] == 1 and low.count(cand) == 1:
                out[sid] = sid[start:start + n]
            else:
                rest.append(k)
        todo, n = rest, n + 1
    for k in todo:
        out[uniq[k]] = uniq[k]
    return out


def _uuid7ish(rnd: random.Random) -> str:
    """Time-ordered ids as OpenClaw writes them: a shared first group, second groups sharing their first digits,
    mixed case now and then (the forms are found case-blind)."""
    second = f"{rnd.randrange(16 ** 2):02x}{rnd.choice('aB')}{rnd.choice('cD')}"
    return (f"0192{rnd.randrange(16 ** 2):02x}ab-{second}-{rnd.randrange(16 ** 3):03x}{rnd.choice('aA')}-8000-"
            f"{rnd.randrange(16 ** 12):012x}")


def test_short_forms_are_what_the_round_by_round_count_gave():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    part = st.text(alphabet="aAb-0", max_size=16)
    uuid_like = st.builds(lambda seed, n: [_uuid7ish(random.Random(seed * 1000 + i)) for i in range(n)],
                          st.integers(0, 10 ** 6), st.integers(0, 80))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(part, max_size=40), uuid_like)
    def check(short, uuids):
        xs = short + uuids + uuids[:3]  # repeats are one id
        assert ids.short_forms(xs) == reference(xs)

    check()


def test_short_forms_of_thousands_of_time_ordered_ids_are_unchanged():
    rnd = random.Random(29)
    for n in (300, 3000):
        xs = [_uuid7ish(rnd) for _ in range(n)]
        forms = ids.short_forms(xs)
        assert forms == reference(xs)
        assert len(set(forms.values())) == len(set(xs))
