"""The strip decision for one observed session, shared by the apply job (which acts on it) and the lean job (which
turns the lean view on where it says so)."""

from __future__ import annotations

import logging

log = logging.getLogger("occd.jobs.decide")


def _state(obs):
    from occd.policy.types import SessionState

    return SessionState(agent=obs.agent, session_key=obs.session_key, session_id=obs.session_id,
                        context_tokens=obs.context_tokens, context_window=obs.context_window,
                        compaction_count=obs.compaction_count or 0, last_activity=obs.last_activity,
                        running=obs.running)


FIRST_SEEN_KEY = "decide.firstSeen"


def seen_in_use(ctx, obs, policy) -> bool:
    """Whether occd has seen the session in use, not only found it there (occd.policy.types.seen_run): a
    workstation's history is not a to-do list; on a first start over 5,000 sessions, the ones last used an hour
    before are not rewritten (`policy.act_on_unseen` allows it; `occd edit`, `occd rotate` act on request). The
    first sights are read from the ledger once per process and never change."""
    from occd.policy.types import seen_run

    if getattr(policy, "act_on_unseen", False):
        return True
    cached = ctx.cache.get(FIRST_SEEN_KEY)
    if cached is None or cached[1] is None:  # (no scan recorded yet: looked up again)
        cached = ctx.cache[FIRST_SEEN_KEY] = (ctx.ledger.first_seen(), ctx.ledger.first_look())
    seen, first_look = cached
    k = (obs.agent, obs.session_id)
    first = seen.get(k)
    if first is None:  # recorded after the bulk read (a new session): one row
        first = ctx.ledger.first_seen(*k).get(k)
        if first is None:
            return False  # not in the ledger yet: the scan records it, the next cycle decides
        seen[k] = first
    return seen_run(obs.last_activity, first, first_look)


def decide_session(ctx, obs, policy, now, times=(), *, priced: bool = True, in_use_checked: bool = False):
    """The decision for one session: on OpenClaw's own budget (file era: the transcript's context; database era:
    the same read from the read-only database, from the last reset marker on; both with the spiral/blocked
    observations); else by the model's reported context use as a share of the window
    (`strip_at_context_percent`, with the preset: an unknown budget, or in the file era a provider whose usage
    outgrows the window before OpenClaw's estimate does).

    Database era: an emergency is a rotation (reset + seed through the gateway), never a compaction; and where
    OpenClaw's budget is known the share of the window is not consulted at all, since its action there is a
    (lossy) `openclaw sessions compact`, earlier than OpenClaw itself would compact.

    `priced`: a strip acts only when it pays once the prompt cache is priced (occd.policy.cost; the lean job
    turns this off: turning the lean view on rewrites nothing, its plugin moves its boundary on its own terms).

    Only a session in use (active within policy.active_within_hours, and seen in use by occd: seen_in_use) gets a
    decision: None for the rest (`in_use_checked`: the caller checked both on the session's real activity)."""
    from occd.policy.budget import should_strip
    from occd.policy.strip import decide_budget_strip, decide_strip
    from occd.policy.types import in_use

    if not in_use_checked and (not in_use(_state(obs), policy.active_within_hours, now)
                               or not seen_in_use(ctx, obs, policy)):
        return None  # history, not a to-do list: only sessions in use are stripped, rotated or put in the lean view
    db = obs.era == "db"
    if obs.prompt_budget and (db or (obs.era == "file" and obs.path is not None)):
        from occd.jobs import budget

        ev = budget.evaluate(ctx, obs, policy, now)
        if ev is not None:
            p, target, em, fresh = ev
            # the trigger fires where a fresh session would be over the target too: is the window too small for
            # the agent? (issue 30.5: the ledger is read only then; a blocked session is still rotated)
            small = None
            fires = em is None and should_strip(p, policy.strip_at_budget_percent)
            if not db and (em is not None and em.kind == "SPIRAL" or fires):
                from occd.jobs.window import too_small

                small = too_small(ctx, obs, p, target, fresh)
            d = decide_budget_strip(_state(obs), policy, now=now, prediction=p, target=target, emergency=em,
                                    recent_action_times=times, fresh_session_tokens=fresh,
                                    strip_emergencies=not db, economics=economics(ctx, obs) if priced else None,
                                    too_small=small)
            if d is not None or small is not None:  # (too small and nothing to do: not a strip by the window share)
                return d
        if db:
            return None
    return decide_strip(_state(obs), policy, now=now, window_tokens=obs.context_window, recent_action_times=times)


def economics(ctx, obs):
    """Prices and the cache lifetime for the session's model (occd.policy.cost), or None when off."""
    c = getattr(ctx.settings, "cost", None)
    if c is None or not c.only_when_it_pays:
        return None
    from occd.policy import cost
    from occd.policy.savings import litellm_table

    try:
        from occd.jobs.scan import _openclaw_config

        cfg = _openclaw_config(ctx)
    except Exception:  # noqa: BLE001 - no config: the next source
        cfg = None
    model = getattr(obs, "model", None)
    prices = cost.prices(cfg, model, litellm_table(ctx.cache) if cost.from_openclaw(cfg, model) is None else None)
    return cost.Economics(prices=prices, ttl_s=cost.model_cache_ttl(c.cache_ttl_seconds, model),
                          horizon_turns=c.horizon_turns, summary_tokens=c.summary_tokens)


def economics_or_none(ctx, obs):
    """economics(), or None when the prices cannot be had: for pricing that is information only (a rotation's
    record, the lean view's cost ratio), where a failure must not stop the action."""
    try:
        return economics(ctx, obs)
    except Exception:  # noqa: BLE001 - unpriced then
        log.debug("no prices for %s", getattr(obs, "session_key", None), exc_info=True)
        return None


DECIDED_KEY = "apply.decided"  # (the cycle's scan, {(agent, key)}) the apply job decided about this cycle


def decided_this_cycle(ctx, scan, obs) -> bool:
    """Whether the apply job already decided about this session in this cycle (scan)."""
    hit = ctx.cache.get(DECIDED_KEY)
    return bool(hit and hit[0] is scan and (obs.agent, obs.session_key or obs.session_id) in hit[1])


NO_ROTATION = "apply:no-rotation"


def no_rotation(ctx) -> set:
    """(agent, session id) the apply job found a rotation would not help, for this cycle's scan only: one
    decision per session per cycle (the rotate job skips them)."""
    held = ctx.cache.get(NO_ROTATION)
    if held is None or held[0] is not ctx.last_scan:
        held = ctx.cache[NO_ROTATION] = (ctx.last_scan, set())
    return held[1]
