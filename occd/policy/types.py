"""The data policies decide on, and the decisions they return. Plain dataclasses: no I/O, no clock."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class SessionState:
    """What the scan knows about one session at `now` (built by the jobs from the latest observation and the
    live checks). Times are epoch seconds."""

    agent: str
    session_key: str | None
    session_id: str
    context_tokens: int | None = None
    context_window: int | None = None
    compaction_count: int = 0
    last_activity: float | None = None  # newest transcript write / entry timestamp
    running: bool = False  # a live transcript lock / the gateway says a run is in progress
    pending_tool_call: bool = False  # a tool call still waiting for its result
    archived: bool = False

    def context_percent(self, window: int | None = None) -> float | None:
        w = window or self.context_window
        if not w or self.context_tokens is None:
            return None
        return 100.0 * self.context_tokens / w

    def idle_minutes(self, now: float) -> float | None:
        if self.last_activity is None:
            return None
        return max(0.0, (now - self.last_activity) / 60.0)


@dataclass(frozen=True)
class Decision:
    """What a policy wants done. `would_do` (observe mode) and `deferred` (not now, retry next cycle) both
    mean: record it, do not act."""

    action: str  # strip | rotate | archive
    policy: str  # which policy fired (strip_at_context_percent, rotate_at_compactions, archive_idle_irrelevant)
    reason: str  # one human line: why
    agent: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    would_do: bool = False
    deferred: bool = False
    blocked: bool = False  # refused by a breaker / rate limit until it closes
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def act(self) -> bool:
        return not (self.would_do or self.deferred or self.blocked)

    @property
    def outcome(self) -> str:
        """The ledger outcome for this decision when it is not carried out."""
        if self.deferred:
            return "deferred"
        if self.blocked or self.would_do:
            return "skipped"
        return "ok"


def excluded(session_key: str | None, patterns: Iterable[str]) -> str | None:
    """The first exclude glob matching the session key (fnmatch, case-sensitive), or None."""
    if not session_key:
        return None
    for pat in patterns:
        if fnmatch.fnmatchcase(session_key, pat):
            return pat
    return None


def idle_check(s: SessionState, min_idle_minutes: float, now: float) -> str | None:
    """Why the session is not idle enough to touch, or None when it is."""
    if s.running:
        return "a run is in progress"
    if s.pending_tool_call:
        return "a tool call is waiting for its result"
    idle = s.idle_minutes(now)
    if idle is None:
        return None if min_idle_minutes <= 0 else "last activity unknown"
    if idle < min_idle_minutes:
        return f"idle {idle:.0f} min < {min_idle_minutes:g} min"
    return None


def in_use(s: SessionState, active_within_hours: float, now: float) -> bool:
    """Whether a session is in use: active within `active_within_hours` (policy.active_within_hours). Strips,
    rotations and the lean view touch only these; history (a session idle for weeks) is never a to-do list. A
    session whose last activity is unknown is not in use."""
    idle = s.idle_minutes(now)
    return idle is not None and idle <= active_within_hours * 60


BORN_WATCHED_S = 1.0  # margin between occd's first look and a session found after it (clock and recording)


def seen_run(last_activity: float | None, session_first_seen: float, first_look: float | None) -> bool:
    """Whether occd has seen a session in use rather than only found it (policy.act_on_unseen off): its last activity
    is after occd first saw it (a run ended while occd watched, or while occd was stopped after it had seen the
    session), or it appeared after occd's first look at the state ended (`first_look`: a session, or an agent, born
    while occd watched)."""
    if last_activity is not None and last_activity > session_first_seen:
        return True
    return first_look is not None and session_first_seen > first_look + BORN_WATCHED_S
