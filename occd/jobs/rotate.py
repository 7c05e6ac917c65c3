"""The rotate job (after each scan): resume rotations that were cut off, judge the health of recent ones, end
cooldowns, and rotate the sessions that keep compacting — occd.policy.decide_rotation decides (trigger, idle,
cooldown, backoff, per-agent breaker), occd.rotation.rotate.rotate_session acts (the same path as `occd rotate`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

from occd.errors import BusyError, OccdError

log = logging.getLogger("occd.jobs.rotate")
REPEAT_QUIET_S = 3600
CANNOT_HELP_KEY = "rotate.cannot_help"  # (agent, key) -> the target last logged as "a fresh session would be over"


def _state(obs, compactions: int | None = None):
    from occd.policy.types import SessionState

    return SessionState(agent=obs.agent, session_key=obs.session_key, session_id=obs.session_id,
                        context_tokens=obs.context_tokens, context_window=obs.context_window,
                        compaction_count=obs.compaction_count or 0 if compactions is None else compactions,
                        last_activity=obs.last_activity, running=obs.running)


def counted_compactions(ctx, obs, policy, now: float) -> int | None:
    """The compactions the scheduled rotation counts for a session in use (occd.policy.rotation.compactions_counted:
    while occd watched or within policy.active_within_hours), None when it is not due: not in use, or fewer than
    rotate_at_compactions. Reads the ledger only for sessions past the cheap tests."""
    from occd.policy.rotation import compactions_counted
    from occd.policy.types import in_use

    threshold = policy.rotation.rotate_at_compactions
    if (obs.compaction_count or 0) < threshold or not in_use(_state(obs), policy.active_within_hours, now):
        return None
    from occd.jobs.decide import seen_in_use

    if not seen_in_use(ctx, obs, policy):
        return None
    window_s = policy.active_within_hours * 3600
    baseline = ctx.ledger.compaction_baseline(obs.agent, obs.session_id, now - window_s)
    n = compactions_counted(obs.compaction_count or 0, baseline, [t for _, t in getattr(obs, "checkpoints", ())],
                            now=now, window_s=window_s)
    return n if n >= threshold else None


def window_confirmed(obs) -> bool:
    """Whether the session's window is the one OpenClaw used at its last turn (or the config's where it recorded
    none): not when the config was edited since that turn (occd.openclaw.figure.window_choice "config-edit")."""
    from occd.openclaw.figure import WINDOW_CONFIG_EDIT

    return getattr(obs, "window_source", None) != WINDOW_CONFIG_EDIT


def _history(led, agent: str, key: str) -> list[dict]:
    """Earlier rotations of the key that happened (aborted ones, which changed nothing, are left out)."""
    return [r for r in led.rotations(agent, key, limit=20) if not (r["state"] == "IDLE" and r.get("error"))]


def turns_after_seed(lines) -> tuple[int, int | None]:
    """(user turns after the seed, turns done when the first compaction came or None) of a rotated session's
    transcript lines. The seed is everything up to and including the last occd seed message's reply."""
    from occd.transcript.compaction import is_compaction
    from occd.transcript.jsonl import iter_objects

    turns, first_comp = 0, None
    for o in iter_objects(lines):
        if first_comp is None and is_compaction(o):
            first_comp = turns
        m = o.get("message") if o.get("type") == "message" else None
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            text = c if isinstance(c, str) else " ".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
            if "[occd] This session continues session" in text:
                turns, first_comp = 0, None
                continue
            turns += 1
    return turns, first_comp


def assess(ctx, obs_by_id: dict) -> int:
    """Health of finished rotations not judged yet: did the new session compact within `health_turns`?"""
    from occd.openclaw import open_store
    from occd.policy.rotation import assess_health

    led, n = ctx.ledger, 0
    for r in led.rotations(states=("COOLDOWN", "IDLE"), limit=200):
        details = r.get("details") if isinstance(r.get("details"), dict) else {}
        if (r.get("health") and NEXT_TURN in details) or r.get("error") or not r.get("new_session_id"):
            continue
        obs = obs_by_id.get(r["new_session_id"])
        if obs is None:
            continue
        try:
            store = open_store(ctx.state_dir, r["agent_id"])
            info = store.resolve(r["new_session_id"])
            turns, first = turns_after_seed(store.read_lines(info))
        except (OccdError, OSError):
            continue
        if first is None and (obs.compaction_count or 0) > 0 and r.get("era") == "db":
            first = turns  # the database era reports the compaction count; the turn is at most this one
        fields: dict = {}
        clean = next_turn_clean(first, turns, obs.running)
        if clean is not None and NEXT_TURN not in details:
            fields["details"] = {**details, NEXT_TURN: clean}
        h = assess_health(first, turns, ctx.settings.policy_for(r["agent_id"]).rotation)
        if h and not r.get("health"):
            fields["health"] = h
        if fields:
            led.rotation_upsert(r["id"], **fields)
            n += 1
    return n


NEXT_TURN = "nextTurnClean"  # rotation details: the new session's first turn after the seed ran without a compaction


def next_turn_clean(first_compaction: int | None, turns: int, running: bool) -> bool | None:
    """Whether the new session's first turn after the seed ran without a compaction (what occd.policy.savings
    counts as a compaction avoided): False once one came in it, True once that turn is over (a second turn
    began, or the run ended) without one, None before."""
    if first_compaction is not None and first_compaction <= 1:
        return False
    if turns >= 2 or (turns == 1 and not running):
        return True
    return None


def rotation_turns(led, since=None) -> dict:
    """rotation id -> nextTurnClean for the rotations that have one (occd.policy.savings.effects' input)."""
    out = {}
    for r in led.rotations(since=since, limit=100_000):
        d = r.get("details") if isinstance(r.get("details"), dict) else {}
        if isinstance(d.get(NEXT_TURN), bool):
            out[r["id"]] = d[NEXT_TURN]
    return out


def end_cooldowns(ctx, now: float) -> int:
    n = 0
    for r in ctx.ledger.rotations(states=("COOLDOWN",), limit=500):
        rs = ctx.settings.policy_for(r["agent_id"]).rotation
        if now - (r.get("finished") or r["started"]) >= rs.min_minutes * 60:
            ctx.ledger.rotation_transition(r["id"], "IDLE", now=now, note="cooldown over", finished=r.get("finished"))
            n += 1
    return n


def _recently_recorded(led, obs, now, outcome: str, dry_run: bool) -> bool:
    for a in led.history(agent=obs.agent, session=obs.session_id, kind="rotate", since=now - REPEAT_QUIET_S, limit=20):
        if a["outcome"] == outcome and bool(a["dry_run"]) == dry_run:
            return True
    return False


def run(ctx) -> dict:
    from occd.jobs.scan import ensure_scan
    from occd.policy import breaker as brk
    from occd.policy.rotation import PastRotation, decide_rotation
    from occd.rotation.recovery import resume_all

    led, s = ctx.ledger, ctx.settings
    counts = {"resumed": 0, "rotated": 0, "wouldDo": 0, "deferred": 0, "blocked": 0, "failed": 0, "assessed": 0}
    res = resume_all(s, led, state_dir=ctx.state_dir, now=ctx.now())
    counts["resumed"], counts["deferred"], counts["failed"] = res["resumed"], res["deferred"], res["failed"]
    scan = ensure_scan(ctx)
    sessions = [o for o in scan.sessions if o.era in ("file", "db")]
    counts["assessed"] = assess(ctx, {o.session_id: o for o in sessions})
    end_cooldowns(ctx, ctx.now())
    from occd.jobs.decide import no_rotation

    skip = no_rotation(ctx)  # sessions this cycle's apply job found a rotation would not help: one decision each
    policies: dict = {}
    for obs in sessions:
        if ctx.stop.is_set():
            break
        if not obs.session_key or (obs.agent, obs.session_id) in skip:
            continue
        policy = policies.get(obs.agent) or policies.setdefault(obs.agent, s.policy_for(obs.agent))
        if (obs.compaction_count or 0) < policy.rotation.rotate_at_compactions:
            continue  # the cheap test first: most sessions of a workstation stop here
        now = ctx.now()
        counted = counted_compactions(ctx, obs, policy, now)  # in use, and compactions while occd watched
        if counted is None:
            continue
        from occd.jobs.decide import decided_this_cycle

        if decided_this_cycle(ctx, scan, obs):
            continue  # the budget policy decided about it this cycle (one decision per session per cycle)
        if _cannot_help(ctx, obs, policy, now):
            continue
        hist = [PastRotation.from_row(r) for r in _history(led, obs.agent, obs.session_key)]
        rec = led.get_breaker(obs.agent, "rotate")
        st = brk.BreakerState(**asdict(rec))
        bset = brk.rotation_breaker_settings(policy)
        recent = led.action_times(obs.agent, "rotate", now - bset.window_minutes * 60, trigger="auto")
        d = decide_rotation(_state(obs, counted), policy, now=now, history=hist, breaker=st, recent_rotations=recent,
                            window_confirmed=window_confirmed(obs))
        if d is None:
            continue
        if "breaker" in d.details and (d.act or d.blocked):
            led.set_breaker(d.details["breaker"], d.details.get("transitions") or (), now=now)
        if not d.act:
            key = "wouldDo" if d.would_do else ("deferred" if d.deferred else "blocked")
            counts[key] += 1
            if not _recently_recorded(led, obs, now, d.outcome, d.would_do):
                led.record_action("rotate", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=d.reason, outcome=d.outcome, dry_run=d.would_do,
                                  before={k: v for k, v in d.details.items() if k not in ("breaker", "transitions")},
                                  now=now)
            continue
        ok = _act(ctx, obs, d, counts)
        if ok is None:
            continue
        after = led.action_times(obs.agent, "rotate", now - bset.window_minutes * 60, trigger="auto")
        state = d.details.get("breaker") or st
        new, trans = brk.record_result(state, bset, ok, after, ctx.now())
        led.set_breaker(new, trans, now=ctx.now())
    return counts


def rotate_now(ctx, obs, reason: str, *, emergency: str | None = None, decision=None) -> str | None:
    """A rotation asked for by the strip-to-target policy (no strip reaches the target; `emergency`: SPIRAL or
    BLOCKED, past the cooldown). Same policy checks and breaker as the scheduled rotations. Returns what
    happened: rotated | wouldDo | deferred | blocked | failed, or None when there is no session key."""
    from occd.policy import breaker as brk
    from occd.policy.rotation import PastRotation, decide_rotation

    led = ctx.ledger
    if not obs.session_key:
        return None
    now = ctx.now()
    policy = ctx.settings.policy_for(obs.agent)
    hist = [PastRotation.from_row(r) for r in _history(led, obs.agent, obs.session_key)]
    st = brk.BreakerState(**asdict(led.get_breaker(obs.agent, "rotate")))
    bset = brk.rotation_breaker_settings(policy)
    recent = led.action_times(obs.agent, "rotate", now - bset.window_minutes * 60, trigger="auto")
    d = decide_rotation(_state(obs), policy, now=now, history=hist, breaker=st, recent_rotations=recent,
                        force_reason=reason, emergency=bool(emergency),
                        urgent=bool(decision is not None and (decision.details or {}).get("urgency")),
                        window_confirmed=window_confirmed(obs))
    if d is None:
        return None
    if "breaker" in d.details and (d.act or d.blocked):
        led.set_breaker(d.details["breaker"], d.details.get("transitions") or (), now=now)
    before = {k: v for k, v in d.details.items() if k not in ("breaker", "transitions")}
    if decision is not None:
        before.update(decision.details)
    if not d.act:
        key = "wouldDo" if d.would_do else ("deferred" if d.deferred else "blocked")
        if not _recently_recorded(led, obs, now, d.outcome, d.would_do):
            led.record_action("rotate", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=decision.policy if decision is not None else d.policy, reason=d.reason,
                              outcome=d.outcome, dry_run=d.would_do, before=before, now=now)
        return key
    counts: dict = {"rotated": 0, "deferred": 0, "failed": 0}
    from dataclasses import replace

    if emergency and decision is not None:  # the rotation's own record says why (status marks SPIRAL/BLOCKED)
        d = replace(d, policy=decision.policy)
    if decision is not None:
        # what the prompt was going to be and its budget: the rotation's price (issue 20); the prompt overhead:
        # the new session's figure
        dd = decision.details
        priced = {k: dd[k] for k in ("predictedPromptTokens", "promptBudget", "growthTokens", "requestsPerTurn")
                  if k in dd}
        overhead = {"overheadTokens": dd["overheadTokens"]} if dd.get("overheadTokens") is not None else {}
        d = replace(d, details={**priced, **d.details, **overhead})
    ok = _act(ctx, obs, d, counts)
    if ok is None:
        return "deferred"
    after = led.action_times(obs.agent, "rotate", now - bset.window_minutes * 60, trigger="auto")
    new, trans = brk.record_result(d.details.get("breaker") or st, bset, ok, after, ctx.now())
    led.set_breaker(new, trans, now=ctx.now())
    return "rotated" if ok else "failed"


def _cost_record(ctx, obs, d) -> dict | None:
    """What the ledger keeps for pricing a rotation (occd.policy.savings): the prompt the model was going to be
    sent, the part that stays a cache read (the prompt overhead: system prompt and tools), the prices and the
    turns it saves on. None without a prediction (the rotation is then counted, not priced)."""
    from occd.jobs.decide import economics_or_none
    from occd.policy import cost

    P = d.details.get("predictedPromptTokens") or getattr(obs, "context_tokens", None)
    if not isinstance(P, int) or P <= 0:
        return None
    econ = economics_or_none(ctx, obs)  # pricing is information: the rotation goes on unpriced
    if econ is None:
        return None
    overhead = d.details.get("overheadTokens") or 0
    details = {**d.details, "predictedPromptTokens": P, "removedTokens": max(0, P - overhead)}
    _, rec = cost.strip_verdict(details, econ, last_activity=getattr(obs, "last_activity", None), now=ctx.now(),
                                prevents_compaction=True)  # rotated because no strip avoids the next compaction
    return rec


def scheduled(ctx, obs, now: float) -> bool:
    """Whether the scheduled rotation (rotate_at_compactions) takes this session in this cycle: then the apply
    job, which runs first, leaves it (one decision per session per cycle; a strip right before a rotation would
    be work for nothing). Reads only; the rotate job decides again and records."""
    from occd.policy import breaker as brk
    from occd.policy.rotation import PastRotation, decide_rotation

    policy = ctx.settings.policy_for(obs.agent)
    counted = counted_compactions(ctx, obs, policy, now) if obs.session_key else None
    if counted is None:
        return False
    if _cannot_help(ctx, obs, policy, now):
        return False
    led = ctx.ledger
    hist = [PastRotation.from_row(r) for r in _history(led, obs.agent, obs.session_key)]
    st = brk.BreakerState(**asdict(led.get_breaker(obs.agent, "rotate")))
    bset = brk.rotation_breaker_settings(policy)
    recent = led.action_times(obs.agent, "rotate", now - bset.window_minutes * 60, trigger="auto")
    d = decide_rotation(_state(obs, counted), policy, now=now, history=hist, breaker=st, recent_rotations=recent,
                        window_confirmed=window_confirmed(obs))
    return d is not None and (d.act or d.would_do)


def _cannot_help(ctx, obs, policy, now: float) -> bool:
    """A fresh session would be over the strip target too (a small window whose prompt overhead dominates): a
    rotation cannot help, and the budget policy does the strongest strip instead (docs/guide.md, the budget trigger)."""
    from occd.jobs import budget

    try:
        ev = budget.evaluate(ctx, obs, policy, now)
    except Exception:  # noqa: BLE001 - without a prediction the rotation policy decides alone
        return False
    said = ctx.cache.setdefault(CANNOT_HELP_KEY, {})
    k = (obs.agent, obs.session_key)
    if ev is None or ev[3] is None or ev[3] <= ev[1].target:
        said.pop(k, None)
        return False
    # INFO once when a session enters this state (or its target changes), DEBUG while it lasts: the rotation
    # job asks every wake, twice
    level = logging.DEBUG if said.get(k) == ev[1].target else logging.INFO
    said[k] = ev[1].target
    log.log(level, "%s/%s: no rotation: a fresh session (%d tokens) would be over the target (%d) too", obs.agent,
            obs.session_key, ev[3], ev[1].target)
    return True


def _act(ctx, obs, d, counts) -> bool | None:
    from occd.rotation.rotate import rotate_session

    t0 = time.monotonic()
    try:
        rotate_session(ctx.settings, agent=obs.agent, ref=obs.session_id, trigger="auto", policy=d.policy,
                       reason=d.reason, budget_percent=d.details.get("seedBudgetPercent"), ledger=ctx.ledger,
                       now=ctx.now(), overhead=d.details.get("overheadTokens"), cost=_cost_record(ctx, obs, d))
        counts["rotated"] += 1
        log.info("%s/%s rotated (%s, %.1fs)", obs.agent, obs.session_key, d.reason, time.monotonic() - t0)
        return True
    except BusyError as e:
        counts["deferred"] += 1
        log.info("%s/%s rotation deferred: %s", obs.agent, obs.session_key, e.message)
        if not _recently_recorded(ctx.ledger, obs, ctx.now(), "deferred", False):
            ctx.ledger.record_action("rotate", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                     policy=d.policy, reason=d.reason, outcome="deferred", error=e.message)
        return None
    except OccdError as e:
        counts["failed"] += 1
        log.warning("%s/%s rotation failed: %s", obs.agent, obs.session_key, e.message)
        return False
