"""Pure decisions: session state, settings and `now` in; decisions (and breaker transitions) out. No I/O.

- strip.decide_strip: strip when context use passes the threshold (idle, not excluded, under the hourly limit)
- breaker: the per agent and action kind circuit breaker (closed → open → half_open → closed)
- rotation.decide_rotation: rotate sessions that keep compacting (cooldown, breaker, seed-budget backoff)
- archive.decide_archive: archive old idle sessions with low relevance
"""

from occd.policy.types import Decision, SessionState

__all__ = ["Decision", "SessionState"]
