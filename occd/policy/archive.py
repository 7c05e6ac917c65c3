"""Archive policy (relevance issue): a session idle longer than `archive_after_days` whose relevance score is
under `archive_below_relevance` is archived. No score yet means no decision (unknown is not irrelevant)."""

from __future__ import annotations

from occd.config import PolicySettings
from occd.policy.types import Decision, SessionState, excluded, idle_check

POLICY = "archive_idle_irrelevant"


def last_activity(times, now: float) -> float | None:
    """When a session was last active, for the idle-archive: the most recent of every clock that says so (the
    transcript's mtime, the index's `updatedAt`, the newest entry timestamp). A session is idle only when they
    all agree it is old: entries with old timestamps (a wrong clock, an imported transcript) in a file written
    minutes ago are not idle. A time in the future (a clock ahead) counts as `now`: not idle. None when no
    clock is known (no decision)."""
    known = [float(t) for t in times if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0]
    if not known:
        return None
    return min(max(known), now)


def decide_archive(s: SessionState, policy: PolicySettings, *, relevance: float | None, now: float,
                   relevance_method: str | None = None) -> Decision | None:
    if s.archived or excluded(s.session_key, policy.exclude) or relevance is None:
        return None
    idle = s.idle_minutes(now)
    if idle is None:
        return None
    idle_days = idle / (60 * 24)
    if idle_days <= policy.archive_after_days or relevance >= policy.archive_below_relevance:
        return None
    base = dict(action="archive", policy=POLICY, agent=s.agent, session_id=s.session_id, session_key=s.session_key)
    details = {"idleDays": round(idle_days, 1), "relevance": round(relevance, 3), "method": relevance_method,
               "archiveAfterDays": policy.archive_after_days, "belowRelevance": policy.archive_below_relevance}
    reason = (f"idle {idle_days:.1f} days > {policy.archive_after_days:g} and relevance {relevance:.2f} "
              f"< {policy.archive_below_relevance:g}" + (f" ({relevance_method})" if relevance_method else ""))
    busy = idle_check(s, 0, now)
    if busy:
        return Decision(**base, reason=f"{reason}; deferred: {busy}", deferred=True, details=details)
    if policy.mode == "observe":
        return Decision(**base, reason=f"{reason} (observe mode: would archive)", would_do=True, details=details)
    return Decision(**base, reason=reason, details=details)
