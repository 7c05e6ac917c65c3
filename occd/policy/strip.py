"""When the daemon strips a session: context use past `strip_at_context_percent` of the window, the session
idle, not excluded, under the agent's hourly action limit. Observe mode marks the decision would-do."""

from __future__ import annotations

from typing import Sequence

from occd.config import PolicySettings
from occd.policy.types import Decision, SessionState, excluded, idle_check

POLICY = "strip_at_context_percent"


def pre_prompt(tokens: int, budget: int) -> str:
    """OpenClaw's pre-prompt estimate (the whole prompt: system prompt and tools included), named as such: it is
    not the context figure `occd list`/`info`/`status` show (last usage + chars/4 after it, against the window)."""
    return f"OpenClaw's pre-prompt estimate {tokens} ({100.0 * tokens / budget:.0f}% of its budget {budget})"


def due_at(s: SessionState, wait_minutes: float) -> dict:
    """{"dueAt": when a deferred gentle action becomes due} (the daemon looks again then), or {} when unknown
    or when a run is what it waits for (the run's end wakes the daemon)."""
    if s.running or s.pending_tool_call or s.last_activity is None:
        return {}
    return {"dueAt": s.last_activity + wait_minutes * 60}


def recent_count(times: Sequence[float], now: float, window_s: float) -> int:
    return sum(1 for t in times if now - window_s < t <= now)


def decide_strip(s: SessionState, policy: PolicySettings, *, now: float, window_tokens: int | None = None,
                 recent_action_times: Sequence[float] = ()) -> Decision | None:
    """A strip decision for one session, or None when there is nothing to do.

    `window_tokens` is the model's context window (falls back to the session's own); `recent_action_times`
    are the agent's automatic actions (any kind, epoch seconds) for max_actions_per_hour."""
    if s.archived or excluded(s.session_key, policy.exclude):
        return None
    pct = s.context_percent(window_tokens)
    if pct is None or pct < policy.strip_at_context_percent:
        return None
    base = dict(action="strip", policy=POLICY, agent=s.agent, session_id=s.session_id, session_key=s.session_key)
    details = {"contextPercent": round(pct, 1), "threshold": policy.strip_at_context_percent,
               "preset": policy.strip_preset, "contextTokens": s.context_tokens,
               "contextWindow": window_tokens or s.context_window}
    reason = f"context {pct:.0f}% of the window >= {policy.strip_at_context_percent:g}%"
    busy = idle_check(s, policy.gentle_wait_minutes(), now)
    if busy:
        return Decision(**base, reason=f"{reason}; deferred: {busy}", deferred=True,
                        details={**details, **due_at(s, policy.gentle_wait_minutes())})
    n = recent_count(recent_action_times, now, 3600)
    if n >= policy.max_actions_per_hour:
        return Decision(**base, reason=f"{reason}; blocked: {n} actions in the last hour "
                                      f"(max_actions_per_hour {policy.max_actions_per_hour})",
                        blocked=True, details=details)
    if policy.mode == "observe":
        return Decision(**base, reason=f"{reason} (observe mode: would strip with preset {policy.strip_preset})",
                        would_do=True, details=details)
    return Decision(**base, reason=f"{reason}: strip with preset {policy.strip_preset}", details=details)


BUDGET_POLICY = "strip_at_budget_percent"


def _check_reason(p, percent: float) -> str:
    """Which of OpenClaw's checks the strip gets ahead of, and the estimate predicted there."""
    kind, runs, est = p.check()
    where = {("prompt", 0): "its next prompt", ("prompt", 1): "the prompt after the next run",
             ("end", 1): "the next run's end", ("end", 2): "the end of the run after next",
             ("midrun", 1): "mid-run in the next run", ("midrun", 2): "mid-run in the run after next"}[(kind, runs)]
    spare = "; a turn to spare: the session's user may follow up before occd acts" if p.spare else ""
    limit = f" >= {percent:g}%" if percent < 100 else ""
    return f"OpenClaw's estimate at {where} {100.0 * est / p.budget:.0f}% of its budget{limit}{spare}"


def decide_budget_strip(s: SessionState, policy: PolicySettings, *, now: float, prediction, target,
                        emergency=None, recent_action_times: Sequence[float] = (),
                        fresh_session_tokens: int | None = None, strip_emergencies: bool = True,
                        economics=None, too_small=None) -> Decision | None:
    """The daemon's strip decision on OpenClaw's own terms (occd.policy.budget): strip when the predicted
    pre-prompt estimate after one more turn passes `strip_at_budget_percent` of OpenClaw's budget, or at once
    when the session is in an emergency (occd.policy.emergency: SPIRAL or BLOCKED). The decision says how
    much to keep: whether to strip is decided in turns (details["keepTurnsWithTools"], the gentlest strip that
    reaches `strip_target_percent`), how deep in tool results (details["keepToolResults"]: `_by_results`, the
    newest `keep_recent_results` whole); the executor chooses how (a .jsonl rewrite, or lean rules in a context
    engine). When no strip reaches the target, the decision is a rotation (action "rotate"). None: nothing to do.

    Keeping the newest (`policy.keep_recent_turns`, issue 19): when the target is out of reach while keeping
    them, they are kept and the rest stripped as long as OpenClaw then has a turn of room (the daemon
    looks again when that turn ends); else as many of them
    as leave it that room; a rotation only when no strip does (its seed keeps only the last exchanges).
    Timing: urgent (an emergency, or budget.urgency: OpenClaw compacts within the next turn or two) as soon as the
    run ends; gentle once the session has been quiet longer than the prompt cache lives (cache_ttl_minutes).

    `prediction` is a budget.Prediction, `target` the budget.StripTarget for it. `fresh_session_tokens`: the
    predicted estimate of a rotated session (prompt overhead + its seed); when even that is over the target, a
    rotation would not reach it either, and the strongest strip (every old tool call removed) is done instead.

    `strip_emergencies` False (the database era: occd cannot rewrite the session, and its only other supported
    "strip", `openclaw sessions compact`, is what a spiral already does and what a blocked session refuses): an
    emergency is always a rotation (sessions.reset + a seed through the gateway).

    `economics` (occd.policy.cost.Economics): act only when it pays: a strip whose cache write costs more than it
    saves before the next compaction is deferred, unless it prevents a compaction (within AVOID_HORIZON_TURNS) or
    an emergency; after the cache expired it is free. The verdict goes into details["cost"].

    `too_small` (occd.policy.window.WindowTooSmall): strips did not stop OpenClaw compacting and a fresh session
    would be over the target too: the strongest strip once, then nothing (no strip repeated on every wake)."""
    if s.archived or excluded(s.session_key, policy.exclude):
        return None
    from occd.policy.budget import large_due, should_strip, urgency

    fire = should_strip(prediction, policy.strip_at_budget_percent)
    urgent = urgency(prediction)
    if not fire and emergency is None:
        return None
    if too_small is not None and (emergency is None or emergency.kind == "SPIRAL"):  # (a blocked one: rotated)
        return None if too_small.strongest_done else _strongest_once(s, policy, now, prediction, too_small, urgent)
    # the newest turns' results kept, the target out of reach, but OpenClaw has a turn of room: keep them
    keep_newest = (not target.reachable and target.safe_keep is not None and target.safe_keep >= target.floor)
    # (a spiral in the file era too: right after OpenClaw compacted, what it sends is its summary and the tail it
    # kept; a strip that keeps the newest removes nothing of that, only older entries OpenClaw no longer sends)
    spiral = strip_emergencies and emergency is not None and emergency.kind == "SPIRAL"
    nothing = target.removed == 0 and (target.reachable or (keep_newest and (emergency is None or spiral)))
    if nothing and emergency is None and target.results is not None and target.results.removed > 0 \
            and large_due(prediction):
        nothing = False  # under the target, but a run like the session's large ones would reach the budget
    if nothing and (emergency is None or emergency.kind == "SPIRAL"):
        # already under the target: nothing to strip, and the trigger acts before OpenClaw would compact
        return None
    base = dict(policy=BUDGET_POLICY if emergency is None else f"emergency:{emergency.kind.lower()}",
                agent=s.agent, session_id=s.session_id, session_key=s.session_key)
    details = {"predictedPromptTokens": prediction.predicted, "promptBudget": prediction.budget,
               "predictedPercent": round(prediction.percent, 1),
               "afterNextTurnPercent": round(prediction.after_next_percent, 1),
               "growthTokens": prediction.growth, "overheadTokens": prediction.overhead,
               "overheadSource": prediction.overhead_source, "threshold": policy.strip_at_budget_percent,
               "targetPercent": policy.strip_target_percent, "keepTurnsWithTools": target.keep_turns_with_tools,
               "predictedAfter": target.predicted_after, "removedTokens": target.removed,
               "keepRecentTurns": policy.keep_recent_turns, "requestsPerTurn": round(prediction.requests, 2)}
    if target.safe_keep is not None:
        details["safeKeepTurns"] = target.safe_keep
    if prediction.large:
        details["largeRunTokens"] = prediction.large
    if urgent:
        details["urgency"] = urgent
    if emergency is not None:
        details["emergency"] = emergency.kind
        reason = f"{emergency.kind}: {emergency.reason}"
    elif urgent in ("next-turn", "no-turn-to-spare") or not large_due(prediction):
        reason = _check_reason(prediction, policy.strip_at_budget_percent)
    else:
        big = 100.0 * (prediction.predicted + prediction.large) / prediction.budget
        reason = (f"OpenClaw's pre-prompt estimate after a run like this session's large ones "
                  f"({prediction.large} tokens) {big:.0f}% of its budget")
    # keeping all of the newest would leave OpenClaw compacting: keep as many as leave it a turn of room
    partial = not target.reachable and target.safe_keep is not None and target.safe_keep < target.floor
    # a fresh session would be over the target too (a small window whose prompt overhead dominates): a rotation
    # cannot help, the strongest strip is all there is — and with nothing to strip, nothing is done (a BLOCKED
    # session, which OpenClaw refuses to continue, is still rotated)
    out_of_reach = (not target.reachable and target.safe_keep is None and fresh_session_tokens is not None
                    and fresh_session_tokens > target.target)
    removable = target.removed if target.removed_all is None else target.removed_all
    if out_of_reach and removable <= 0 and strip_emergencies and (emergency is None or emergency.kind != "BLOCKED"):
        return None
    hopeless = out_of_reach and removable > 0
    keep_floor = policy.keep_recent_turns
    if emergency is not None and not strip_emergencies:
        action, what = "rotate", ("rotate: reset the session in place and seed it through OpenClaw's gateway "
                                  "(its database is not occd's to rewrite, and compacting is what failed)")
    elif keep_newest and not nothing:
        # A rotation would reach the target but would leave the model only the last few exchanges (the seed):
        # the conversation matters more than the target, so strip the rest and keep the newest whole.
        details["keepTurnsWithTools"] = target.floor
        action, what = "strip", (f"strip every tool call older than the newest {target.floor} turns with tools, "
                                 f"to {pre_prompt(target.predicted_after, prediction.budget)} "
                                 f"(over the target {policy.strip_target_percent:g}%, with room for the next turn)")
    elif partial:
        # fewer of the newest than keep_recent_turns, rather than a rotation: the seed would keep only the last
        # exchanges of the conversation, a strip keeps every message and answer
        details["keepTurnsWithTools"] = target.safe_keep
        action, what = "strip", (f"strip every tool call older than the newest {target.safe_keep} turns with tools "
                                 f"(not {target.floor}: with them OpenClaw would compact during the next turn)")
    elif hopeless:
        details["keepTurnsWithTools"] = 0
        details["freshSessionTokens"] = fresh_session_tokens
        after = target.predicted_after if target.after_all is None else target.after_all
        to = f", to {pre_prompt(after, prediction.budget)}"
        action, what = "strip", (f"strip every old tool call{to}: "
                                 f"the target {policy.strip_target_percent:g}% is out of reach even for a fresh "
                                 f"session ({fresh_session_tokens} tokens), so a rotation would not help")
    elif target.reachable and not nothing:
        action, what = "strip", (f"strip to {pre_prompt(target.predicted_after, prediction.budget)}, "
                                 f"keeping {target.keep_turns_with_tools} turns with tools")
    else:
        action, what = "rotate", (f"rotate: even removing every tool call older than the newest {keep_floor} "
                                  f"turns with tools leaves {pre_prompt(target.predicted_after, prediction.budget)} "
                                  f"(target {policy.strip_target_percent:g}%)")
    if action == "strip" and not hopeless and target.results is not None:
        what = _by_results(details, target.results, prediction.budget, what)
    # urgent (an emergency, or OpenClaw predicted to compact within the next turn or two): as soon as the run
    # ends; gentle: once the session has been quiet longer than the prompt cache lives (the rewrite is then free)
    wait = 0 if emergency is not None or urgent else policy.gentle_wait_minutes()
    busy = idle_check(s, wait, now)
    if busy:
        if wait:
            busy = f"{busy} (a gentle {action}: it waits for the prompt cache to expire)"
        return Decision(action=action, **base, reason=f"{reason}; deferred: {busy}", deferred=True,
                        details={**details, **due_at(s, wait)})
    if economics is not None and action == "strip":
        from occd.policy import cost
        from occd.policy.savings import compaction_avoided

        prevents = bool(urgent) or compaction_avoided(details)
        eff, details["cost"] = cost.strip_verdict(details, economics, last_activity=s.last_activity, now=now,
                                                  prevents_compaction=prevents)
        if not cost.pays(eff, prevents_compaction=prevents, prevents_block=emergency is not None):
            return Decision(action=action, **base, deferred=True, details=details, reason=(
                f"{reason}; deferred: it does not pay yet (cache write ${eff.writeUsd:.4f} > saving ${eff.savedUsd:.4f} "
                f"on {eff.turns} turns; waits for the cache to expire or a compaction to come close)"))
    if emergency is None:
        n = recent_count(recent_action_times, now, 3600)
        if n >= policy.max_actions_per_hour:
            return Decision(action=action, **base, reason=f"{reason}; blocked: {n} actions in the last hour "
                                                          f"(max_actions_per_hour {policy.max_actions_per_hour})",
                            blocked=True, details=details)
    if policy.mode == "observe":
        return Decision(action=action, **base, reason=f"{reason} (observe mode: would {what})", would_do=True,
                        details=details)
    return Decision(action=action, **base, reason=f"{reason}: {what}", details=details)


def _by_results(details: dict, depth, budget: int, what: str) -> str:
    """A due strip goes as deep as the rules allow, counted in tool results (occd.policy.budget.results_depth,
    issue 30.1): every tool call but the newest `keep_recent_results` goes, so the next strip (a prompt-cache
    break, wherever it cuts) comes as late as it can; fewer are kept only when those would leave OpenClaw no
    room for the next run. The figures in `details` become the ones of that strip; returns what the strip does."""
    if depth.removed <= 0:
        return what
    details.update(keepToolResults=depth.keep, keepTurnsWithTools=depth.turns, predictedAfter=depth.after,
                   removedTokens=depth.removed)
    if depth.keep >= depth.floor:
        how = f"the newest {depth.keep} tool results"
    else:
        how = (f"only the newest {depth.keep} tool results (not {depth.floor}: with them OpenClaw would compact "
               "during the next run)")
    return (f"strip every tool call but {how}, to {pre_prompt(depth.after, budget)}: as deep as the rules allow, "
            "so the next strip comes as late as it can")


def _strongest_once(s: SessionState, policy: PolicySettings, now: float, prediction, too_small, urgent
                    ) -> Decision | None:
    """The window is too small for the agent (decide_budget_strip): every old tool call stripped, once."""
    if too_small.removed <= 0:
        return None
    details = {"predictedPromptTokens": prediction.predicted, "promptBudget": prediction.budget,
               "predictedPercent": round(prediction.percent, 1), "overheadTokens": prediction.overhead,
               "overheadSource": prediction.overhead_source, "growthTokens": prediction.growth,
               "keepTurnsWithTools": 0, "keepToolResults": 0, "removedTokens": too_small.removed,
               "predictedAfter": too_small.after, "windowTooSmall": too_small.as_dict()}
    base = dict(action="strip", policy=BUDGET_POLICY, agent=s.agent, session_id=s.session_id,
                session_key=s.session_key, details=details)
    reason = f"{too_small.message()}: the strongest strip, every old tool call, to {too_small.after} tokens"
    busy = idle_check(s, 0 if urgent else policy.gentle_wait_minutes(), now)
    if busy:
        return Decision(**base, reason=f"{reason}; deferred: {busy}", deferred=True)
    if policy.mode == "observe":
        return Decision(**base, reason=f"{reason} (observe mode)", would_do=True)
    return Decision(**base, reason=reason)
