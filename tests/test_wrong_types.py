"""Wrong types anywhere in an entry (an id that is an array, content that is a number, a block that is a string,
usage that is a list...) never crash the transcript engine: scan, analysis, invariants, the strip plan and the
rewrite either work or raise an OccdError (which the CLI turns into one line and an exit code)."""

from __future__ import annotations

import copy
import io
import json

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from occd.cleaner import plan_strip
from occd.errors import OccdError
from occd.transcript import analyze, check_invariants, context_tokens_from_tail, rewrite, scan
from occd.transcript.analysis import summarize_range
from occd.transcript.synth import generate_transcript

WRONG = st.sampled_from([None, True, 0, -7, 1.5, "", "x", [], ["a"], {}, {"a": 1}, [{"type": "text"}],
                         {"type": "text", "text": 3}, 2 ** 70])


def _paths(obj, prefix=()):
    """Every (container path, key) in a parsed entry, the entry itself included."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix, k
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield prefix, i
            yield from _paths(v, prefix + (i,))


def _corrupt(obj, picks: list[tuple[int, object]]):
    """Replace the values at the picked positions (index into _paths, modulo its length) by wrong ones."""
    for n, value in picks:
        spots = list(_paths(obj))
        if not spots:
            return obj
        where, key = spots[n % len(spots)]
        target = obj
        for k in where:
            target = target[k]
        target[key] = copy.deepcopy(value)  # never the same object twice (no cycles)
    return obj


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 50), lines=st.lists(st.tuples(st.integers(1, 10 ** 6),
                                                           st.lists(st.tuples(st.integers(0, 10 ** 6), WRONG),
                                                                    min_size=1, max_size=3)),
                                                 min_size=1, max_size=4),
       preset=st.sampled_from([(20, 50), (1, 100), (0, 0)]))
def test_wrong_types_never_crash(tmp_path, seed, lines, preset):
    src = tmp_path / "s.jsonl"
    generate_transcript(src, turns=8, thinking=True, compactions=1, branch=True, images=True, custom=True, seed=seed)
    raw = src.read_bytes().splitlines()
    for n, picks in lines:
        i = 1 + n % (len(raw) - 1)  # not the header (a broken header is refused early, tested elsewhere)
        obj = _corrupt(orjson.loads(raw[i]), picks)
        raw[i] = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()  # json: 2**70 too
    src.write_bytes(b"\n".join(raw) + b"\n")
    try:
        t = scan(src)
        analyze(t)
        check_invariants(t)
        context_tokens_from_tail(src)
        summarize_range(src)
        plan = plan_strip(t, *preset)
        out = io.BytesIO()
        rewrite(t, out, remove=plan.remove, edits=plan.transforms())
        if plan.changed:
            dst = tmp_path / "out.jsonl"
            dst.write_bytes(out.getvalue())
            check_invariants(dst, t)
    except OccdError as exc:
        event(f"refused: {type(exc).__name__}")
    else:
        event("stripped" if plan.changed else "unchanged")
