"""Strip depth and timing by the session's own runs (issue 30.1): pure functions of the estimate, the learned runs
and `now`, and the executor's keep-the-newest-N-results plan."""

from __future__ import annotations

from occd.cleaner import plan_strip
from occd.config import PolicySettings
from occd.policy import budget as b
from occd.policy import runs as r
from occd.policy.cost import DEFAULT_PRICES, Economics, Prices
from occd.policy.strip import decide_budget_strip
from occd.policy.types import SessionState
from occd.transcript import rewrite, scan
from occd.transcript.treebuilder import TreeBuilder

NOW = 1_800_000_000.0
BUDGET = 108000
OVERHEAD = 17000


def _run(i: int, calls: int, chars: int) -> list[dict]:
    """One user turn: a run of `calls` tool calls in a row (one per model request), then the answer."""
    out = [{"role": "user", "content": f"Q{i}: READ {calls} files"}]
    for k in range(calls):
        cid = f"c{i}_{k}"
        out += [{"role": "assistant", "content": [{"type": "toolCall", "id": cid, "name": "read",
                                                   "arguments": {"path": f"/d{i}_{k}"}}]},
                {"role": "toolResult", "toolCallId": cid, "toolName": "read",
                 "content": [{"type": "text", "text": "w" * chars}]}]
    return out + [{"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]}]


def _strip_msgs(msgs: list[dict], keep: int) -> list[dict]:
    """What the executor does to the context: every tool call (and its result) but the newest `keep` removed."""
    ids = [b_["id"] for m in msgs if m["role"] == "assistant" and isinstance(m["content"], list)
           for b_ in m["content"] if b_.get("type") == "toolCall"]
    gone = set(ids[:max(0, len(ids) - keep)])
    out = []
    for m in msgs:
        if m["role"] == "toolResult" and m["toolCallId"] in gone:
            continue
        if m["role"] == "assistant" and isinstance(m["content"], list):
            c = [x for x in m["content"] if not (x.get("type") == "toolCall" and x["id"] in gone)]
            if not c:
                continue
            m = {**m, "content": c}
        out.append(m)
    return out


def _state(**kw):
    return SessionState(agent="main", session_key="agent:main:main", session_id="s1",
                        last_activity=kw.pop("last_activity", NOW - 30), **kw)


def test_estimate_counts_results_not_turns():
    msgs = [m for i in range(3) for m in _run(i, 4, 4000)]
    ctx = b.estimate_context(msgs)
    assert ctx.tool_calls == 12 and ctx.turns_with_tools == 3
    assert [k for k, _ in ctx.turns[0].calls] == [1, 1, 1, 1]
    assert sum(v for _, v in ctx.turns[0].calls) == ctx.turns[0].tools
    # keeping 5 results: the last run's 4 and the newest of the run before
    kept5 = b.estimate_context(_strip_msgs(msgs, 5))
    assert ctx.after_keep_results(5) == kept5.history
    assert ctx.after_keep_results(0) == ctx.after_keep(0)
    assert ctx.after_keep_results(12) == ctx.history
    assert r.turns_holding(ctx, 5) == 2 and r.turns_holding(ctx, 4) == 1


def test_learned_runs_typical_and_large():
    runs = r.learn([1000, 5000, 1200, 900, 1100], [1, 4, 1, 1, 1])
    assert runs.typical == 1320 and runs.large == 6000 and runs.calls == 1.0 and runs.n == 5
    assert r.learn([]) is None
    assert r.learn(list(range(20))).n == r.RUN_HISTORY


def _decide(msgs, sizes, calls, policy, economics=None, last_activity=NOW - 30):
    ctx = b.estimate_context(msgs)
    runs = r.learn(sizes, calls)
    p = b.predict(ctx, BUDGET, OVERHEAD, growth_floor=runs.large)
    target = b.strip_to_target(ctx, p, policy.strip_target_percent, policy.keep_recent_turns)
    depth = r.choose(ctx, p.predicted, p.budget, p.overhead, runs, policy.keep_recent_results)
    return decide_budget_strip(_state(last_activity=last_activity), policy, now=NOW, prediction=p, target=target,
                               economics=economics, runs=runs, depth=depth), ctx, p, runs


def _loop(turn_sizes, calls_per_turn, chars, policy, economics=None):
    """The closed loop in miniature: each turn one run; between runs the policy decides on what it learned and a
    strip is applied as the executor would. Returns (strips, the largest estimate OpenClaw saw, kept results)."""
    msgs: list[dict] = []
    sizes: list[int] = []
    strips, peak, kept = 0, 0, []
    for i, n in enumerate(turn_sizes):
        before = len(msgs)
        msgs += _run(i, calls_per_turn if n is None else n, chars)
        # OpenClaw's mid-run check: the whole run's results are in the estimate before its last request
        peak = max(peak, b.with_margin(b.estimate_context(msgs).history) + OVERHEAD)
        sizes.append(b.estimate_context(msgs[before:]).history)
        d, ctx, p, runs = _decide(msgs, sizes, [1] * len(sizes), policy, economics)
        if d is not None and d.act:
            assert d.action == "strip"
            keep = d.details["keepToolResults"]
            msgs = _strip_msgs(msgs, keep)
            kept.append(keep)
            strips += 1
            assert b.with_margin(b.estimate_context(msgs).history) + OVERHEAD == d.details["predictedAfter"]
    return strips, peak, kept


def test_four_calls_a_turn_gets_few_deep_strips_and_no_compaction():
    policy = PolicySettings(mode="act")
    econ = Economics(prices=Prices(**DEFAULT_PRICES, source="default"))
    strips, peak, kept = _loop([4] * 24, 4, 4000, policy, econ)
    assert peak < BUDGET             # OpenClaw never reached its budget: no compaction
    assert 1 <= strips <= 24 // 4    # at most one strip (one cache break) per 4 turns
    assert set(kept) == {5}          # the newest 5 results (not turns) whole, never fewer


def test_a_session_with_one_huge_run_gets_room_for_it():
    policy = PolicySettings(mode="act")
    # small runs, then one of 30 calls; learned, it is the session's large run from then on
    sizes = [None] * 6 + [30] + [None] * 10
    strips, peak, kept = _loop(sizes, 1, 4000, policy)
    assert peak < BUDGET
    # 24 small runs in the context; among the last 8 runs learned, one of 20 calls (since stripped)
    msgs = [m for i in range(24) for m in _run(i, 1, 4000)]
    small = b.estimate_context(_run(0, 1, 4000)).history
    huge = b.estimate_context(_run(0, 20, 4000)).history
    d, ctx, p, runs = _decide(msgs, [small] * 4 + [huge] + [small] * 3, [1] * 8, policy)
    assert runs.large == b.with_margin(huge) and runs.typical == b.with_margin(small)
    # due although a typical run would fit under the threshold: the large one would not fit under the budget
    assert p.predicted + runs.typical < BUDGET * 0.8 and p.predicted + runs.large >= BUDGET
    d_typical, *_ = _decide(msgs, [small] * 8, [1] * 8, policy)
    assert d_typical is None
    assert d is not None and d.action == "strip" and d.act
    assert d.details["predictedAfter"] + runs.large < BUDGET
    assert d.details["keepToolResults"] == 5 and d.details["roomForLargeRun"] is True


def test_fewer_than_five_results_only_when_openclaw_would_compact_with_them():
    msgs = [m for i in range(4) for m in _run(i, 4, 40000)]  # results of ~24k each
    ctx = b.estimate_context(msgs)
    one = b.with_margin(b.estimate_context(_run(9, 1, 40000)[1:3]).history)
    runs = r.Runs(typical=one, large=one, calls=1, n=4)
    pred = b.with_margin(ctx.history) + OVERHEAD
    d = r.choose(ctx, pred, BUDGET, OVERHEAD, runs, 5)
    # five would be over the budget at OpenClaw's next check: as many as leave room for the next run
    assert b.with_margin(ctx.after_keep_results(5)) + OVERHEAD >= BUDGET
    assert d.room and d.keep_results < 5 and d.after + runs.large < BUDGET
    assert b.with_margin(ctx.after_keep_results(d.keep_results + 1)) + OVERHEAD + runs.large >= BUDGET
    # five pass the next check but leave no room for a large run: they stay (stripped again after the next run)
    d3 = r.choose(ctx, pred, BUDGET, OVERHEAD, r.Runs(typical=one, large=BUDGET // 2), 3)
    assert d3.keep_results == 3 and not d3.room and d3.after < BUDGET
    big = BUDGET - b.with_margin(ctx.after_keep_results(0)) - 1  # only a strip of every result passes the check
    assert r.choose(ctx, 0, BUDGET, big, r.Runs(BUDGET, BUDGET), 5).keep_results == 0
    assert r.choose(ctx, 0, BUDGET, BUDGET, r.Runs(BUDGET, BUDGET), 5).keep_results is None


def test_due_when_the_large_run_would_not_fit_not_sooner():
    runs = r.Runs(typical=5000, large=20000)
    assert not r.due(60000, BUDGET, runs, 80)
    assert not r.due(82000, BUDGET, runs, 80)            # a typical run would pass 80%: not yet
    assert r.due(88000, BUDGET, runs, 80)               # the large run reaches the budget
    assert r.due(87000, BUDGET, r.Runs(100, 100), 80)    # already past 80%


def test_strips_are_priced_against_openclaw_compacting():
    msgs = [m for i in range(10) for m in _run(i, 4, 4000)]
    ctx = b.estimate_context(msgs)
    runs = r.learn([b.estimate_context(_run(0, 4, 4000)).history] * 5, [4] * 5)
    pred = b.with_margin(ctx.history) + OVERHEAD
    depth = r.choose(ctx, pred, BUDGET, OVERHEAD, runs)
    p = Prices(**DEFAULT_PRICES, source="default")
    c = r.compare(pred, depth, BUDGET, OVERHEAD, runs, p, turns=12)
    assert c.compactions >= 1 and c.strips >= 1 and c.strips <= 12 // 4 + 1
    assert c.strip_usd < c.compact_usd
    shallow = r.Depth(40, pred - 1000, 1000, 0, True, 5)  # a strip that hardly helps: one every turn
    assert r.compare(pred, shallow, BUDGET, OVERHEAD, runs, p, turns=12).strip_usd > c.strip_usd


def test_plan_keeps_the_newest_results_across_turns(tmp_path):
    tb = TreeBuilder()
    tb.model()
    for i in range(3):  # runs of 4 calls, one per assistant message
        tb.user(f"q{i}")
        for k in range(4):
            _, (c,) = tb.assistant(None, calls=1)
            tb.result(c)
        tb.assistant(f"answer {i}")
    t = scan(tb.write(tmp_path / "s.jsonl"))
    plan = plan_strip(t, 0, 0, keep_results=5)
    assert plan.tool_calls_preserved == 5 and plan.tool_calls_removed == 7
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    t2 = scan(out)
    assert sum(len(e.call_ids) for e in t2.active_path()) == 5
    assert not plan_strip(t2, 0, 0, keep_results=5).changed
    assert plan_strip(t, 0, 0, keep_results=0).tool_calls_removed == 12


def test_window_too_small_is_verified_then_done_once():
    kw = dict(overhead=17000, budget=28000, window=48000, fresh=25000, target=14000, removed=9000, after=20000)
    assert r.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=None, **kw) is None
    assert r.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=90.0, **kw) is None
    ws = r.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=130.0, **kw)
    assert ws is not None and not ws.strongest_done
    assert "17000 tokens" in ws.message() and "28000-token budget" in ws.message() and "48000" in ws.message()
    assert r.window_too_small(strip_times=[100.0, 200.0], strongest_times=[200.0], last_compaction=130.0,
                              **kw).strongest_done
    # a fresh session would reach the target (a larger window): not too small, whatever happened
    assert r.window_too_small(strip_times=[100.0], strongest_times=[100.0], last_compaction=130.0,
                              **{**kw, "fresh": 13000}) is None
    # the policy: the strongest strip once, then nothing
    policy = PolicySettings(mode="act")
    msgs = [m for i in range(3) for m in _run(i, 1, 16000)]
    ctx = b.estimate_context(msgs)
    p = b.predict(ctx, 28000, 17000, growth_floor=9700)
    target = b.strip_to_target(ctx, p, 50, 5)
    d = decide_budget_strip(_state(), policy, now=NOW, prediction=p, target=target, too_small=ws)
    assert d.act and d.details["keepToolResults"] == 0 and "too small" in d.reason
    done = r.WindowTooSmall(**{**kw, "strongest_done": True})
    assert decide_budget_strip(_state(), policy, now=NOW, prediction=p, target=target, too_small=done) is None
