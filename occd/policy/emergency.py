"""Spirals and blocked sessions: pure detection from what a transcript and OpenClaw's index say, and `now`.

- BLOCKED: OpenClaw answered the newest turn itself instead of the model — its overflow notice ("Context
  overflow: prompt too large for the model. Try /reset (or /new)", an assistant message with all-zero usage; on
  2026.9.6 the stored message is the provider's refusal, "maximum context length ...", as its errorMessage, and
  OpenClaw logs "livenessState=blocked suggestedAction=reset_or_new") or a refusal to compact ("already compacted
  recently"). The user's agent stays dead until someone resets it (2026.9.6 recovers on the next turn by
  compacting, which loses the history occd exists to keep).
- SPIRAL: OpenClaw compacts on consecutive turns (what it keeps plus the prompt overhead lands at its budget),
  or it had to compact to retry an overflow (`compactionCheckpoints` reason `overflow-retry`) recently.

Both are emergencies: the daemon acts as soon as the session is idle and unlocked, past the rotation cooldown,
still behind the circuit breaker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

BLOCKED, SPIRAL = "BLOCKED", "SPIRAL"
# OpenClaw's notice, and the provider's refusal as OpenClaw 2026.9.6 stores it on the failed turn (an assistant
# message with stopReason "error", all-zero usage and errorMessage "400 This model's maximum context length is ...")
OVERFLOW_MARKERS = ("Context overflow", "prompt too large for the model", "maximum context length",
                    "context_length_exceeded", "context length exceeded", "prompt is too long")
REFUSAL_MARKERS = ("already compacted recently", "already_compacted_recently")
SPIRAL_GAP_TURNS = 2         # compactions this close (in user turns) are a spiral
RECENT_TURNS = 2             # ... when the newest of them was within the last turns
OVERFLOW_RETRY_RECENT_S = 3600


@dataclass(frozen=True)
class Observations:
    """What detection needs, gathered by the jobs. `compaction_turns`: for each compaction entry in the
    transcript (file order), the number of user turns before it; `turns`: user turns in the transcript;
    `last_reply`: the text of the newest assistant message and whether its usage was all zero; `checkpoints`:
    OpenClaw's compactionCheckpoints as (reason, createdAt epoch seconds)."""

    turns: int = 0
    compaction_turns: tuple[int, ...] = ()
    last_reply_text: str | None = None
    last_reply_zero_usage: bool = False
    last_reply_after_last_user: bool = True
    checkpoints: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Emergency:
    kind: str            # BLOCKED | SPIRAL
    reason: str
    details: dict = field(default_factory=dict)


def _is_notice(text: str | None, markers: Iterable[str]) -> bool:
    return bool(text) and any(m.lower() in text.lower() for m in markers)


def detect(o: Observations, now: float) -> Emergency | None:
    """BLOCKED before SPIRAL; None when neither."""
    if o.last_reply_after_last_user and o.last_reply_text is not None:
        if _is_notice(o.last_reply_text, OVERFLOW_MARKERS) and (o.last_reply_zero_usage or "reset" in o.last_reply_text.lower()):
            return Emergency(BLOCKED, "OpenClaw answered the last turn with its context-overflow notice",
                             {"notice": o.last_reply_text[:200]})
        if _is_notice(o.last_reply_text, REFUSAL_MARKERS):
            return Emergency(BLOCKED, "OpenClaw refused to compact (already compacted recently)",
                             {"notice": o.last_reply_text[:200]})
    ct = sorted(o.compaction_turns)
    if len(ct) >= 2 and ct[-1] - ct[-2] <= SPIRAL_GAP_TURNS and o.turns - ct[-1] <= RECENT_TURNS:
        return Emergency(SPIRAL, f"OpenClaw compacted on consecutive turns (after turns {ct[-2]} and {ct[-1]})",
                         {"compactionTurns": list(ct[-5:])})
    retries = [t for r, t in o.checkpoints if r == "overflow-retry" and now - t <= OVERFLOW_RETRY_RECENT_S]
    if retries and ct and o.turns - ct[-1] <= RECENT_TURNS:
        return Emergency(SPIRAL, "OpenClaw compacted to retry a context overflow", {"overflowRetries": len(retries)})
    return None


def observe_entries(entries: Sequence[dict]) -> Observations:
    """Observations from a transcript's parsed lines (file order)."""
    turns = 0
    comps: list[int] = []
    last_text, zero, after_user = None, False, True
    for e in entries:
        if not isinstance(e, dict):
            continue
        t = e.get("type")
        if t == "compaction" or e.get("_compaction"):  # `_compaction`: a provider checkpoint on an assistant
            comps.append(turns)                          # message (occd.jobs.budget marks it), read below too
            if t == "compaction":
                continue
        if t != "message" or not isinstance(e.get("message"), dict):
            continue
        m = e["message"]
        if m.get("role") == "user":
            turns += 1
            after_user = False
        elif m.get("role") == "assistant":
            c = m.get("content")
            if isinstance(c, str):
                text = c
            elif isinstance(c, list):
                text = " ".join(b.get("text", "") for b in c if isinstance(b, dict) and isinstance(b.get("text"), str))
            else:
                text = ""
            em = m.get("errorMessage")
            if isinstance(em, str) and em:
                text = f"{text} {em}".strip()
            u = m.get("usage")
            zero = isinstance(u, dict) and not any(isinstance(v, (int, float)) and v > 0 for k, v in u.items()
                                                     if k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"))
            last_text, after_user = text, True
    return Observations(turns, tuple(comps), last_text, zero, after_user)


def checkpoints_from_entry(entry: dict | None) -> tuple[tuple[str, float], ...]:
    out = []
    for c in (entry or {}).get("compactionCheckpoints") or []:
        if isinstance(c, dict) and isinstance(c.get("reason"), str) and isinstance(c.get("createdAt"), (int, float)):
            out.append((c["reason"], c["createdAt"] / 1000.0))
    return tuple(out)


def observations_from_signals(sig: dict, checkpoints: Sequence[tuple[str, float]] = ()) -> Observations:
    """The detection's Observations from the database era's read-only signals (occd.openclaw.dbstore.loop_signals:
    everything since the session's last reset marker) and OpenClaw's compactionCheckpoints. `compactionsPerTurn`
    covers the last turns only; entry k of the full list is "after k user turns" (0: before the first), and the
    returned tail ends at the newest turn, so its first entry is turn `turns + 1 - len(tail)`."""
    turns = int(sig.get("turns") or 0)
    per = [int(n) for n in sig.get("compactionsPerTurn") or []]
    first = turns + 1 - len(per)
    comps = tuple(first + i for i, n in enumerate(per) for _ in range(n))
    last = sig.get("lastReply") if isinstance(sig.get("lastReply"), dict) else None
    return Observations(turns=turns, compaction_turns=comps,
                        last_reply_text=last.get("text") if last else None,
                        last_reply_zero_usage=bool(last and last.get("zeroUsage")),
                        last_reply_after_last_user=bool(last.get("afterLastUser", True)) if last else True,
                        checkpoints=tuple(checkpoints))
