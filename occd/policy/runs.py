"""How deep and how seldom a session is stripped, by what its own runs add (issue 30). Pure functions.

An agent turn is one run of 0 to many tool calls; OpenClaw checks its estimate before the prompt and again during
the run, after tool results. So what matters is what one run adds to OpenClaw's estimate: the typical run (the
median of the session's recent runs) and a large one (the largest of them). A strip is due when the session's
large run would no longer fit under OpenClaw's budget; it then goes as deep as the rules allow (the newest
KEEP_RESULTS tool results whole, whatever turns they are in) so that the next strip comes as late as possible, and
never so shallow that the large run would not fit after it. Every strip is a prompt-cache break: fewer, deeper
strips cost less than many shallow ones; both are priced against letting OpenClaw compact (`compare`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Sequence

KEEP_RESULTS = 5   # the newest tool results a strip never removes (what the model just read)
RUN_HISTORY = 8    # the runs the typical and large run are learned from
SUMMARY_KEEP_TOKENS = 20000  # what OpenClaw keeps after a compaction (its keepRecentTokens, ~20k)


@dataclass(frozen=True)
class Runs:
    """What one run of this session adds to OpenClaw's estimate (safety margin included)."""
    typical: int
    large: int
    calls: float = 1.0  # tool calls in a typical run (the model is asked once more than that per run)
    n: int = 0          # runs learned from

    def as_dict(self) -> dict:
        return {"typicalRunTokens": self.typical, "largeRunTokens": self.large, "typicalRunCalls": self.calls,
                "runsLearned": self.n}


def learn(sizes: Sequence[int], calls: Sequence[int] = (), *, margin: float = 1.2, n: int = RUN_HISTORY
          ) -> Runs | None:
    """The typical (median) and large (largest) of the last `n` runs' sizes (OpenClaw's estimate without margin,
    each as it was when the run was new), or None when there are none."""
    recent = [max(0, int(s)) for s in sizes][-n:]
    if not recent:
        return None
    c = [max(0, int(x)) for x in calls][-n:]
    return Runs(typical=math.ceil(median(recent) * margin), large=math.ceil(max(recent) * margin),
                calls=float(median(c)) if c else 1.0, n=len(recent))


def due(predicted: int, budget: int, runs: Runs, strip_at_percent: float) -> bool:
    """A strip is due: the session's large run would take OpenClaw's estimate to its budget (it would compact at
    the check after that run, should the daemon miss the gap after it), or the estimate is already past
    `strip_at_percent` of the budget. Not sooner: every strip is a cache break."""
    return predicted + runs.large >= budget or 100.0 * predicted / budget >= strip_at_percent


def runs_until_due(after: int, budget: int, runs: Runs) -> int:
    """Typical runs after a strip to `after` before the next strip is due (the large run must still fit)."""
    if runs.typical <= 0:
        return 1_000_000
    return max(0, math.floor((budget - runs.large - after) / runs.typical))


@dataclass(frozen=True)
class Depth:
    keep_results: int | None  # None: not even keeping none of the old ones leaves room for the large run
    after: int                # OpenClaw's estimate after the strip (overhead included)
    removed: int              # what the strip takes out (margin included)
    runs_until_next: int      # typical runs before the next strip is due
    room: bool                # the large run fits after it
    floor: int                # the newest results the rules keep (at most all there are)
    turns_kept: int = 0       # turns with tools that keep (some of) their results

    def as_dict(self) -> dict:
        return {"keepToolResults": self.keep_results, "predictedAfter": self.after, "removedTokens": self.removed,
                "runsUntilNextStrip": self.runs_until_next, "roomForLargeRun": self.room}


def turns_holding(ctx, keep: int) -> int:
    """How many of the newest turns with tools hold the newest `keep` tool calls."""
    n, need = 0, keep
    for t in reversed(ctx.turns):
        if need <= 0:
            break
        if t.has_tools:
            n += 1
            need -= sum(k for k, _ in t.calls) or 1
    return n


def choose(ctx, predicted: int, budget: int, overhead: int, runs: Runs, keep: int = KEEP_RESULTS,
           margin=None) -> Depth:
    """The strip that leaves the most room: every tool call but the newest `keep` results (the deepest the rules
    allow; a shallower one only brings the next strip, and its cache break, sooner). `room`: the session's large
    run fits after it. The newest `keep` stay as long as OpenClaw's next check passes with them (without room
    for a large run the daemon strips again after the next run); fewer only when it would not: the most that
    leave room for the large run, else the most that pass the next check, else keep_results None.
    `ctx` is a budget.ContextEstimate, `margin` budget.with_margin."""
    from occd.policy.budget import with_margin

    m = margin or with_margin
    floor = min(max(0, keep), ctx.tool_calls)
    before = m(ctx.history)

    def at(k: int) -> tuple[int, int]:
        h = m(ctx.after_keep_results(k))
        return h + overhead, before - h

    def depth(k: int, room: bool) -> Depth:
        after, removed = at(k)
        return Depth(k, after, removed, runs_until_due(after, budget, runs), room, floor, turns_holding(ctx, k))

    after, _ = at(floor)
    if after + runs.large < budget:
        return depth(floor, True)
    if after < budget:  # OpenClaw's next check passes with them: they stay, the daemon strips again after the run
        return depth(floor, False)
    fits = [k for k in range(floor - 1, -1, -1) if at(k)[0] < budget]
    room = [k for k in fits if at(k)[0] + runs.large < budget]
    if room or fits:
        return depth((room or fits)[0], bool(room))
    after, removed = at(0)
    return Depth(None, after, removed, 0, False, floor)


@dataclass(frozen=True)
class Comparison:
    strip_usd: float       # the next `turns` runs with occd stripping as `choose` does (cache breaks priced)
    compact_usd: float     # the same runs with OpenClaw compacting instead
    strips: int
    compactions: int
    turns: int

    def as_dict(self) -> dict:
        return {"stripUsd": round(self.strip_usd, 6), "compactUsd": round(self.compact_usd, 6),
                "strips": self.strips, "compactions": self.compactions, "turns": self.turns}


def _run_usd(prompt: float, runs: Runs, p) -> float:
    """One run from a cached `prompt`: each model request reads what is cached and writes what the run added."""
    reqs = max(1, round(runs.calls)) + 1
    step = runs.typical / reqs
    return sum((prompt + i * step) * p.cacheRead + step * p.cacheWrite for i in range(reqs)) / 1e6


def compare(predicted: int, depth: Depth, budget: int, overhead: int, runs: Runs, p, turns: int = 10,
            summary_tokens: int = 2000) -> Comparison:
    """The next `turns` typical runs priced with a prompt cache (occd.policy.cost.Prices `p`), two ways: occd
    strips now and whenever the large run would no longer fit (each strip writes the rebuilt prompt after
    `overhead` again), or OpenClaw compacts whenever its estimate passes the budget (a summary call over the
    history, then a rebuilt prompt of the overhead, the summary and ~SUMMARY_KEEP_TOKENS written again)."""
    level = depth.after
    s_usd, strips, prompt = 0.0, 0, float(predicted)
    for _ in range(turns):
        if prompt + runs.large >= budget:
            prompt, strips = float(level), strips + 1
            s_usd += max(0.0, prompt - overhead) * (p.cacheWrite - p.cacheRead) / 1e6
        s_usd += _run_usd(prompt, runs, p)
        prompt += runs.typical
    c_usd, comps, prompt = 0.0, 0, float(predicted)
    rebuilt = overhead + summary_tokens + min(SUMMARY_KEEP_TOKENS, budget // 4)
    for _ in range(turns):
        if prompt + runs.typical >= budget:
            c_usd += (prompt * p.input + summary_tokens * p.output) / 1e6
            prompt, comps = float(rebuilt), comps + 1
            c_usd += (prompt - overhead) * (p.cacheWrite - p.cacheRead) / 1e6
        c_usd += _run_usd(prompt, runs, p)
        prompt += runs.typical
    return Comparison(s_usd, c_usd, strips, comps, turns)


@dataclass(frozen=True)
class WindowTooSmall:
    """Strips stop no compaction here and a fresh session would be over the target too: the window is too
    small for the agent's fixed prompt (its system prompt and tool definitions). Figures in OpenClaw's estimate."""
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
    """Whether the session is in a window too small for its agent (issue 30.5), or None. Verified, not predicted:
    OpenClaw compacted after occd's latest strip (the strip did not stop it) while a fresh session would be over
    the target too (a rotation cannot help). Once the strongest strip has been made for it (`strongest_times`)
    it stays so while a fresh session would be over the target: no further strip repeats the same work."""
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
