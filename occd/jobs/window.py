"""The window-too-small check (issue 30.5, occd.policy.window) for the apply job: read the ledger's strips and
the transcript's last compaction only where the budget trigger fires and a fresh session would be over the target
too; an open problem in the ledger (status, doctor) names the numbers, and is resolved when the session is gone or
a fresh session would now reach the target (a larger window, a leaner agent)."""

from __future__ import annotations

WINDOW_SOURCE = "window"  # the ledger's problems about a window too small for its agent
WINDOW_CODE = "WINDOW_TOO_SMALL"


def too_small(ctx, obs, p, target, fresh):
    """occd.policy.window.WindowTooSmall for this session, or None (cheap unless a fresh session would be over the
    target). A verified one is an open problem in the ledger, once per cycle."""
    if fresh is None or fresh <= target.target or ctx.ledger is None:
        return None
    from occd.jobs import budget
    from occd.policy.budget import with_margin
    from occd.policy.window import window_too_small

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
        _report(ctx, obs, small)
    return small


def _report(ctx, obs, small) -> None:
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


def resolve(ctx, scan, now) -> None:
    """Resolve the window problems of sessions that are gone or whose fresh session would now reach the target."""
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
