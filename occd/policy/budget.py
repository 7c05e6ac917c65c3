"""OpenClaw's own compaction trigger, predicted: pure functions of a transcript's context messages, OpenClaw's
recorded `contextBudgetStatus`, the settings and `now`. No I/O.

OpenClaw 2026.7.x decides before each prompt (src/agents/embedded-agent-runner/run/preemptive-compaction.ts,
`shouldPreemptivelyCompactBeforePrompt`): it estimates the whole prompt (history + system prompt + the new user
message) with its own "token pressure" rules — text at chars/4, tool results at max(chars/2, chars/4), JSON
payloads (tool-call arguments, unknown blocks) at chars/3, 12 tokens per message and 6 per content block, 2,000
per image — times a safety margin of 1.2, and compacts when that exceeds `promptBudgetBeforeReserve` =
window − reserve, the reserve being max(`compaction.reserveTokens` (default 16384), `reserveTokensFloor` (default
20000)) capped so that min(8000, window/2) tokens stay for the prompt. It records each check in sessions.json as
`contextBudgetStatus` (estimatedPromptTokens, promptBudgetBeforeReserve, messageCount, ...).

occd predicts the next check as 1.2 × (the transcript's context, estimated with the same rules) + the session's
prompt overhead (system prompt, tool descriptions, the new message), learned as OpenClaw's recorded estimate
minus 1.2 × the estimate of the `messageCount` context messages it had then; DEFAULT_OVERHEAD_TOKENS when no
record fits. The next turn adds about as much as the recent turns did (the growth margin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

# the per-message rules (occd.policy.estimate), used here and named here for the budget's callers
from occd.policy.estimate import (SAFETY_MARGIN, has_tool_calls, message_tokens, slim_entry,  # noqa: F401
                                  strippable_tokens, tool_call_count)

MIN_PROMPT_BUDGET_TOKENS = 8000
MIN_PROMPT_BUDGET_RATIO = 0.5
DEFAULT_RESERVE_TOKENS = 16384        # the agent runtime's default compaction.reserveTokens
DEFAULT_RESERVE_TOKENS_FLOOR = 20000  # OpenClaw's DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR
# The prompt overhead when no recorded check fits: OpenClaw 2026.7.1's system prompt with its default tools and a
# short user message estimates at ~9.5k (×1.2 included); a little more, so an unknown agent is not underestimated.
DEFAULT_OVERHEAD_TOKENS = 12000
GROWTH_TURNS = 3  # the growth margin is the largest of the last few turns
GAP_RUNS = 3      # the gaps between runs that tell whether a session's user leaves occd time to act
LARGE_TURNS = 20  # a session's large runs: the largest of its last this many turns (issue 30.1)


def prompt_budget(window: int, reserve_tokens: int | None = None, reserve_floor: int | None = None,
                  reserve_cap: float | None = None) -> int:
    """OpenClaw's promptBudgetBeforeReserve for a context window (applyAgentCompactionSettingsFromConfig and
    shouldPreemptivelyCompactBeforePrompt): window − max(reserveTokens, reserveTokensFloor), the reserve capped
    so that min(8000, window/2) tokens stay for the prompt. `reserve_cap` (OpenClaw 2026.9.5+: 0.25): the reserve
    is at most that share of the window instead."""
    window = max(1, int(window))
    if reserve_cap is not None:
        floor = DEFAULT_RESERVE_TOKENS_FLOOR if reserve_floor is None else max(0, int(reserve_floor))
        reserve = max(DEFAULT_RESERVE_TOKENS if reserve_tokens is None else max(0, int(reserve_tokens)), floor)
        return max(1, window - min(reserve, math.floor(window * reserve_cap)))
    floor = DEFAULT_RESERVE_TOKENS_FLOOR if reserve_floor is None else max(0, int(reserve_floor))
    min_prompt = min(MIN_PROMPT_BUDGET_TOKENS, max(1, math.floor(window * MIN_PROMPT_BUDGET_RATIO)))
    max_reserve = max(0, window - min_prompt)
    floor = min(floor, max_reserve)
    reserve = DEFAULT_RESERVE_TOKENS if reserve_tokens is None else max(0, int(reserve_tokens))
    reserve = min(max(reserve, floor), max_reserve)
    return max(1, window - reserve)


# ---- the transcript's context, per turn --------------------------------------------------------------------


@dataclass(frozen=True)
class TurnEstimate:
    total: int       # the turn's messages (user message to the next one), OpenClaw's estimate, no margin
    tools: int       # what stripping the turn's tool calls would take out of it
    has_tools: bool
    calls: tuple[tuple[int, int], ...] = ()  # per message with tool calls: (its calls, what stripping it and
    #                                          its results takes out)

    @property
    def call_groups(self) -> tuple[tuple[int, int], ...]:
        """`calls`, or for a turn with tools known only by its totals one group of one call; () without tools."""
        return (self.calls or ((1, self.tools),)) if self.has_tools else ()

    @property
    def n_calls(self) -> int:
        return sum(k for k, _ in self.call_groups)


@dataclass(frozen=True)
class ContextEstimate:
    """The messages OpenClaw sends (the active path from the latest compaction), estimated per message and
    grouped in user turns. `base` is what comes before the first user turn (a compaction summary, ...)."""

    base: int = 0
    turns: tuple[TurnEstimate, ...] = ()
    per_message: tuple[int, ...] = ()

    @property
    def history(self) -> int:
        return self.base + sum(t.total for t in self.turns)

    def after_keep(self, keep: int) -> int:
        """The history after stripping the tool calls of all but the newest `keep` turns with tools."""
        with_tools = [i for i, t in enumerate(self.turns) if t.has_tools]
        drop = with_tools[:max(0, len(with_tools) - keep)]
        return self.history - sum(self.turns[i].tools for i in drop)

    def after_keep_results(self, keep: int) -> int:
        """The history after stripping every tool call but the newest `keep` (with their results; a message's
        calls stay together, as the executor keeps them: occd.cleaner.plan `keep_results`)."""
        removed, need = 0, max(0, keep)
        for t in reversed(self.turns):
            if not t.has_tools:
                continue
            if need <= 0:
                removed += t.tools
                continue
            groups = t.call_groups
            for i in range(len(groups) - 1, -1, -1):
                need -= groups[i][0]
                if need <= 0:
                    removed += sum(v for _, v in groups[:i])
                    break
        return self.history - removed

    @property
    def tool_calls(self) -> int:
        return sum(t.n_calls for t in self.turns)

    @property
    def turns_with_tools(self) -> int:
        return sum(1 for t in self.turns if t.has_tools)

    def requests_per_turn(self, n: int = 3) -> float:
        """The model requests a turn of this session makes: over its newest `n` turns with tools, the messages
        with tool calls plus the answer (a run of 12 calls one after another is 13); 1 without such a turn.
        Every request of a run reads the whole prompt again, so what a strip takes out is saved that often."""
        recent = [t for t in self.turns if t.has_tools][-n:]
        if not recent:
            return 1.0
        return sum(len(t.call_groups) + 1 for t in recent) / len(recent)


def context_messages(entries: Sequence[dict]) -> list[dict]:
    """The messages of a transcript's active path as OpenClaw builds its context (buildSessionContext): leaf
    (the last entry) to root by parentId; from the latest compaction on the path, its summary, then the path
    from its firstKeptEntryId, then what follows it. Entries are the parsed lines (dicts)."""
    by_id = {e.get("id"): e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
    leaf = next((e for e in reversed(entries) if isinstance(e, dict) and e.get("type") != "session"
                 and isinstance(e.get("id"), str)), None)
    path: list[dict] = []
    seen: set = set()
    e = leaf
    while e is not None and e.get("id") not in seen:
        seen.add(e.get("id"))
        path.append(e)
        pid = e.get("parentId")
        e = by_id.get(pid) if isinstance(pid, str) else None
    path.reverse()
    ci = max((i for i, x in enumerate(path) if x.get("type") == "compaction"), default=None)
    out: list[dict] = []
    if ci is None:
        sel = path
    else:
        comp = path[ci]
        out.append({"role": "compactionSummary", "summary": comp.get("summary")})
        first = comp.get("firstKeptEntryId")
        start = next((i for i, x in enumerate(path[:ci]) if x.get("id") == first), ci)
        sel = path[start:ci] + path[ci + 1:]
    for x in sel:
        t = x.get("type")
        if t == "message" and isinstance(x.get("message"), dict):
            out.append(x["message"])
        elif t == "custom_message":
            out.append(x.get("_msg") or {"role": "custom", "content": x.get("content")})
        elif t == "branch_summary":
            out.append({"role": "branchSummary", "summary": x.get("summary")})
    return out


def estimate_context(messages: Iterable[dict]) -> ContextEstimate:
    base = 0
    per: list[int] = []
    turns: list[list] = []  # [total, tools, has_tools, [[calls, tokens], ...]]
    for m in messages:
        n = m["_est"] if "_est" in m else message_tokens(m)
        per.append(n)
        if m.get("role") == "user":
            turns.append([0, 0, 0, []])
        if not turns:
            base += n
            continue
        cur = turns[-1]
        cur[0] += n
        st = m["_strip"] if "_strip" in m else strippable_tokens(m)
        cur[1] += st
        calls = m["_calls"] if "_calls" in m else tool_call_count(m)
        if calls or (m["_tools"] if "_tools" in m else has_tool_calls(m)):
            cur[2] = 1
            cur[3].append([max(1, calls), st])
        elif st and cur[3]:  # a tool result: it goes with the calls before it
            cur[3][-1][1] += st
    return ContextEstimate(base, tuple(TurnEstimate(a, b, bool(c), tuple((k, v) for k, v in d))
                                       for a, b, c, d in turns), tuple(per))


def provider_count(usage) -> int:
    """The provider's count of a request (its prompt and reply), as OpenClaw's agent library takes it from an
    assistant message's usage: totalTokens, else input + output + cacheRead + cacheWrite; 0 when unknown."""
    if not isinstance(usage, dict):
        return 0
    t = usage.get("totalTokens")
    if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
        return int(t)
    parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    return int(sum(v for v in parts if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0))


def last_count(messages: Sequence[dict], ctx: ContextEstimate) -> tuple[int, int] | None:
    """(the provider's count of the last request with one, OpenClaw's estimate of the messages it was sent, no
    margin): the newest assistant message with a usage, and the messages before it. None without one."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant":
            n = provider_count(m.get("usage"))
            if n > 0:
                return n, sum(ctx.per_message[:i])
    return None


def count_ratio(count: tuple[int, int] | None, overhead: int) -> float:
    """The provider's tokens per estimated token for this session, from its last request (last_count): at most
    1 (a strip since that request makes the estimate smaller than what was sent; the ratio is then high, not
    low); 0 when unknown."""
    if not count or count[0] <= 0:
        return 0.0
    return min(1.0, count[0] / max(1, with_margin(count[1]) + overhead))


def reply_gaps(messages: Sequence[dict], n: int = 0) -> tuple[float, ...]:
    """The time from each run's end to the next user message (seconds, the last `n`; all with 0): a user
    message after an assistant's reply that calls no tool, both with a time (`_ts`, occd.policy.estimate
    .entry_time). A follow-up queued while the agent worked shows as a gap near 0."""
    out: list[float] = []
    prev = None
    for m in messages:
        if m.get("role") == "user" and prev is not None and prev.get("role") == "assistant" \
                and not (prev["_tools"] if "_tools" in prev else has_tool_calls(prev)):
            a, b = prev.get("_ts"), m.get("_ts")
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                out.append(max(0.0, float(b) - float(a)))
        prev = m
    return tuple(out[-n:] if n else out)


def spare_runs(gaps: Sequence[float], needed: float, n: int = GAP_RUNS) -> int:
    """The runs of margin occd keeps for a gap between runs it may miss: 0 when the session's last `n` gaps
    (reply_gaps) all left occd `needed` seconds to act (its settle time and a strip, with slack), else 1 (a
    new session, a follow-up queued while the agent worked, a cron agent whose runs follow each other)."""
    recent = list(gaps)[-n:]
    return 0 if n > 0 and len(recent) >= n and min(recent) >= needed else 1


def with_margin(tokens: float) -> int:
    return math.ceil(tokens * SAFETY_MARGIN)


def learn_overhead(status: dict | None, ctx: ContextEstimate) -> int | None:
    """The prompt overhead (system prompt, tools, the new message: estimate units, margin included) from one of
    OpenClaw's recorded checks: estimatedPromptTokens − 1.2 × the first `messageCount` context messages. None
    when the record does not fit this context (no record, fewer messages now than then, nonsense values), and
    when it is the check that made OpenClaw compact (`shouldCompact`): its `messageCount` counts the history
    from before that compaction, and the summary that replaced it would be read as overhead."""
    if not isinstance(status, dict) or status.get("shouldCompact") is True:
        return None
    est, count = status.get("estimatedPromptTokens"), status.get("messageCount")
    if not isinstance(est, int) or not isinstance(count, int) or isinstance(est, bool) or isinstance(count, bool):
        return None
    if est <= 0 or count < 0 or count > len(ctx.per_message):
        return None
    over = est - with_margin(sum(ctx.per_message[:count]))
    budget = status.get("promptBudgetBeforeReserve")
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0 and over >= budget:
        return None  # more overhead than the whole budget: the record is of another history
    return over if over > 0 else None


def growth_margin(ctx: ContextEstimate, default: int, n: int = GROWTH_TURNS) -> int:
    """What the next turn will likely add to the estimate (margin included): the largest of the last `n` turns,
    else `default`."""
    recent = [t.total for t in ctx.turns[-n:]]
    return with_margin(max(recent)) if recent else default


@dataclass(frozen=True)
class Prediction:
    predicted: int         # OpenClaw's pre-prompt estimate for the next turn, if it came now
    budget: int            # promptBudgetBeforeReserve
    growth: int            # what one more turn adds
    overhead: int
    overhead_source: str   # session | agent | default
    large: int = 0         # a run like the session's large ones (0: not counted), when a strip can
    #                        make room for it (jobs.budget.evaluate)
    midrun: bool = True    # OpenClaw checks its estimate mid-run too (compaction.midTurnPrecheck.enabled; its
    #                        default is off: jobs.budget.evaluate says so from the config)
    spare: int = 1         # runs of margin for a gap occd may miss (spare_runs)
    count_ratio: float = 0.0  # the provider's tokens per estimated token (count_ratio; 0: unknown)
    requests: float = 1.0  # model requests a turn (ContextEstimate.requests_per_turn): each reads the prompt

    def checks(self, spare: int | None = None) -> list[tuple[str, int, int]]:
        """OpenClaw's checks occd must get ahead of, `spare` runs (default self.spare) after the next one, as
        (kind, runs, its predicted estimate): the prompt's, before a run (the history and the prompt overhead);
        the run's end, where OpenClaw checks the history again without the overhead (2026.7.35's gateway
        `agent` command, runCliTurnCompactionLifecycle in dist/cli-compaction-*.js: every message of the branch
        at 1.2 x its estimate, or the provider's last count if larger, against the same budget, before the
        reply is delivered; a run that ended with 12 results estimated at 132.5k of a 108k budget compacted
        there, one with 8, 88.4k, did not). The provider's count, system prompt and tools included, is predicted
        as the whole estimate at `count_ratio` (a 48k window whose tools count 22k at the provider: two results
        of 5k passed its 28k budget there, where the history's estimate did not); mid-run, after the tool
        results, with the overhead, where `midrun` (compaction.midTurnPrecheck) is on."""
        k, g = (self.spare if spare is None else spare), self.growth
        out = [("prompt", k, self.predicted + k * g), ("end", k + 1, self.predicted - self.overhead + (k + 1) * g)]
        if self.count_ratio > 0:  # the run's end again: the provider's count, if larger than the estimate
            out.append(("end", k + 1, math.ceil(self.count_ratio * (self.predicted + (k + 1) * g))))
        if self.midrun:
            out.append(("midrun", k + 1, self.predicted + (k + 1) * g))
        return out

    def check(self, spare: int | None = None) -> tuple[str, int, int]:
        """The first of `checks` to pass the budget: the one with the largest estimate."""
        return max(self.checks(spare), key=lambda c: c[2])

    @property
    def percent(self) -> float:
        return 100.0 * self.predicted / self.budget

    @property
    def after_next_percent(self) -> float:
        return 100.0 * (self.predicted + self.growth) / self.budget


def predict(ctx: ContextEstimate, budget: int, overhead: int, *, overhead_source: str = "session",
            growth_floor: int | None = None) -> Prediction:
    """`growth_floor`: growth seen earlier (turns remembered as they were before occd stripped them); the margin
    is at least that. No turns and no floor: a tenth of the budget."""
    g = growth_margin(ctx, budget // 10)
    if growth_floor is not None:
        g = max(g, growth_floor) if ctx.turns else growth_floor
    return Prediction(with_margin(ctx.history) + overhead, budget, g, overhead, overhead_source,
                      requests=ctx.requests_per_turn())


def should_strip(p: Prediction, strip_at_budget_percent: float = 100) -> bool:
    """The trigger (issue 30.1: strip as seldom as the rules allow; each strip is a prompt-cache break).
    OpenClaw compacts when its estimate passes its budget at a check (Prediction.checks): before each run's
    prompt, at each run's end, and mid-run only with `compaction.midTurnPrecheck` on (off by default). occd acts
    in the gap after a run, so it strips when the estimate at the first check it must get ahead of would pass
    `strip_at_budget_percent` of the budget: the next prompt's or the next run's end, or a run later when the
    session keeps a turn to spare (a user who may follow up before occd acted: spare_runs); or when one run like
    the session's large ones would reach the budget (large_due)."""
    return p.check()[2] >= p.budget * strip_at_budget_percent / 100.0 or large_due(p)


def large_due(p: Prediction) -> bool:
    """One run like the session's large ones (Prediction.large) would reach OpenClaw's budget."""
    return p.large > 0 and p.predicted + p.large >= p.budget


def urgency(p: Prediction) -> str | None:
    """Why acting cannot wait for the prompt cache to expire, or None (a gentle action): "next-turn" when
    OpenClaw would compact at a check of the next run (its prompt's, its end's, mid-run's: Prediction.checks);
    "no-turn-to-spare" when it would one run later and the session keeps a turn to spare (Prediction.spare);
    "large-run" when a run like the session's large ones would (Prediction.large)."""
    if p.check(0)[2] >= p.budget:
        return "next-turn"
    if p.spare and p.check()[2] >= p.budget:
        return "no-turn-to-spare"
    if large_due(p):
        return "large-run"
    return None


@dataclass(frozen=True)
class StripTarget:
    keep_turns_with_tools: int | None   # None: even removing every old tool call cannot reach the target
    predicted_after: int
    target: int
    removed: int = 0
    reachable: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    safe_keep: int | None = None  # unreachable: the most turns with tools (<= the kept floor) that leave OpenClaw
    #                               no compaction during the next turn (None: not even keeping none)
    floor: int = 0                # the newest turns with tools kept whatever the target (keep_recent, at most all)
    removed_all: int | None = None   # unreachable: what the strongest strip (keeping none) removes, and where it
    after_all: int | None = None     # leaves the estimate
    results: "ResultsDepth | None" = None  # the strip by tool results (keep_results given), when one leaves room


@dataclass(frozen=True)
class ResultsDepth:
    """The deepest strip the rules allow, counted in tool results (issue 30.1): every tool call but the newest
    `keep` goes (a run of 4 calls makes 4), so the next strip, a prompt-cache break, comes as late as it can.
    `keep` is the floor (`keep_recent_results`) or, when keeping that many leaves OpenClaw no room for the
    next run, the most that do."""

    keep: int          # tool results kept whole
    floor: int         # what the rules ask for (keep_recent_results, at most the session's tool calls)
    turns: int         # the turns with tools those results span
    after: int         # OpenClaw's predicted estimate after it (margin and overhead included)
    removed: int       # what it takes out of the estimate (margin included)


def results_depth(ctx: ContextEstimate, p: Prediction, keep_results: int) -> ResultsDepth | None:
    """The deepest strip by tool results that leaves OpenClaw a run of room (after + growth < budget), keeping
    the newest `keep_results` (or fewer when they leave none); None when not even stripping all of them does."""
    floor = min(max(0, keep_results), ctx.tool_calls)
    before = with_margin(ctx.history)
    for k in range(floor, -1, -1):
        hist = ctx.after_keep_results(k)
        after = with_margin(hist) + p.overhead
        if after + p.growth < p.budget:
            return ResultsDepth(k, floor, _turns_spanned(ctx, k), after, before - with_margin(hist))
    return None


def _turns_spanned(ctx: ContextEstimate, keep: int) -> int:
    n, need = 0, keep
    for t in reversed(ctx.turns):
        if need <= 0:
            break
        if t.has_tools:
            n += 1
            need -= t.n_calls
    return n


def strip_to_target(ctx: ContextEstimate, p: Prediction, target_percent: float, keep_recent: int = 0,
                    keep_results: int | None = None) -> StripTarget:
    """The gentlest strip (the most turns with tools kept) whose predicted estimate is under `target_percent`
    of the budget, never keeping fewer than the newest `keep_recent` turns with tools (what the model just read).
    When keeping that many is still over it, `keep_turns_with_tools` is None (rotate, or the strongest allowed
    strip) and `predicted_after`/`removed` say how far the strongest allowed strip gets. The decision uses this
    for what to do (strip, rotate, nothing); with `keep_results`, `results` says how deep a strip then goes
    (results_depth: the newest that many tool results whole, the rest stripped)."""
    from dataclasses import replace

    t = _strip_to_target(ctx, p, target_percent, keep_recent)
    if keep_results is None:
        return t
    return replace(t, results=results_depth(ctx, p, keep_results))


def _strip_to_target(ctx: ContextEstimate, p: Prediction, target_percent: float, keep_recent: int = 0) -> StripTarget:
    target = math.floor(p.budget * target_percent / 100.0)
    n = ctx.turns_with_tools
    floor = min(max(0, keep_recent), n)
    before = with_margin(ctx.history)
    for keep in range(n, floor - 1, -1):
        after = with_margin(ctx.after_keep(keep)) + p.overhead
        if after <= target:
            if keep == n:
                return StripTarget(n, after, target, 0, True, ("already under the target",))
            return StripTarget(keep, after, target, before - with_margin(ctx.after_keep(keep)))
    after = with_margin(ctx.after_keep(floor)) + p.overhead
    notes = (f"the newest {floor} turns with tools are kept",) if floor else ()
    safe = next((k for k in range(floor, -1, -1)
                 if with_margin(ctx.after_keep(k)) + p.overhead + p.growth < p.budget), None)
    after0 = with_margin(ctx.after_keep(0)) + p.overhead
    return StripTarget(None, after, target, before - with_margin(ctx.after_keep(floor)), False, notes, safe, floor,
                       before - with_margin(ctx.after_keep(0)), after0)
