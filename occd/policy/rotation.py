"""Rotation policy (rotation issue): when a session that keeps compacting is rotated, and with which seed budget.

- Trigger: compaction count >= `rotate_at_compactions`, the session idle (else deferred, retried next cycle).
- Cooldown per session key: after a rotation, the next needs `min_compactions` new compactions AND
  `min_minutes` minutes.
- Breaker per agent: more than `max_rotations` within `window_minutes` trips it (occd.policy.breaker).
- Health and backoff: a new session that compacts again within `health_turns` turns had too big a seed; the
  next rotation of that key uses the next step of the budget ladder (15% → 10% → 5%), then the breaker trips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from occd.config import PolicySettings, RotationSettings
from occd.policy import breaker as brk
from occd.policy.types import Decision, SessionState, excluded, idle_check

POLICY = "rotate_at_compactions"
UNFINISHED = ("PENDING", "ARCHIVING", "ARCHIVED", "INJECTED")
HEALTHY, UNHEALTHY = "healthy", "unhealthy"


@dataclass(frozen=True)
class PastRotation:
    """A previous rotation of the same session key (from the ledger's rotations table)."""

    started: float
    state: str
    finished: float | None = None
    seed_budget_percent: float | None = None
    health: str | None = None  # healthy | unhealthy | None (not known yet)

    @classmethod
    def from_row(cls, row: dict) -> "PastRotation":
        return cls(started=row["started"], state=row["state"], finished=row.get("finished"),
                   seed_budget_percent=row.get("seed_budget_percent"), health=row.get("health"))


def compactions_counted(current: int, baseline: int | None, checkpoint_times=(), *, now: float,
                        window_s: float) -> int:
    """The compactions a scheduled rotation counts (issue 29): those that happened while occd watched or within
    the activity window, not a session's whole past. `baseline`: the session's compaction count when occd began
    to watch it or at the window's start (the ledger's observation then; None: unknown, nothing counted from it);
    `checkpoint_times`: when OpenClaw recorded each compaction (compactionCheckpoints' createdAt), of which those
    within `window_s` of `now` count."""
    watched = max(0, current - baseline) if baseline is not None else 0
    recent = sum(1 for t in checkpoint_times if isinstance(t, (int, float)) and now - window_s <= t <= now + 60)
    return min(current, max(watched, recent))


def seed_ladder(base: float) -> tuple[float, float, float]:
    """15 → 10 → 5 for the default base of 15."""
    return (base, round(base * 2 / 3, 2), round(base / 3, 2))


def assess_health(turns_at_first_compaction: int | None, turns_since_rotation: int,
                  settings: RotationSettings) -> str | None:
    """Was the rotated session's seed too big? unhealthy: it compacted within `health_turns` turns; healthy: it
    got past `health_turns` turns without doing so; None: too early to say."""
    if turns_at_first_compaction is not None and turns_at_first_compaction <= settings.health_turns:
        return UNHEALTHY
    if turns_since_rotation > settings.health_turns or turns_at_first_compaction is not None:
        return HEALTHY
    return None


def next_seed_budget(history: Sequence[PastRotation], settings: RotationSettings) -> float | None:
    """The seed budget (percent of the context window) for the next rotation of a key, from its previous
    rotations (newest first). None: the backoff ran out (three unhealthy rotations in a row)."""
    ladder = seed_ladder(settings.seed_budget_percent)
    streak = 0
    for r in history:
        if r.state in UNFINISHED:
            continue
        if r.health != UNHEALTHY:
            break
        streak += 1
    return ladder[streak] if streak < len(ladder) else None


def decide_rotation(s: SessionState, policy: PolicySettings, *, now: float, history: Sequence[PastRotation] = (),
                    breaker: brk.BreakerState | None = None,
                    recent_rotations: Sequence[tuple[float, str]] = (), force_reason: str | None = None,
                    emergency: bool = False, urgent: bool = False,
                    window_confirmed: bool = True) -> Decision | None:
    """Rotate this session now? `history`: earlier rotations of this session key, newest first;
    `breaker`: the agent's rotation breaker; `recent_rotations`: the agent's automatic rotations as (ts, outcome).

    A decision that changes the breaker carries the new state in details["breaker"] and the transitions in
    details["transitions"] (persist both, with Ledger.set_breaker, only when the decision is acted on or
    blocked).

    `force_reason`: the strip-to-target policy asks for a rotation (no strip reaches its target): the compaction
    threshold does not apply; with `emergency` (a spiral or a blocked session) the cooldown does not either, the
    in-progress check, the backoff and the breaker still do.

    `window_confirmed` False: the session's figure changed without a turn (OpenClaw's config was edited since its
    last turn, occd.openclaw.figure.window_choice): no rotation on it until the next turn confirms it (blocked,
    so the caller's strip fallback still applies)."""
    r = policy.rotation
    if not r.enabled or s.archived or excluded(s.session_key, policy.exclude):
        return None
    if force_reason is None and s.compaction_count < r.rotate_at_compactions:
        return None
    base = dict(action="rotate", agent=s.agent, session_id=s.session_id, session_key=s.session_key)
    details: dict = {"compactions": s.compaction_count, "threshold": r.rotate_at_compactions}
    reason = force_reason or f"{s.compaction_count} compactions >= {r.rotate_at_compactions}"
    if not window_confirmed:
        return Decision(**base, policy="window_unconfirmed", blocked=True, details={**details, "windowUnconfirmed": True},
                        reason=f"{reason}; the context window changed with a config edit since the session's last "
                               "turn: re-checked at its next turn before it is rotated")
    last = history[0] if history else None
    if last is not None and last.state in UNFINISHED:
        return Decision(**base, policy=POLICY, reason=f"{reason}; a rotation of this key is in progress ({last.state})",
                        deferred=True, details=details)
    if last is not None and not emergency:
        since = now - (last.finished or last.started)
        waits = []
        if s.compaction_count < r.min_compactions:
            waits.append(f"{s.compaction_count}/{r.min_compactions} new compactions")
        if since < r.min_minutes * 60:
            waits.append(f"{since / 60:.0f}/{r.min_minutes} min since the last rotation")
        if waits:
            return Decision(**base, policy="rotation_cooldown", reason=f"{reason}; cooldown: " + ", ".join(waits),
                            blocked=True, details={**details, "cooldown": waits})
    budget = next_seed_budget(history, r)
    details["seedBudgetPercent"] = budget
    busy = idle_check(s, 0 if emergency or urgent else policy.gentle_wait_minutes(), now)  # urgent: no idle wait
    if busy:
        return Decision(**base, policy=POLICY, reason=f"{reason}; deferred: {busy}", deferred=True, details=details)
    bset = brk.rotation_breaker_settings(policy)
    st = breaker or brk.BreakerState(agent=s.agent, kind="rotate")
    if budget is None:
        why = f"rotation backoff exhausted for {s.session_key}: the last {len(seed_ladder(1))} rotations compacted " \
              f"again within {r.health_turns} turns"
        if policy.mode == "observe":
            return Decision(**base, policy="rotation_backoff", reason=f"{why} (observe mode: would trip the breaker)",
                            would_do=True, blocked=True, details=details)
        new, trans = brk.trip(st, bset, why, now)
        return Decision(**base, policy="rotation_backoff", reason=why, blocked=True,
                        details={**details, "breaker": new, "transitions": trans})
    if policy.mode == "observe":
        return Decision(**base, policy=POLICY, reason=f"{reason} (observe mode: would rotate with a "
                                                      f"{budget:g}% seed)", would_do=True, details=details)
    g = brk.gate(st, bset, recent_rotations, now)
    details.update(breaker=g.state, transitions=g.transitions)
    if not g.allowed:
        return Decision(**base, policy="rotation_breaker", reason=f"{reason}; {g.reason}", blocked=True,
                        details=details)
    details["trial"] = g.trial
    return Decision(**base, policy=POLICY, reason=f"{reason}: rotate with a {budget:g}% seed", details=details)
