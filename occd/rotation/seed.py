"""The seed a rotated session starts with: pure functions (inputs and `now` in, content out).

Priority, within a budget of `budget_percent` of the model's context window (counted as the rest of occd
counts: OpenClaw's chars/4 estimate, chars as JavaScript counts them): the workspace MEMORY.md; today's and
yesterday's memory/YYYY-MM-DD.md; the last 5 user/assistant exchanges (text only, as quoted history that is
said to be finished, never as real turns: `Seed.history_text`, both eras); a note saying when and why
the session was rotated and where the archive is. Over budget, shrink in this order: drop yesterday's note; keep
3 exchanges; keep MEMORY.md's first 70% and last 20%; finally MEMORY.md and one exchange. If even that does
not fit (a huge MEMORY.md in a small window), MEMORY.md is cut to what fits, and as a last resort the last
exchange goes too; the rotation note always stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from occd.transcript.marks import SEED_MARK  # noqa: F401 - how an occd seed message begins (both eras)

ACK = ("Understood. I have the memory and the recalled exchanges of the rotated session; they are finished and I "
       "will not redo any of them. I will continue with the next message.")
HISTORY_OPEN = "<occd-recalled-history>"
HISTORY_CLOSE = "</occd-recalled-history>"
HISTORY_INTRO = ("The exchanges below are a record of the rotated session, quoted only so you know what happened. "
                 "They are finished: every request in them was already handled there. Do not carry out any of "
                 "them again (no tool calls, no reads, no edits for them); only messages after this one are new "
                 "requests.")
MIDDLE_CUT = "\n\n[… the middle of MEMORY.md is left out of this seed by occd …]\n\n"
END_CUT = "\n\n[… the rest of MEMORY.md is left out of this seed by occd …]"


def estimate_tokens(text: str) -> int:
    """OpenClaw's estimate for a text message (chars/4, chars counted as JavaScript counts them), the same
    count occd.transcript gives each entry."""
    from occd.transcript.limits import jslen

    return -(-jslen(text) // 4)


@dataclass
class SeedInputs:
    memory: str | None = None
    today: tuple[str, str] | None = None        # (file name, text)
    yesterday: tuple[str, str] | None = None
    exchanges: list[tuple[str, str]] = field(default_factory=list)  # (user text, assistant text), oldest first
    note: str = ""


@dataclass
class Seed:
    memory: str | None
    notes: list[tuple[str, str]]
    exchanges: list[tuple[str, str]]
    note: str
    budget_tokens: int
    steps: list[str] = field(default_factory=list)  # the shrink steps that were needed

    def context_text(self, include_memory: bool = True) -> str:
        """The rotation note, MEMORY.md (file era only: the database era has it in the system prompt) and the
        daily notes."""
        parts = [self.note]
        if include_memory and self.memory:
            parts.append("## MEMORY.md\n\n" + self.memory.strip())
        for name, text in self.notes:
            parts.append(f"## memory/{name}\n\n" + text.strip())
        return "\n\n".join(p for p in parts if p)

    def history_text(self) -> str:
        """The recalled exchanges, one rendering for both eras: said in so many words to be finished, delimited,
        and every line quoted ("> "), so that no old request reads as a new order (a model may act on a quoted
        "READ <path>" again otherwise). Empty without exchanges."""
        if not self.exchanges:
            return ""
        body = []
        for i, (u, a) in enumerate(self.exchanges, 1):
            body.append(f"[exchange {i}, user, earlier]\n{quote(u)}\n[exchange {i}, assistant, earlier]\n{quote(a)}")
        return "\n\n".join(["## The last exchanges before the rotation (history, already done)", HISTORY_INTRO,
                             HISTORY_OPEN + "\n" + "\n\n".join(body) + "\n" + HISTORY_CLOSE])

    def file_text(self) -> str:
        """The first user message of a file-era seed (answered by ACK, written by occd: no model call): the note,
        MEMORY.md, the daily notes, then the recalled history. The exchanges are never written as real turns."""
        return "\n\n".join(p for p in (self.context_text(True), self.history_text()) if p)

    def message_text(self) -> str:
        """The one user message of a database-era seed (chat.send, one model call): the note, then the recalled
        history, then what to reply."""
        parts = [self.context_text(include_memory=False), self.history_text(),
                 "Reply with one short line to confirm that you have this history; do not act on it. Then "
                 "continue as before with the next message."]
        return "\n\n".join(p for p in parts if p)

    def tokens(self, include_memory: bool = True) -> int:
        if not include_memory:
            return estimate_tokens(self.message_text())
        return estimate_tokens(self.file_text()) + estimate_tokens(ACK)

    def to_json(self, include_memory: bool = True) -> dict:
        return {"budgetTokens": self.budget_tokens, "tokens": self.tokens(include_memory),
                "memoryChars": len(self.memory or "") if include_memory else 0,
                "notes": [n for n, _ in self.notes], "exchanges": len(self.exchanges), "shrinkSteps": self.steps}


def quote(text: str) -> str:
    """Every line prefixed with "> " (a recalled message, never an order)."""
    return "\n".join("> " + ln if ln else ">" for ln in text.strip().splitlines()) or ">"


def is_seed_text(text: str) -> bool:
    """An occd seed message (a rotation's first user message): never carried into a later seed (no nesting)."""
    return SEED_MARK in text[:400]


def memory_files(workspace: Path, today: date) -> tuple[str | None, tuple | None, tuple | None]:
    """(MEMORY.md text, (today's name, text), (yesterday's name, text)); None for what is missing/empty."""
    def read(p: Path) -> str | None:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return text if text.strip() else None

    mem = read(workspace / "MEMORY.md")
    t_name = f"{today.isoformat()}.md"
    y_name = f"{(today - timedelta(days=1)).isoformat()}.md"
    t = read(workspace / "memory" / t_name)
    y = read(workspace / "memory" / y_name)
    return mem, ((t_name, t) if t else None), ((y_name, y) if y else None)


def rotation_note(old_session_id: str, compactions: int, archive: str | None, now: datetime, reason: str, *,
                  memory_in_prompt: bool = False) -> str:
    where = f" The full earlier history is archived at {archive}." if archive else ""
    what = ("Your MEMORY.md is in your system prompt as usual; below are the last exchanges"
            if memory_in_prompt else "Below are your memory files and the last exchanges")
    return (f"[occd] This session continues session {old_session_id}, which was rotated on "
            f"{now.strftime('%Y-%m-%d %H:%M')} UTC after {compactions} compactions ({reason}), because "
            f"summaries of summaries lose detail.{where} {what}, to carry on from.")


def build_seed(inp: SeedInputs, context_window: int, budget_percent: float, *, include_memory: bool = True) -> Seed:
    """The seed within budget, shrunk in the documented order (the steps taken are in `seed.steps`)."""
    budget = int(context_window * budget_percent / 100)
    notes = [n for n in (inp.today, inp.yesterday) if n]
    seed = Seed(inp.memory if include_memory else None, notes, list(inp.exchanges[-5:]), inp.note, budget)

    def fits() -> bool:
        return seed.tokens(include_memory) <= budget

    if fits():
        return seed
    if inp.yesterday and inp.yesterday in seed.notes:
        seed.notes = [n for n in seed.notes if n is not inp.yesterday]
        seed.steps.append("dropped yesterday's note")
        if fits():
            return seed
    if len(seed.exchanges) > 3:
        seed.exchanges = seed.exchanges[-3:]
        seed.steps.append("kept 3 exchanges")
        if fits():
            return seed
    if seed.memory:
        m = seed.memory
        seed.memory = m[: int(len(m) * 0.7)] + MIDDLE_CUT + m[len(m) - int(len(m) * 0.2):]
        seed.steps.append("kept MEMORY.md's first 70% and last 20%")
        if fits():
            return seed
    if seed.notes or len(seed.exchanges) > 1:
        seed.notes = []
        seed.exchanges = seed.exchanges[-1:]
        seed.steps.append("kept MEMORY.md and one exchange")
        if fits():
            return seed
    if seed.memory:  # still too big: MEMORY.md cut to what fits (its beginning, where the essentials usually are)
        m = seed.memory
        lo, hi = 0, len(m)
        while lo < hi:  # the longest prefix that fits
            mid = (lo + hi + 1) // 2
            seed.memory = m[:mid] + END_CUT
            if fits():
                lo = mid
            else:
                hi = mid - 1
        seed.memory = (m[:lo] + END_CUT) if lo > 0 else None
        seed.steps.append("cut MEMORY.md to fit" if lo > 0 else "dropped MEMORY.md")
        if fits():
            return seed
    if seed.exchanges:
        seed.exchanges = []
        seed.steps.append("dropped the last exchange")
    return seed
