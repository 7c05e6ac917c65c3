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

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

SAFETY_MARGIN = 1.2
CHARS_PER_TOKEN = 4
TOOL_RESULT_CHARS_PER_TOKEN = 2
JSON_CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 12
BLOCK_OVERHEAD = 6
IMAGE_TOKENS = 2000
MIN_PROMPT_BUDGET_TOKENS = 8000
MIN_PROMPT_BUDGET_RATIO = 0.5
DEFAULT_RESERVE_TOKENS = 16384        # the agent runtime's default compaction.reserveTokens
DEFAULT_RESERVE_TOKENS_FLOOR = 20000  # OpenClaw's DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR
# The prompt overhead when no recorded check fits: OpenClaw 2026.7.1's system prompt with its default tools and a
# short user message estimates at ~9.5k (×1.2 included); a little more, so an unknown agent is not underestimated.
DEFAULT_OVERHEAD_TOKENS = 12000
GROWTH_TURNS = 3  # the growth margin is the largest of the last few turns

_NON_LATIN = re.compile("[\u2E80-\u9FFF\uA000-\uA4FF\uAC00-\uD7AF\uF900-\uFAFF\uFF01-\uFF60\uFFE0-\uFFE6"
                        "\U00020000-\U0002FA1F]")
_COMPACTION_PREFIX = ("The conversation history before this point was compacted into the following summary:\n\n"
                      "<summary>\n")
_COMPACTION_SUFFIX = "\n</summary>"
_BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
_BRANCH_SUFFIX = "\n</summary>"


def _js_len(s: str) -> int:
    """JavaScript's String.length (UTF-16 code units)."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def _chars(s: str) -> int:
    """OpenClaw's estimateStringChars: non-Latin (CJK, ...) characters count 4."""
    if not s:
        return 0
    if s.isascii():
        return len(s)
    n = len(_NON_LATIN.findall(s))
    return (_js_len(s) - sum(1 for ch in s if 0x20000 <= ord(ch) <= 0x2FA1F)) + 3 * n if n else _js_len(s)


def _str(s: str, cpt: int = CHARS_PER_TOKEN) -> int:
    return math.ceil(_chars(s) / cpt)


def _dumps(v: Any) -> str | None:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _json(v: Any, cpt: int = JSON_CHARS_PER_TOKEN) -> int:
    s = _dumps(v)
    return 256 if s is None else math.ceil(_chars(s) / cpt)


def _ident(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, (str, int, float, bool)):
        return _str(str(v), JSON_CHARS_PER_TOKEN)
    return _json(v)


def _block(b: Any) -> int:
    if isinstance(b, str):
        return _str(b)
    if not isinstance(b, dict):
        return _json(b, CHARS_PER_TOKEN)
    t = b.get("type")
    if t == "text" and isinstance(b.get("text"), str):
        return BLOCK_OVERHEAD + _str(b["text"])
    if t == "thinking" and isinstance(b.get("thinking"), str):
        return BLOCK_OVERHEAD + _str(b["thinking"])
    if t == "image":
        return IMAGE_TOKENS
    return BLOCK_OVERHEAD + _json(b, CHARS_PER_TOKEN)


def _result_str(s: str) -> int:
    return max(math.ceil(_js_len(s) / TOOL_RESULT_CHARS_PER_TOKEN), _str(s))


def _result_block(b: Any) -> int:
    if isinstance(b, str):
        return _result_str(b)
    if not isinstance(b, dict):
        s = _dumps(b)
        return 256 if s is None else _result_str(s)
    t = b.get("type")
    if t == "text" and isinstance(b.get("text"), str):
        return BLOCK_OVERHEAD + _result_str(b["text"])
    if t == "thinking" and isinstance(b.get("thinking"), str):
        return BLOCK_OVERHEAD + _result_str(b["thinking"])
    if t == "image":
        return IMAGE_TOKENS
    s = _dumps(b)
    return BLOCK_OVERHEAD + (256 if s is None else _result_str(s))


def _content(c: Any) -> int:
    if isinstance(c, str):
        return _str(c)
    if isinstance(c, list):
        return sum(_block(b) for b in c)
    return 0 if c is None else _json(c)


def tool_call_tokens(b: dict) -> int:
    args = b.get("arguments", b.get("input", b.get("args", {})))
    if args is None:
        args = {}
    return BLOCK_OVERHEAD + _ident(b.get("name")) + _json(args)


def is_tool_call(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") in ("toolCall", "tool_use")


def message_tokens(m: dict) -> int:
    """OpenClaw's estimateMessageTokenPressure for one context message (before the safety margin)."""
    role = m.get("role")
    n = MESSAGE_OVERHEAD
    if role in ("toolResult", "tool") or m.get("type") == "toolResult":
        c = m.get("content")
        if isinstance(c, str):
            n += _result_str(c)
        elif isinstance(c, list):
            n += sum(_result_block(b) for b in c)
        elif c is not None:
            s = _dumps(c)
            n += 256 if s is None else _result_str(s)
        return n + _ident(m.get("toolName", m.get("tool_name")))
    if role == "bashExecution":
        if m.get("excludeFromContext") is True:
            return 0
        return n + _str(f"{m.get('command', '')}\n{m.get('output', '')}")
    if role == "branchSummary":
        s = m.get("summary") if isinstance(m.get("summary"), str) else ""
        return n + _str(_BRANCH_PREFIX + s + _BRANCH_SUFFIX)
    if role == "compactionSummary":
        s = m.get("summary") if isinstance(m.get("summary"), str) else ""
        return n + _str(_COMPACTION_PREFIX + s + _COMPACTION_SUFFIX)
    if role == "assistant":
        c = m.get("content")
        if isinstance(c, list):
            for b in c:
                n += tool_call_tokens(b) if is_tool_call(b) else _block(b)
        else:
            n += _content(c)
        calls = m.get("toolCalls", m.get("tool_calls"))
        if isinstance(calls, list):
            n += sum(tool_call_tokens(x) if isinstance(x, dict) else _json(x) for x in calls)
        return n
    return n + _content(m.get("content"))


def has_tool_calls(m: dict) -> bool:
    return m.get("role") == "assistant" and isinstance(m.get("content"), list) and any(is_tool_call(b) for b in m["content"])


def slim_entry(o: dict) -> dict:
    """A transcript line reduced to what the estimate and the emergency detection need: messages carry their
    estimate (`_est`), what a strip removes (`_strip`) and whether they call tools (`_tools`), not their content
    (an assistant's text is kept short, with its usage). Keeps a 100 MB transcript from being held in memory."""
    t = o.get("type")
    base = {"type": t, "id": o.get("id"), "parentId": o.get("parentId")}
    if t == "message" and isinstance(o.get("message"), dict):
        m = o["message"]
        sm = {"role": m.get("role"), "_est": message_tokens(m), "_strip": strippable_tokens(m),
              "_tools": has_tool_calls(m)}
        if m.get("role") == "assistant":
            c = m.get("content")
            text = c if isinstance(c, str) else " ".join(
                b.get("text", "") for b in c or [] if isinstance(b, dict) and isinstance(b.get("text"), str)) \
                if isinstance(c, list) else ""
            sm["content"] = text[:500]
            for k in ("usage", "errorMessage", "stopReason"):
                if k in m:
                    sm[k] = m[k] if k != "errorMessage" or not isinstance(m[k], str) else m[k][:500]
        base["message"] = sm
    elif t == "custom_message":
        m = {"role": "custom", "content": o.get("content")}
        base["_msg"] = {"role": "custom", "_est": message_tokens(m), "_strip": 0, "_tools": False}
    elif t in ("compaction", "branch_summary"):
        base["summary"] = o.get("summary")
        base["timestamp"] = o.get("timestamp")
        base["firstKeptEntryId"] = o.get("firstKeptEntryId")
    return base


def strippable_tokens(m: dict) -> int:
    """What stripping a turn's tool calls takes out of this message's estimate: a tool result entirely; an
    assistant message's tool calls and thinking (the whole message when nothing else is left in it)."""
    role = m.get("role")
    if role in ("toolResult", "tool"):
        return message_tokens(m)
    if role != "assistant" or not isinstance(m.get("content"), list):
        return 0
    c = m["content"]
    if not any(is_tool_call(b) for b in c):
        return 0
    gone = [b for b in c if is_tool_call(b) or (isinstance(b, dict) and b.get("type") == "thinking")]
    if len(gone) == len(c):
        return message_tokens(m)
    return sum(tool_call_tokens(b) if is_tool_call(b) else _block(b) for b in gone)


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

    @property
    def turns_with_tools(self) -> int:
        return sum(1 for t in self.turns if t.has_tools)


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
    turns: list[list[int]] = []  # [total, tools, has_tools]
    for m in messages:
        n = m["_est"] if "_est" in m else message_tokens(m)
        per.append(n)
        if m.get("role") == "user":
            turns.append([0, 0, 0])
        if not turns:
            base += n
            continue
        cur = turns[-1]
        cur[0] += n
        cur[1] += m["_strip"] if "_strip" in m else strippable_tokens(m)
        if m["_tools"] if "_tools" in m else has_tool_calls(m):
            cur[2] = 1
    return ContextEstimate(base, tuple(TurnEstimate(a, b, bool(c)) for a, b, c in turns), tuple(per))


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
    return Prediction(with_margin(ctx.history) + overhead, budget, g, overhead, overhead_source)


def should_strip(p: Prediction, strip_at_budget_percent: float) -> bool:
    """The trigger: after one more turn like the recent ones, the estimate would pass `strip_at_budget_percent`
    of OpenClaw's budget; or two more turns would reach the budget itself (a turn to spare when the turns are
    large for the window: the daemon may miss one gap between turns, and OpenClaw checks again mid-turn, after
    the tool results)."""
    return p.after_next_percent >= strip_at_budget_percent or p.predicted + 2 * p.growth >= p.budget


def urgency(p: Prediction) -> str | None:
    """Why acting cannot wait for the prompt cache to expire, or None (a gentle action). OpenClaw checks its
    estimate before each turn's prompt and again mid-turn after the tool results: "next-turn" when one more turn
    like the recent ones reaches its budget (it compacts during the next turn), "no-turn-to-spare" when two would
    (the turn after; occd keeps one turn of margin for a prediction that is a turn short)."""
    if p.predicted + p.growth >= p.budget:
        return "next-turn"
    if p.predicted + 2 * p.growth >= p.budget:
        return "no-turn-to-spare"
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


def strip_to_target(ctx: ContextEstimate, p: Prediction, target_percent: float, keep_recent: int = 0) -> StripTarget:
    """The gentlest strip (the most turns with tools kept) whose predicted estimate is under `target_percent`
    of the budget, never keeping fewer than the newest `keep_recent` turns with tools (what the model just read).
    When keeping that many is still over it, `keep_turns_with_tools` is None (rotate, or the strongest allowed
    strip) and `predicted_after`/`removed` say how far the strongest allowed strip gets."""
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
