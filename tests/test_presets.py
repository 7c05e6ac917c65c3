"""The preset rule, stated independently of the planner and checked on the written file.

The rule (README, docs/design.md "cleaner"): of the n turns with tools on the active path, the newest
min(n, keep) are kept; of those, the oldest floor(truncate_percent % of them) are truncated; every older turn
with tools loses its tool calls and results. A larger keep never removes more.

These tests do not read the plan's counters or turn ranges: they build a session whose turns they know, write the
stripped file, and classify each original turn with tools by what is left of it in the bytes:
- untouched: every line of the turn (call message, results) is byte-identical in the result;
- truncated: all its calls and results are still there, and its (long) arguments and results were cut;
- removed: none of its calls and none of its results are left.
A turn in any other state is a failure in itself.

Why the older property test (test_cleaner.test_strip_properties) passed with the negative-slice bug
(`tool_turns[len(tool_turns) - keep:]` keeps only the last keep - n turns when n < keep): it checked validity
(invariants, pairing, visible conversation, byte-identical untouched lines, idempotence) but never counted what
was kept. Every one of those holds when too much is removed, and the buggy plan is idempotent too (a second pass
over the n' = keep - n surviving turns keeps all of them again when n' <= n, which is the only case keep <= 4 and
n < keep produce). It now also counts the surviving turns against this rule.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from occd.cleaner import plan_strip
from occd.config import BUILTIN_PRESETS, PresetConfig, Settings, resolve_preset
from occd.transcript import check_invariants, rewrite, scan
from occd.transcript.treebuilder import TreeBuilder

UNTOUCHED, TRUNCATED, REMOVED = "untouched", "truncated", "removed"


def build_session(n_tool_turns: int, rnd: random.Random, *, thinking: bool = True):
    """A session with exactly n turns with tools (1-3 calls each, long arguments and results so that truncation
    is visible), plain turns mixed in, and sometimes a second round of calls in a turn. Returns the builder and,
    per turn with tools in order, {"lines": ids of its call messages and results, "calls": call ids}."""
    b = TreeBuilder(seed=rnd.randrange(1 << 30))
    b.model()
    turns = []
    for i in range(n_tool_turns):
        if rnd.random() < 0.3:
            b.user(f"plain question {i}")
            b.assistant(f"plain answer {i}")
        b.user(f"task {i}")
        lines, calls = [], []
        for _ in range(1 + (rnd.random() < 0.25)):
            a, cids = b.assistant(f"working on {i}", calls=1 + rnd.randrange(3), thinking=thinking)
            lines.append(a)
            calls += cids
            for c in cids:
                lines.append(b.result(c))  # 5 lines of text: over the 2-line limit
        b.assistant(f"done {i}", thinking=thinking)
        turns.append({"lines": lines, "calls": calls})
    if rnd.random() < 0.5:  # a plain last turn sometimes
        b.user("thanks")
        b.assistant("you are welcome")
    return b, turns


def strip_written(src, keep: int, pct, out):
    t = scan(src)
    plan = plan_strip(t, keep, pct)
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    assert check_invariants(out, t) == []
    return out


def classify(src, out, turns) -> list[str]:
    """Each turn with tools as untouched / truncated / removed, from the bytes of `src` and `out` alone."""
    old = {orjson.loads(x)["id"]: x for x in src.read_bytes().splitlines()[1:]}
    new_lines = out.read_bytes().splitlines()[1:]
    new = {orjson.loads(x)["id"]: x for x in new_lines}
    calls_left, results_left = set(), set()
    for x in new_lines:
        m = orjson.loads(x).get("message") or {}
        if m.get("role") == "toolResult":
            results_left.add(m["toolCallId"])
        elif m.get("role") == "assistant":
            calls_left.update(bl["id"] for bl in m["content"] if bl.get("type") == "toolCall")
    out_states = []
    for turn in turns:
        calls = set(turn["calls"])
        if not calls & calls_left and not calls & results_left:
            out_states.append(REMOVED)
        elif calls <= calls_left and calls <= results_left:
            same = [new.get(i) == old[i] for i in turn["lines"]]
            if all(same):
                out_states.append(UNTOUCHED)
            elif not any(same):  # every call message and every result was cut
                out_states.append(TRUNCATED)
            else:
                out_states.append(f"partly truncated {same}")
        else:
            out_states.append(f"partly removed ({len(calls & calls_left)}/{len(calls)} calls left)")
    return out_states


def expected(n: int, keep: int, pct) -> list[str]:
    """The rule, oldest turn first."""
    k = min(n, keep)
    t = math.floor(Fraction(str(pct or 0)) * k / 100)  # exact: floor(truncate_percent % of the kept turns)
    return [REMOVED] * (n - k) + [TRUNCATED] * t + [UNTOUCHED] * (k - t)


@pytest.mark.parametrize("name", sorted(BUILTIN_PRESETS))
def test_builtin_presets_keep_min_n_keep(tmp_path, name):
    """Every built-in preset on every n in 0..2 x keep (extreme: keep 0, so n in 0..4)."""
    _, p = resolve_preset(Settings(), name)
    rnd = random.Random(name)
    for n in range(0, max(2 * p.keep_turns_with_tools, 4) + 1):
        b, turns = build_session(n, rnd)
        src = b.write(tmp_path / f"{name}-{n}.jsonl")
        out = strip_written(src, p.keep_turns_with_tools, p.truncate_percent, tmp_path / f"{name}-{n}.out.jsonl")
        got = classify(src, out, turns)
        assert got == expected(n, p.keep_turns_with_tools, p.truncate_percent), f"preset {name}, n={n}"
        assert got.count(UNTOUCHED) + got.count(TRUNCATED) == min(n, p.keep_turns_with_tools)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.integers(0, 20), pct=st.one_of(st.integers(0, 100), st.sampled_from([12.5, 33.3, 99.9])),
       n_raw=st.integers(0, 40), seed=st.integers(0, 1 << 20))
@example(keep=19, pct=50, n_raw=18, seed=1)  # the case: a custom keep of 19 removed 17 of 18 turns
@example(keep=20, pct=50, n_raw=18, seed=2)  # `default` on 18 turns with tools
def test_custom_presets_keep_min_n_keep(tmp_path, keep, pct, n_raw, seed):
    """Custom presets from the config (any keep, any percent), n in 0..2 x keep."""
    s = Settings(presets={"mine": PresetConfig(keep_turns_with_tools=keep, truncate_percent=pct)})
    _, p = resolve_preset(s, "mine")
    n = n_raw % (2 * keep + 1)
    b, turns = build_session(n, random.Random(seed), thinking=bool(seed & 1))
    src = b.write(tmp_path / "c.jsonl")
    out = strip_written(src, p.keep_turns_with_tools, p.truncate_percent, tmp_path / "c.out.jsonl")
    assert classify(src, out, turns) == expected(n, keep, pct)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 24), keeps=st.lists(st.integers(0, 30), min_size=2, max_size=4, unique=True),
       pct=st.sampled_from([0, 25, 50, 100]), seed=st.integers(0, 1 << 20))
def test_larger_keep_never_removes_more(tmp_path, n, keeps, pct, seed):
    """Monotonic: the turns removed with a larger keep are a subset of those removed with a smaller one."""
    b, turns = build_session(n, random.Random(seed))
    src = b.write(tmp_path / "m.jsonl")
    removed = {}
    for k in sorted(keeps):
        got = classify(src, strip_written(src, k, pct, tmp_path / f"m.{k}.jsonl"), turns)
        removed[k] = {i for i, s in enumerate(got) if s == REMOVED}
        assert len(got) - len(removed[k]) == min(n, k)
    ks = sorted(keeps)
    for a, c in zip(ks, ks[1:]):
        assert removed[c] <= removed[a]
