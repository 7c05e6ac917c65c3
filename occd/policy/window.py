"""A context window too small for its agent (issue 30.5): strips did not stop OpenClaw compacting, and a fresh
session would be over the target too, so neither a strip nor a rotation can help. Pure: figures in OpenClaw's
estimate, times in epoch seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class WindowTooSmall:
    """Strips stop no compaction here and a fresh session would be over the target too: the window is too
    small for the agent's fixed prompt (its system prompt and tool definitions)."""
    overhead: int          # the agent's fixed prompt (system prompt, tools, the new message)
    budget: int            # OpenClaw's budget (window - reserve)
    window: int | None
    fresh: int             # a rotated session's estimate (overhead + seed)
    target: int            # strip_target_percent of the budget
    strongest_done: bool   # the strongest strip was made after it was seen: nothing more to do
    removed: int = 0       # what the strongest strip takes out
    after: int = 0         # and where it leaves the estimate

    def message(self) -> str:
        w = f"a {self.window}-token window" if self.window else "this window"
        return (f"{w} is too small for this agent: its fixed prompt (system prompt and tools) alone is "
                f"{self.overhead} tokens, {100.0 * self.overhead / self.budget:.0f}% of OpenClaw's {self.budget}-token "
                f"budget, and a fresh session ({self.fresh}) would be over the target ({self.target}) too; strips "
                "did not stop OpenClaw compacting")

    def as_dict(self) -> dict:
        return {"overheadTokens": self.overhead, "promptBudget": self.budget, "contextWindow": self.window,
                "freshSessionTokens": self.fresh, "targetTokens": self.target}


def window_too_small(*, overhead: int, budget: int, window: int | None, fresh: int | None, target: int,
                     strip_times: Sequence[float], strongest_times: Sequence[float],
                     last_compaction: float | None, removed: int = 0, after: int = 0) -> WindowTooSmall | None:
    """Whether the session is in a window too small for its agent, or None. Verified, not predicted: OpenClaw
    compacted after occd's latest strip (the strip did not stop it) while a fresh session would be over the target
    too (a rotation cannot help). Once the strongest strip has been made for it (`strongest_times`) it stays so
    while a fresh session would be over the target: no further strip repeats the same work."""
    if fresh is None or fresh <= target:
        return None
    args = dict(overhead=overhead, budget=budget, window=window, fresh=fresh, target=target, removed=removed,
                after=after)
    if strongest_times:
        return WindowTooSmall(strongest_done=True, **args)
    last = max(strip_times, default=None)
    if last is None or last_compaction is None or last_compaction <= last:
        return None
    return WindowTooSmall(strongest_done=False, **args)
