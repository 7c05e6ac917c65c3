"""occd on a workstation (issue 29): what a cycle and a report cost on a state of many agents and sessions.

The bounds count work (how often agents are listed, sessions parsed or rated, short ids computed) rather than
only wall time, so they hold on a loaded CI machine and fail on code that does per-agent or per-session work for
what did not change; a few coarse wall-time bounds back them up."""

from __future__ import annotations

import uuid

from occd.openclaw import ids


def test_a_table_of_short_ids_computes_the_forms_once(monkeypatch):
    """`occd sessions` / `occd status` ask each row's short id among all the ids shown: one computation of the
    forms for the table, not one per row (5,000 rows took minutes)."""
    calls = []
    real = ids.short_forms
    monkeypatch.setattr(ids, "short_forms", lambda xs: calls.append(1) or real(xs))
    shown = [str(uuid.uuid4()) for _ in range(300)]
    forms = [ids.short_id(s, shown) for s in shown]
    assert len(set(forms)) == 300 and len(calls) <= 2
    assert forms == [real(shown)[s] for s in shown]
    assert ids.short_id("not-shown-id-0000", shown) == real(shown + ["not-shown-id-0000"])["not-shown-id-0000"]


def test_short_forms_of_many_ids_are_the_unique_parts():
    """The length-by-length count gives what counting each candidate in the whole text gave."""
    def by_text(xs):
        uniq = sorted(set(xs))
        hay = "\n".join(i.lower() for i in uniq)
        out = {}
        for sid in uniq:
            start, low, form = ids._tail(sid), sid.lower(), sid
            for end in range(start + ids.MIN_PART, len(sid) + 1):
                if not low[start:end].endswith("-") and hay.count(low[start:end]) == 1:
                    form = sid[start:end]
                    break
            out[sid] = form
        return out

    import random

    rnd = random.Random(29)
    for _ in range(50):
        xs = ["".join(rnd.choice("ab-") for _ in range(rnd.randint(1, 12))) for _ in range(rnd.randint(0, 40))]
        xs += [f"0192{rnd.randrange(16 ** 4):04x}-{rnd.choice(['aaaa', 'abab', f'{rnd.randrange(16 ** 4):04x}'])}-7000-8000-"
               f"{rnd.randrange(16 ** 12):012x}" for _ in range(rnd.randint(0, 200))]
        assert ids.short_forms(xs) == by_text(xs)
