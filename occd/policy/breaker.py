"""Circuit breaker per agent and action kind, as a pure state machine.

    closed ──(max_actions in the window, or max_failures failures)──▶ open
    open ──(cool-off passed; the next action is the one trial)──▶ half_open
    half_open ──trial ok──▶ closed (cool-off back to the base)
    half_open ──trial failed──▶ open, cool-off doubled (capped at max_cooloff_minutes)

The functions take the current state, the settings, the agent's recent automatic actions of that kind
(`(ts, outcome)` pairs, outcome "ok" or "failed") and `now`; they return the new state and the transitions
(data for the ledger). Nothing here reads a clock or a database.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from occd.config import BreakerSettings, PolicySettings

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
STATES = (CLOSED, OPEN, HALF_OPEN)


@dataclass(frozen=True)
class BreakerState:
    agent: str
    kind: str
    state: str = CLOSED
    opened_at: float | None = None
    failures: int = 0  # failures in the window when last updated
    cooloff_minutes: float | None = None  # None: the configured base
    trial_started_at: float | None = None
    reason: str | None = None
    updated_at: float | None = None


@dataclass(frozen=True)
class Transition:
    agent: str
    kind: str
    from_state: str
    to_state: str
    reason: str
    ts: float


@dataclass(frozen=True)
class Gate:
    allowed: bool
    state: BreakerState  # persist this (it may differ from the input even when nothing transitioned)
    transitions: tuple[Transition, ...] = ()
    reason: str = ""
    trial: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.transitions)


def cooloff(st: BreakerState, settings: BreakerSettings) -> float:
    return st.cooloff_minutes if st.cooloff_minutes is not None else float(settings.cooloff_minutes)


def retry_at(st: BreakerState, settings: BreakerSettings) -> float | None:
    """When an open breaker lets its trial through."""
    if st.state != OPEN or st.opened_at is None:
        return None
    return st.opened_at + cooloff(st, settings) * 60


def _in_window(recent: Sequence[tuple[float, str]], now: float, window_minutes: float) -> list[tuple[float, str]]:
    lo = now - window_minutes * 60
    return [(t, o) for t, o in recent if lo < t <= now]


def _move(st: BreakerState, to: str, reason: str, now: float, **changes) -> tuple[BreakerState, Transition]:
    new = replace(st, state=to, reason=reason, updated_at=now, **changes)
    return new, Transition(st.agent, st.kind, st.state, to, reason, now)


def gate(st: BreakerState, settings: BreakerSettings, recent: Sequence[tuple[float, str]], now: float) -> Gate:
    """Before an automatic action: may it run? Trips a closed breaker whose window is already full."""
    cool = cooloff(st, settings)
    if st.state == OPEN:
        opened = st.opened_at if st.opened_at is not None else now
        if opened > now:  # the clock jumped back: count the cool-off from now rather than from the future
            st = replace(st, opened_at=now, updated_at=now)
            opened = now
        if now >= opened + cool * 60:
            new, t = _move(st, HALF_OPEN, f"cool-off of {cool:g} min passed: one trial allowed", now,
                           trial_started_at=now)
            return Gate(True, new, (t,), t.reason, trial=True)
        left = (opened + cool * 60 - now) / 60
        return Gate(False, st, (), f"breaker open ({st.reason or 'tripped'}); trial in {left:.0f} min")
    if st.state == HALF_OPEN:
        if st.trial_started_at is not None and st.trial_started_at <= now < st.trial_started_at + cool * 60:
            return Gate(False, st, (), "breaker half-open: a trial action is in progress")
        # the trial never reported back (a crash): allow another one
        new = replace(st, trial_started_at=now, updated_at=now)
        return Gate(True, new, (), "breaker half-open: trial allowed", trial=True)
    n = len(_in_window(recent, now, settings.window_minutes))
    if n >= settings.max_actions:
        reason = f"{n} actions in {settings.window_minutes} min (max {settings.max_actions})"
        new, t = _move(st, OPEN, reason, now, opened_at=now, cooloff_minutes=float(settings.cooloff_minutes),
                       trial_started_at=None)
        return Gate(False, new, (t,), f"breaker tripped: {reason}")
    return Gate(True, st, (), "breaker closed")


def record_result(st: BreakerState, settings: BreakerSettings, ok: bool, recent: Sequence[tuple[float, str]],
                  now: float) -> tuple[BreakerState, tuple[Transition, ...]]:
    """After an automatic action. `recent` includes this action's own (ts, outcome)."""
    failures = sum(1 for _, o in _in_window(recent, now, settings.window_minutes) if o == "failed")
    if st.state == HALF_OPEN:
        if ok:
            new, t = _move(st, CLOSED, "trial succeeded", now, opened_at=None, failures=failures,
                           cooloff_minutes=None, trial_started_at=None)
            return new, (t,)
        cool = min(cooloff(st, settings) * 2, float(settings.max_cooloff_minutes))
        new, t = _move(st, OPEN, f"trial failed: cool-off now {cool:g} min", now, opened_at=now, failures=failures,
                       cooloff_minutes=cool, trial_started_at=None)
        return new, (t,)
    if st.state == CLOSED and not ok and failures >= settings.max_failures:
        reason = f"{failures} failures in {settings.window_minutes} min (max {settings.max_failures})"
        new, t = _move(st, OPEN, reason, now, opened_at=now, failures=failures,
                       cooloff_minutes=float(settings.cooloff_minutes), trial_started_at=None)
        return new, (t,)
    return replace(st, failures=failures, updated_at=now), ()


def trip(st: BreakerState, settings: BreakerSettings, reason: str, now: float) -> tuple[BreakerState, tuple[Transition, ...]]:
    """Open the breaker for a reason found elsewhere (e.g. the rotation backoff ran out)."""
    if st.state == OPEN:
        return st, ()
    new, t = _move(st, OPEN, reason, now, opened_at=now, cooloff_minutes=float(settings.cooloff_minutes),
                   trial_started_at=None)
    return new, (t,)


def reset(st: BreakerState, now: float, reason: str = "manual reset") -> tuple[BreakerState, tuple[Transition, ...]]:
    """`occd breaker reset`: closed, base cool-off, failures forgotten."""
    if st.state == CLOSED and st.failures == 0 and st.cooloff_minutes is None:
        return st, ()
    new, t = _move(st, CLOSED, reason, now, opened_at=None, failures=0, cooloff_minutes=None, trial_started_at=None)
    return new, ((t,) if t.from_state != t.to_state else ())


def rotation_breaker_settings(policy: PolicySettings) -> BreakerSettings:
    """The rotation breaker: more than `max_rotations` rotations per agent within its window trips it; the
    cool-off and backoff come from the agent's breaker settings."""
    r = policy.rotation
    return BreakerSettings(max_actions=r.max_rotations, max_failures=policy.breaker.max_failures,
                           window_minutes=r.window_minutes, cooloff_minutes=policy.breaker.cooloff_minutes,
                           max_cooloff_minutes=policy.breaker.max_cooloff_minutes)


def describe(st: BreakerState, settings: BreakerSettings, now: float) -> dict:
    """A JSON-ready view for `occd breaker status` and `occd status`."""
    ra = retry_at(st, settings)
    return {"agent": st.agent, "kind": st.kind, "state": st.state, "reason": st.reason, "openedAt": st.opened_at,
            "failures": st.failures, "cooloffMinutes": cooloff(st, settings), "retryAt": ra,
            "retryInSeconds": None if ra is None else max(0.0, ra - now), "updatedAt": st.updated_at}
