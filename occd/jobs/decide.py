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

    Only a session in use (active within policy.active_within_hours) gets a decision: None for the rest
    (`in_use_checked`: the caller checked it on the session's real activity)."""
    from occd.policy.strip import budget_fires, decide_budget_strip, decide_strip
    from occd.policy.types import in_use

    if not in_use_checked and not in_use(_state(obs), policy.active_within_hours, now):
        return None  # history, not a to-do list: only sessions in use are stripped, rotated or put in the lean view
    db = obs.era == "db"
    if obs.prompt_budget and (db or (obs.era == "file" and obs.path is not None)):
        from occd.jobs import budget

        ev = budget.evaluate(ctx, obs, policy, now)
        if ev is not None:
            p, target, em, fresh, runs, depth = ev
            kw = dict(now=now, prediction=p, target=target, emergency=em, recent_action_times=times,
                      fresh_session_tokens=fresh, strip_emergencies=not db,
                      economics=economics(ctx, obs) if priced else None,
                      runs=runs if not db else None, depth=depth if not db else None)
            # the trigger fires where a fresh session would be over the target too: is the window too small for the
            # agent? (the ledger is read only then; a blocked session is still rotated)
            small = None
            if not db and (em is not None and em.kind == "SPIRAL" or em is None and budget_fires(p, policy, runs)):
                small = too_small(ctx, obs, p, target, fresh)
            d = decide_budget_strip(_state(obs), policy, too_small=small, **kw)
            if small is not None:  # (None then: nothing more, not a strip by the share of the window either)
                return d
            if d is not None:
                return d
        if db:
            return None
    return decide_strip(_state(obs), policy, now=now, window_tokens=obs.context_window, recent_action_times=times)


WINDOW_SOURCE = "window"  # the ledger's problems about a window too small for its agent (status, doctor)
WINDOW_CODE = "WINDOW_TOO_SMALL"


def too_small(ctx, obs, p, target, fresh):
    """occd.policy.runs.WindowTooSmall for this session, or None: only where a fresh session would be over the
    target (cheap, from the prediction) are the ledger's strips and the transcript's last compaction read. A
    verified one is an open problem in the ledger (status, doctor), once per cycle."""
    if fresh is None or fresh <= target.target or ctx.ledger is None:
        return None
    from occd.jobs import budget
    from occd.policy.budget import with_margin
    from occd.policy.runs import window_too_small

    f = budget.facts(ctx, obs)
    if f is None:
        return None
    strips = [a for a in ctx.ledger.history(kind="strip", agent=obs.agent, session=obs.session_id, limit=200)
              if a.get("session_id") == obs.session_id and a["outcome"] == "ok" and not a["dry_run"]
              and a["trigger"] == "auto"]
    strongest = [a["ts"] for a in strips if isinstance(a.get("before"), dict) and a["before"].get("windowTooSmall")]
    before, after = with_margin(f.context.history), with_margin(f.context.after_keep(0))
    small = window_too_small(overhead=p.overhead, budget=p.budget, window=obs.context_window, fresh=fresh,
                             target=target.target, strip_times=[a["ts"] for a in strips], strongest_times=strongest,
                             last_compaction=f.last_compaction_at, removed=before - after, after=after + p.overhead)
    if small is not None:
        report_too_small(ctx, obs, small)
    return small


def report_too_small(ctx, obs, small) -> None:
    subject = f"{obs.agent}/{obs.session_key or obs.session_id}"
    done = ctx.cache.setdefault(WINDOW_SOURCE, (ctx.last_scan, set()))
    if done[0] is not ctx.last_scan:
        done = ctx.cache[WINDOW_SOURCE] = (ctx.last_scan, set())
    if subject in done[1]:
        return
    done[1].add(subject)
    what = ("occd made the strongest strip once and no longer strips this session" if small.strongest_done else
            "occd makes the strongest strip once, then stops")
    ctx.ledger.sync_problems((WINDOW_SOURCE,), [{
        "source": WINDOW_SOURCE, "subject": subject, "code": WINDOW_CODE, "severity": "fail", "agent_id": obs.agent,
        "session_id": obs.session_id, "message": f"{small.message()}: {what}", "details": small.as_dict(),
        "hint": "raise the model's contextWindow in openclaw.json, or give the agent fewer tools or a shorter "
                "system prompt"}], subjects=[subject])


def resolve_too_small(ctx, scan, now) -> None:
    """Resolve the window problems of sessions whose fresh session would now reach the target (a larger window, a
    leaner agent) or that are gone."""
    try:
        open_ = ctx.ledger.open_problems(source=WINDOW_SOURCE)
    except Exception:  # noqa: BLE001 - an older ledger
        return
    if not open_:
        return
    from occd.jobs import budget

    by_id = {o.session_id: o for o in scan.sessions}
    for pr in open_:
        obs = by_id.get(pr.get("session_id"))
        if obs is not None:
            ev = budget.evaluate(ctx, obs, ctx.settings.policy_for(obs.agent), now)
            if ev is not None and ev[3] is not None and ev[3] > ev[1].target:
                continue
        ctx.ledger.sync_problems((WINDOW_SOURCE,), [], subjects=[pr["subject"]], now=now)


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
    provider = model.split("/", 1)[0] if isinstance(model, str) and "/" in model else None
    return cost.Economics(prices=prices, ttl_s=cost.cache_ttl(c.cache_ttl_seconds, provider, model),
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
