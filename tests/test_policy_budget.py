"""The budget trigger, strip-to-target and spiral/blocked detection as pure functions of observations and `now`."""

from __future__ import annotations

import math

import pytest

from hypothesis import given, settings, strategies as st

from occd.config import PolicySettings
from occd.policy import budget as b
from occd.policy import emergency as em
from occd.policy.strip import decide_budget_strip
from occd.policy.types import SessionState

NOW = 1_800_000_000.0


# ---- OpenClaw's budget and estimate rules (the numbers come from its dist code, stated here by hand) ---------

def test_prompt_budget_as_openclaw_resolves_it():
    assert b.prompt_budget(128000) == 108000          # reserve = max(16384, floor 20000)
    assert b.prompt_budget(64000) == 44000
    assert b.prompt_budget(200000, reserve_tokens=30000) == 170000
    assert b.prompt_budget(128000, reserve_tokens=5000, reserve_floor=0) == 123000
    assert b.prompt_budget(16000) == 8000              # the reserve is capped so min(8000, window/2) stays
    assert b.prompt_budget(10000) == 5000


def test_message_estimates():
    # tool result: 12 per message + 6 per block + max(chars/2, chars/4) + the tool name at chars/3
    assert b.message_tokens({"role": "toolResult", "toolName": "read",
                             "content": [{"type": "text", "text": "x" * 1000}]}) == 12 + 6 + 500 + 2
    assert b.message_tokens({"role": "user", "content": "abcd" * 10}) == 12 + 10
    # a tool call: 6 + name at chars/3 + JSON arguments at chars/3 ('{"path":"/x"}' is 13 characters)
    assert b.message_tokens({"role": "assistant", "content": [
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "/x"}}]}) == 12 + 6 + 2 + 5
    assert b.message_tokens({"role": "assistant", "content": [{"type": "image"}]}) == 12 + 2000
    # CJK characters count as four
    assert b.message_tokens({"role": "user", "content": "\u4e2d" * 10}) == 12 + 10


def _turn(i: int, result_chars: int = 4000) -> list[dict]:
    return [{"role": "user", "content": f"Q{i}: READ doc{i}"},
            {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{i}", "name": "read",
                                               "arguments": {"path": f"/d{i}"}}]},
            {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
             "content": [{"type": "text", "text": "w" * result_chars}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]}]


def test_turn_grouping_and_strippable_parts():
    msgs = [m for i in range(3) for m in _turn(i)]
    ctx = b.estimate_context(msgs)
    assert len(ctx.turns) == 3 and ctx.turns_with_tools == 3
    assert ctx.history == sum(b.message_tokens(m) for m in msgs)
    # what a strip removes from a turn: the tool-call-only assistant message and the result, nothing else
    t0 = _turn(0)
    assert ctx.turns[0].tools == b.message_tokens(t0[1]) + b.message_tokens(t0[2])
    assert ctx.after_keep(1) == ctx.history - ctx.turns[0].tools - ctx.turns[1].tools


def test_context_messages_follow_the_latest_compaction_and_the_active_branch():
    e = [{"type": "session", "id": "s"},
         {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "one"}},
         {"type": "message", "id": "b", "parentId": "a", "message": {"role": "assistant", "content": "r1"}},
         {"type": "message", "id": "c", "parentId": "b", "message": {"role": "user", "content": "two"}},
         {"type": "message", "id": "x", "parentId": "c", "message": {"role": "assistant", "content": "abandoned"}},
         {"type": "message", "id": "d", "parentId": "c", "message": {"role": "assistant", "content": "r2"}},
         {"type": "compaction", "id": "k", "parentId": "d", "summary": "S", "firstKeptEntryId": "c"},
         {"type": "message", "id": "f", "parentId": "k", "message": {"role": "user", "content": "three"}}]
    msgs = b.context_messages(e)
    assert [m.get("content") or m.get("summary") for m in msgs] == ["S", "two", "r2", "three"]
    assert msgs[0]["role"] == "compactionSummary"


def test_learned_overhead_and_prediction():
    msgs = [m for i in range(4) for m in _turn(i)]
    ctx = b.estimate_context(msgs)
    # OpenClaw checked before the 4th turn with 12 messages: its estimate was 1.2 x those + 9,500
    first12 = sum(b.message_tokens(m) for m in msgs[:12])
    status = {"estimatedPromptTokens": math.ceil(first12 * 1.2) + 9500, "messageCount": 12}
    assert b.learn_overhead(status, ctx) == 9500
    assert b.learn_overhead({"estimatedPromptTokens": 100, "messageCount": 99}, ctx) is None  # does not fit
    assert b.learn_overhead(None, ctx) is None
    # the check that made OpenClaw compact counted the history from before the compaction: not learned from
    assert b.learn_overhead({**status, "shouldCompact": True, "route": "compact_only"}, ctx) is None
    assert b.learn_overhead({**status, "shouldCompact": False, "route": "fits"}, ctx) == 9500
    # an overhead larger than the whole budget is another history's record
    assert b.learn_overhead({**status, "promptBudgetBeforeReserve": 9000}, ctx) is None
    assert b.learn_overhead({**status, "promptBudgetBeforeReserve": 40000}, ctx) == 9500
    p = b.predict(ctx, 40000, 9500)
    assert p.predicted == math.ceil(ctx.history * 1.2) + 9500
    assert p.growth == math.ceil(max(t.total for t in ctx.turns[-3:]) * 1.2)


# ---- strip to target: the gentlest strip under the target, checked against the rule stated directly ---------

@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 30000), st.booleans()), min_size=0, max_size=12),
       overhead=st.integers(0, 20000), budget=st.integers(5000, 150000), target_pct=st.integers(10, 95))
def test_strip_to_target_is_the_gentlest_that_fits(sizes, overhead, budget, target_pct):
    msgs = []
    for i, (chars, tools) in enumerate(sizes):
        t = _turn(i, chars)
        msgs += t if tools else [t[0], t[3]]
    ctx = b.estimate_context(msgs)
    p = b.predict(ctx, budget, overhead)
    r = b.strip_to_target(ctx, p, target_pct)
    target = math.floor(budget * target_pct / 100)
    # independently: the estimate when the newest k turns with tools keep theirs and the others lose them
    turns, cur = [], None
    for m in msgs:
        if m["role"] == "user":
            cur = {"all": 0, "tools": 0, "has": False}
            turns.append(cur)
        cur["all"] += b.message_tokens(m)
        if m["role"] == "toolResult" or (m["role"] == "assistant" and m["content"][0]["type"] == "toolCall"):
            cur["tools"] += b.message_tokens(m)
            cur["has"] = True
    with_tools = [t for t in turns if t["has"]]

    def est(k):
        dropped = with_tools[:len(with_tools) - k] if k < len(with_tools) else []
        return math.ceil((sum(t["all"] for t in turns) - sum(t["tools"] for t in dropped)) * 1.2) + overhead

    fitting = [k for k in range(len(with_tools) + 1) if est(k) <= target]
    if not fitting:
        assert not r.reachable and r.predicted_after == est(0)
    else:
        assert r.reachable and r.keep_turns_with_tools == max(fitting)
        assert r.predicted_after == est(max(fitting)) <= target


# ---- the decision ------------------------------------------------------------------------------------------

def _state(**kw):
    base = dict(agent="main", session_key="agent:main:main", session_id="s1", last_activity=NOW - 3600)
    base.update(kw)
    return SessionState(**base)


def _pred(predicted, growth, budget=108000, overhead=9500):
    return b.Prediction(predicted, budget, growth, overhead, "session")


def test_trigger_fires_on_the_estimate_at_the_check_occd_must_get_ahead_of():
    # a share under 100% is an earlier trigger, on the same check (here mid-run checks and a turn to spare: two
    # runs ahead)
    pol = PolicySettings(mode="act", min_idle_minutes=0, strip_at_budget_percent=80)
    tgt = b.StripTarget(2, 50000, 54000, 30000)
    assert decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(66000, 10000), target=tgt) is None  # 79.6%
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(67000, 10000), target=tgt)  # 80.6%
    assert d.action == "strip" and d.act and d.details["keepTurnsWithTools"] == 2
    # observe mode says what it would do
    d = decide_budget_strip(_state(), PolicySettings(min_idle_minutes=0, strip_at_budget_percent=80), now=NOW,
                            prediction=_pred(77000, 10000), target=tgt)
    assert d.would_do and "keeping 2 turns" in d.reason
    # a run in progress: deferred
    d = decide_budget_strip(_state(running=True), pol, now=NOW, prediction=_pred(77000, 10000), target=tgt)
    assert d.deferred
    # no strip reaches the target: rotate
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(90000, 10000),
                            target=b.StripTarget(None, 60000, 54000, 30000, False))
    assert d.action == "rotate" and d.act


def test_emergencies_act_without_the_idle_wait_and_the_hourly_limit():
    pol = PolicySettings(mode="act", min_idle_minutes=10, max_actions_per_hour=1)
    tgt = b.StripTarget(1, 30000, 54000, 30000)
    e = em.Emergency(em.BLOCKED, "overflow notice")
    d = decide_budget_strip(_state(last_activity=NOW - 5), pol, now=NOW, prediction=_pred(50000, 10000),
                            target=tgt, emergency=e, recent_action_times=[NOW - 60])
    assert d.act and d.details["emergency"] == "BLOCKED" and d.policy == "emergency:blocked"
    # the same session without the emergency: under the threshold, nothing
    assert decide_budget_strip(_state(last_activity=NOW - 5), pol, now=NOW, prediction=_pred(50000, 10000),
                               target=tgt) is None
    # blocked but nothing to strip (already under the target): rotate; a spiral under the target: wait
    none = b.StripTarget(0, 20000, 54000, 0, True)
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(20000, 10000), target=none, emergency=e)
    assert d.action == "rotate"
    assert decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(20000, 10000), target=none,
                               emergency=em.Emergency(em.SPIRAL, "x")) is None


def test_a_spiral_right_after_a_compaction_gets_no_strip_that_removes_nothing_sent():
    """What OpenClaw sends after it compacted is its summary and the tail it kept: when keeping the newest turns
    removes nothing of that (over the target, with a turn of room), a spiral gets no strip (it only rewrote older
    entries OpenClaw no longer sends). Seen on the synthetic trace on 2026-11-28: two such strips, 0 tokens off."""
    pol = PolicySettings(mode="act", min_idle_minutes=0)
    spiral = em.Emergency(em.SPIRAL, "compacted on consecutive turns")
    kept_tail = b.StripTarget(1, 58817, 54000, 0, False, safe_keep=1, floor=1)
    assert decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(58817, 26682), target=kept_tail,
                               emergency=spiral) is None
    # with something to remove from what is sent, the spiral is stripped at once
    some = b.StripTarget(1, 40000, 54000, 18000, False, safe_keep=1, floor=1)
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(58817, 26682), target=some, emergency=spiral)
    assert d is not None and d.action == "strip" and d.details["emergency"] == "SPIRAL"
    # the database era: a spiral is a rotation whatever a strip would remove
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(58817, 26682), target=kept_tail,
                            emergency=spiral, strip_emergencies=False)
    assert d is not None and d.action == "rotate"


# ---- spirals and blocked sessions --------------------------------------------------------------------------

def _msg(role, text="", usage=None):
    m = {"role": role, "content": [{"type": "text", "text": text}] if role == "assistant" else text}
    if usage is not None:
        m["usage"] = usage
    return {"type": "message", "message": m}


ZERO = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}


def test_blocked_by_the_overflow_notice():
    entries = [_msg("user", "Q1"), _msg("assistant", "ok", {"input": 10, "output": 2}),
               {"type": "compaction"},
               _msg("assistant", "Context overflow: prompt too large for the model. Try /reset (or /new) ...", ZERO)]
    e = em.detect(em.observe_entries(entries), NOW)
    assert e is not None and e.kind == em.BLOCKED
    # the next real reply ends it
    entries += [_msg("user", "Q2"), _msg("assistant", "fine", {"input": 10, "output": 2})]
    assert em.detect(em.observe_entries(entries), NOW) is None


def test_blocked_by_a_refusal():
    entries = [_msg("user", "Q1"), _msg("assistant", "Compaction skipped: session was already compacted recently", ZERO)]
    assert em.detect(em.observe_entries(entries), NOW).kind == em.BLOCKED


def test_spiral_is_compactions_on_consecutive_turns():
    def run(turns_with_compaction, total):
        entries = []
        for i in range(1, total + 1):
            if i in turns_with_compaction:
                entries.append({"type": "compaction"})
            entries += [_msg("user", f"Q{i}"), _msg("assistant", "ok", {"input": 5})]
        return em.detect(em.observe_entries(entries), NOW)

    assert run({5}, 8) is None                       # one compaction is not a spiral
    assert run({5, 20}, 22) is None                  # far apart
    assert run({6, 7}, 8).kind == em.SPIRAL          # consecutive, recent
    assert run({6, 7}, 20) is None                   # consecutive but long ago
    # an overflow-retry checkpoint with a recent compaction
    entries = [_msg("user", "Q1"), {"type": "compaction"}, _msg("user", "Q2"), _msg("assistant", "ok", {"input": 5})]
    o = em.observe_entries(entries)
    from dataclasses import replace

    assert em.detect(o, NOW) is None
    assert em.detect(replace(o, checkpoints=(("overflow-retry", NOW - 60),)), NOW).kind == em.SPIRAL
    assert em.detect(replace(o, checkpoints=(("overflow-retry", NOW - 7200),)), NOW) is None


def test_unreachable_target_rotates_only_when_a_fresh_session_would_reach_it():
    pol = PolicySettings(mode="act", min_idle_minutes=0)
    out = b.StripTarget(None, 60000, 54000, 30000, False)
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(90000, 10000), target=out,
                            fresh_session_tokens=30000)
    assert d.action == "rotate"
    # the prompt overhead alone is over the target: a rotation cannot reach it; the strongest strip instead
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(90000, 10000), target=out,
                            fresh_session_tokens=56000)
    assert d.action == "strip" and d.details["keepTurnsWithTools"] == 0


def test_growth_floor_keeps_the_margin_after_a_strip():
    msgs = [m for i in range(3) for m in _turn(i)]
    ctx = b.estimate_context(msgs)
    stripped = b.estimate_context([m for m in msgs if m["role"] in ("user",) or
                                   (m["role"] == "assistant" and m["content"][0]["type"] == "text")])
    full = b.predict(ctx, 108000, 9500).growth
    assert b.predict(stripped, 108000, 9500).growth < full / 10      # the file alone forgets the turns' size
    assert b.predict(stripped, 108000, 9500, growth_floor=full).growth == full


def test_slim_entries_estimate_as_the_full_ones():
    entries, parent = [], None
    for i, m in enumerate([m for k in range(4) for m in _turn(k, 3000 * (k + 1))]):
        entries.append({"type": "message", "id": f"i{i}", "parentId": parent, "message": m})
        parent = f"i{i}"
    entries.append({"type": "custom_message", "id": "cm", "parentId": parent, "content": "note " * 50})
    entries.append({"type": "compaction", "id": "k", "parentId": "cm", "summary": "S" * 400,
                    "firstKeptEntryId": "i8"})
    entries.append({"type": "message", "id": "z", "parentId": "k",
                    "message": {"role": "assistant", "content": [{"type": "text", "text": "Context overflow: x"}],
                                "usage": {"input": 0, "output": 0}}})
    full = b.estimate_context(b.context_messages(entries))
    slim = b.estimate_context(b.context_messages([b.slim_entry(e) for e in entries]))
    assert full == slim and full.turns_with_tools == 2
    assert em.observe_entries(entries) == em.observe_entries([b.slim_entry(e) for e in entries])


def test_trigger_keeps_a_turn_to_spare_when_turns_are_large_for_the_window():
    pol = PolicySettings(mode="act", min_idle_minutes=0)
    tgt = b.StripTarget(1, 19700, 22000, 9700)
    # 64k window: budget 44k, turns of 9.7k. 24.8k now: 78% after the next turn, but two turns reach 44.2k
    p = _pred(24800, 9700, budget=44000)
    assert p.after_next_percent < 80 and b.should_strip(p) and b.should_strip(p, 100)
    assert decide_budget_strip(_state(), pol, now=NOW, prediction=p, target=tgt).act
    assert not b.should_strip(_pred(24000, 9700, budget=44000))


def test_the_check_occd_must_get_ahead_of_depends_on_openclaws_checks_and_the_sessions_gaps():
    from dataclasses import replace

    # budget 108k, runs of 9k, prompt overhead 9.5k. OpenClaw checks before each prompt and at each run's end
    # (its default) and the user leaves occd time after each run (spare 0): occd strips only when the next
    # prompt's check would compact
    p = replace(_pred(100000, 9000), midrun=False, spare=0)
    assert p.check() == ("prompt", 0, 100000) and not b.should_strip(p) and b.urgency(p) is None
    p = replace(p, predicted=108000)
    assert b.should_strip(p) and b.urgency(p) == "next-turn"
    # a follow-up may come before occd acts (spare 1): a run earlier, and that is the turn to spare
    p = replace(_pred(100000, 9000), midrun=False, spare=1)
    assert p.check() == ("prompt", 1, 109000) and b.should_strip(p) and b.urgency(p) == "no-turn-to-spare"
    assert not b.should_strip(replace(p, predicted=98000))
    # OpenClaw checks mid-run (compaction.midTurnPrecheck on): the next run's end is a check too
    p = replace(_pred(100000, 9000), midrun=True, spare=0)
    assert p.check() == ("midrun", 1, 109000) and b.should_strip(p) and b.urgency(p) == "next-turn"
    assert replace(p, spare=1).check() == ("midrun", 2, 118000)
    assert b.should_strip(replace(p, predicted=90000, spare=1))
    assert not b.should_strip(replace(p, predicted=90000))
    # OpenClaw checks the history again at a run's end (without the prompt overhead): a run larger than the
    # overhead makes that the first check
    p = replace(_pred(100000, 20000), midrun=False, spare=0)
    assert [c[0] for c in p.checks()] == ["prompt", "end"] and p.check() == ("end", 1, 110500)
    assert b.should_strip(p) and b.urgency(p) == "next-turn"
    pol = PolicySettings(mode="act", min_idle_minutes=0)
    d = decide_budget_strip(_state(), pol, now=NOW, target=b.StripTarget(2, 50000, 54000, 30000), prediction=p)
    assert d.act and "at the next run's end 102%" in d.reason
    # the reasons say which check
    pol = PolicySettings(mode="act", min_idle_minutes=0)
    tgt = b.StripTarget(2, 50000, 54000, 30000)
    d = decide_budget_strip(_state(), pol, now=NOW, target=tgt,
                            prediction=replace(_pred(108500, 9000), midrun=False, spare=0))
    assert d.act and "at its next prompt 100%" in d.reason and "turn to spare" not in d.reason
    d = decide_budget_strip(_state(), pol, now=NOW, target=tgt,
                            prediction=replace(_pred(100000, 9000), midrun=False, spare=1))
    assert d.act and "after the next run 101%" in d.reason and "turn to spare" in d.reason


def test_reply_gaps_and_the_turns_to_spare():
    def m(role, ts, tools=False):
        return {"role": role, "_ts": ts, "_tools": tools, "_est": 10}

    msgs = [m("user", 0), m("assistant", 5, True), m("toolResult", 6), m("assistant", 8),
            m("user", 40), m("assistant", 45),
            m("user", 46), m("assistant", 50),           # a follow-up queued while the agent worked
            m("user", 90), m("assistant", 95), {"role": "user", "_est": 1}]   # no time: not a gap
    assert b.reply_gaps(msgs) == (32.0, 1.0, 40.0)
    assert b.reply_gaps(msgs, 2) == (1.0, 40.0)
    assert b.spare_runs((32.0, 1.0, 40.0), 12) == 1
    assert b.spare_runs((32.0, 20.0, 40.0), 12) == 0
    assert b.spare_runs((32.0, 40.0), 12) == 1                # too few runs seen to tell
    assert b.spare_runs((32.0, 11.0, 40.0, 30.0), 12) == 1    # one of the last three too short


# ---- issue 19: urgent strips at once, gentle ones when the prompt cache has expired; keep the newest results -----

def test_urgency_is_a_compaction_within_the_next_turn_or_two():
    # (mid-run checks and a turn to spare, Prediction's defaults)
    assert b.urgency(_pred(100000, 9000)) == "next-turn"            # 109k >= 108k: compacts during the next turn
    assert b.urgency(_pred(90000, 9000)) == "no-turn-to-spare"      # 108k after two turns
    assert b.urgency(_pred(80000, 9000)) is None                    # 98k after two turns: room for a gentle strip


def test_urgent_strip_happens_as_soon_as_the_run_ends_gentle_waits_for_the_cache():
    pol = PolicySettings(mode="act")                                # defaults: cache_ttl_minutes 5
    tgt = b.StripTarget(5, 50000, 54000, 30000)
    just_ended = _state(last_activity=NOW - 4)                      # the run ended 4 s ago, its lock released
    d = decide_budget_strip(just_ended, pol, now=NOW, prediction=_pred(90000, 9000), target=tgt)
    assert d.act and d.details["urgency"] == "no-turn-to-spare"
    pol = PolicySettings(mode="act", strip_at_budget_percent=80)
    gentle = _pred(80000, 9000)                                     # 91% two runs ahead (>= 80%): fires, not urgent
    d = decide_budget_strip(just_ended, pol, now=NOW, prediction=gentle, target=tgt)
    assert d.deferred and "prompt cache" in d.reason and "urgency" not in d.details
    assert d.details["dueAt"] == NOW - 4 + 5 * 60                  # the daemon looks again when the cache expired
    d = decide_budget_strip(_state(last_activity=NOW - 301), pol, now=NOW, prediction=gentle, target=tgt)
    assert d.act                                                    # quiet longer than the cache lives: free
    # a run in progress (its lock held) defers even an urgent strip, with no due time (the run's end wakes us)
    d = decide_budget_strip(_state(last_activity=NOW - 1, running=True), pol, now=NOW,
                            prediction=_pred(100000, 9000), target=tgt)
    assert d.deferred and "run is in progress" in d.reason and "dueAt" not in d.details
    # the deprecated min_idle_minutes still replaces the cache lifetime where a config sets it
    assert PolicySettings(min_idle_minutes=0).gentle_wait_minutes() == 0
    assert PolicySettings(cache_ttl_minutes=60).gentle_wait_minutes() == 60


def _ctx_turns(n, total=4000, tools=3500):
    return b.ContextEstimate(0, tuple(b.TurnEstimate(total, tools, True) for _ in range(n)))


def test_strip_to_target_never_removes_the_newest_turns_results():
    ctx = _ctx_turns(12)                                            # 48k history, 3.5k strippable per turn
    p = b.predict(ctx, 108000, 9500)
    free = b.strip_to_target(ctx, p, 30, keep_recent=0)
    assert free.reachable and free.keep_turns_with_tools < 5
    kept = b.strip_to_target(ctx, p, 30, keep_recent=5)
    assert not kept.reachable and kept.keep_turns_with_tools is None
    assert kept.predicted_after == b.with_margin(ctx.after_keep(5)) + 9500
    assert b.strip_to_target(ctx, p, 50, keep_recent=5).keep_turns_with_tools >= 5
    few = _ctx_turns(3)                                             # fewer turns than the floor: all kept
    assert b.strip_to_target(few, b.predict(few, 108000, 9500), 1, keep_recent=5).removed == 0


def test_unreachable_while_keeping_the_newest_keeps_them_while_openclaw_has_room():
    pol = PolicySettings(mode="act")
    # keeping the newest 5 is over the target but leaves OpenClaw a turn of room: strip the rest, keep them,
    # even where a rotation would reach the target (its seed would leave the model only the last exchanges)
    roomy = b.StripTarget(None, 60000, 54000, 20000, False, (), 5, 5)
    for fresh in (30000, 56000):
        d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(100000, 9000), target=roomy,
                                fresh_session_tokens=fresh)
        assert d.action == "strip" and d.details["keepTurnsWithTools"] == 5 and d.act
    # keeping 5 would still leave OpenClaw compacting (only 3 are safe): keep the 3 and strip the rest, also where
    # a rotation would reach the target (its seed keeps only the last exchanges; a strip keeps every question)
    tight = b.StripTarget(None, 60000, 54000, 20000, False, (), 3, 5)
    for fresh in (30000, 56000):
        d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(100000, 9000), target=tight,
                                fresh_session_tokens=fresh)
        assert d.action == "strip" and d.details["keepTurnsWithTools"] == 3 and d.act
    # no strip leaves OpenClaw room: a rotation when a fresh session reaches the target
    d = decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(100000, 9000),
                            target=b.StripTarget(None, 60000, 54000, 20000, False, (), None, 5),
                            fresh_session_tokens=30000)
    assert d.action == "rotate" and d.act
    # nothing older to strip and room left: nothing to do
    none_older = b.StripTarget(None, 60000, 54000, 0, False, (), 5, 5)
    assert decide_budget_strip(_state(), pol, now=NOW, prediction=_pred(100000, 9000), target=none_older,
                               fresh_session_tokens=30000) is None


def test_keeping_the_newest_never_costs_a_compaction():
    """A small window where 5 whole results leave OpenClaw compacting anyway, and a fresh session is over the
    target too: keep as many of the newest as still leave it a turn of room, strip the rest."""
    ctx = _ctx_turns(6, total=4600, tools=4400)
    p = b.predict(ctx, 28000, 14500)
    t = b.strip_to_target(ctx, p, 50, keep_recent=5)
    assert not t.reachable and t.safe_keep is not None and t.safe_keep < 5
    assert b.with_margin(ctx.after_keep(t.safe_keep)) + 14500 + p.growth < 28000
    assert b.with_margin(ctx.after_keep(t.safe_keep + 1)) + 14500 + p.growth >= 28000
    d = decide_budget_strip(_state(), PolicySettings(mode="act"), now=NOW, prediction=p, target=t,
                            fresh_session_tokens=21000)
    assert d.action == "strip" and d.details["keepTurnsWithTools"] == t.safe_keep and d.act


def test_no_room_even_keeping_none_and_no_fresh_session_either_strips_everything():
    """A 40k window (budget 20k) with 14.5k of prompt overhead, three turns of 9k results, blocked: no strip leaves
    OpenClaw a turn of room and a rotated session is over the target too: the strongest strip (keep none), as
    before keep_recent_turns — never a rotation that would not help (the e2e blocked-session test's shape)."""
    ctx = _ctx_turns(3, total=9200, tools=9000)
    p = b.predict(ctx, 20000, 14500)
    t = b.strip_to_target(ctx, p, 50, keep_recent=5)
    assert t.safe_keep is None and t.removed == 0 and t.removed_all > 0
    d = decide_budget_strip(_state(), PolicySettings(mode="act"), now=NOW, prediction=p, target=t,
                            emergency=em.Emergency("BLOCKED", "overflow notice"), fresh_session_tokens=20500)
    assert d.action == "strip" and d.details["keepTurnsWithTools"] == 0 and d.act


def test_the_runs_end_counts_what_the_provider_counts_when_that_is_more():
    from dataclasses import replace

    assert b.provider_count({"totalTokens": 27010, "input": 1}) == 27010
    assert b.provider_count({"input": 100, "output": 5, "cacheRead": 900, "cacheWrite": 0}) == 1005
    assert b.provider_count(None) == 0 and b.provider_count({"totalTokens": True}) == 0
    msgs = [{"role": "user", "_est": 100}, {"role": "assistant", "_est": 50, "usage": {"totalTokens": 900}},
            {"role": "user", "_est": 200}, {"role": "assistant", "_est": 10, "usage": {"input": 2000}},
            {"role": "toolResult", "_est": 4000}]
    ctx = b.estimate_context(msgs)
    assert b.last_count(msgs, ctx) == (2000, 350)      # the newest request with a count, and what it was sent
    assert b.last_count(msgs[:1], ctx) is None
    assert b.count_ratio((2000, 350), 1000) == 1.0                           # 2000 / 1420, capped at 1
    assert b.count_ratio((700, 350), 1000) == pytest.approx(700 / 1420)
    assert b.count_ratio(None, 1000) == 0.0
    # a 48k window (budget 28k) whose system prompt and tools the provider counts at 22k where OpenClaw's estimate
    # says 9.7k: with one 5k result (13k estimated) after the history of 23k, the estimate's checks leave room,
    # the provider's count at the run's end does not (2026.7.1: it compacted there)
    p = replace(_pred(23000, 13000, budget=28000, overhead=9700), midrun=False, spare=0)
    assert not b.should_strip(p)
    p = replace(p, count_ratio=1.0)
    assert p.check() == ("end", 1, 36000) and b.should_strip(p) and b.urgency(p) == "next-turn"
    # where the provider counts about half of the estimate (tool results at chars/4 of the chars/2 estimated) it
    # is not the first check
    assert not b.should_strip(replace(p, count_ratio=0.54))
