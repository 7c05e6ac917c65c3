"""The circuit breaker around automatic actions, as the jobs use it: load the agent's breaker for an action
kind from the ledger, ask occd.policy.breaker (pure) whether the action may run, persist what changed; after
the action, feed its outcome back. One place for the apply (strip) and score (archive) jobs."""

from __future__ import annotations

from dataclasses import asdict

from occd.policy import breaker as brk


def _recent(led, agent: str, kind: str, settings, now: float):
    return led.action_times(agent, kind, now - settings.window_minutes * 60, trigger="auto")


def gate(led, agent: str, kind: str, settings, now: float) -> brk.Gate:
    """May an automatic `kind` action of `agent` run now? Breaker changes are stored before returning."""
    st = brk.BreakerState(**asdict(led.get_breaker(agent, kind)))
    g = brk.gate(st, settings, _recent(led, agent, kind, settings, now), now)
    if g.changed or g.transitions:
        led.set_breaker(g.state, g.transitions, now=now)
    return g


def record(led, g: brk.Gate, agent: str, kind: str, settings, ok: bool, now: float) -> None:
    """After the action the gate allowed: success closes a half-open breaker, failures may open it."""
    new, transitions = brk.record_result(g.state, settings, ok, _recent(led, agent, kind, settings, now), now)
    led.set_breaker(new, transitions, now=now)
