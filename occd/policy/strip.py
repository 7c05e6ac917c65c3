"""When the daemon strips a session: context use past `strip_at_context_percent` of the window, the session
idle, not excluded, under the agent's hourly action limit. Observe mode marks the decision would-do."""

from __future__ import annotations

from typing import Sequence

from occd.config import PolicySettings
from occd.policy.types import Decision, SessionState, excluded, idle_check

POLICY = "strip_at_context_percent"


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
    busy = idle_check(s, policy.min_idle_minutes, now)
    if busy:
        return Decision(**base, reason=f"{reason}; deferred: {busy}", deferred=True, details=details)
    n = recent_count(recent_action_times, now, 3600)
    if n >= policy.max_actions_per_hour:
        return Decision(**base, reason=f"{reason}; blocked: {n} actions in the last hour "
                                      f"(max_actions_per_hour {policy.max_actions_per_hour})",
                        blocked=True, details=details)
    if policy.mode == "observe":
        return Decision(**base, reason=f"{reason} (observe mode: would strip with preset {policy.strip_preset})",
                        would_do=True, details=details)
    return Decision(**base, reason=f"{reason}: strip with preset {policy.strip_preset}", details=details)
