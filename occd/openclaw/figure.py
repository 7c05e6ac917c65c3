"""A session's context figure: one function for every command (list, info, status, sessions, select), MCP and
the daemon's scan, and one rounding of percentages.

What the figure is, in order of preference:
1. occd rewrote the transcript after its last measurement (a strip: the usage on the last reply measured the
   file as it was before): the chars/4 estimate of the cleaned file plus the estimate of what was appended
   since, source `estimate`, until a reply brings real usage again. OpenClaw's own figures in sessions.json
   (`totalTokens`, `contextBudgetStatus`) are as old as that usage and are not used meanwhile.
2. OpenClaw's own fresh figure: sessions.json `totalTokens` with `totalTokensFresh` (what `openclaw sessions
   list` shows), source `usage`.
3. The transcript's last real usage (an all-zero usage is not a measurement: mirror replies, overflow notices)
   plus the chars/4 estimate of what follows it, source `usage`.
4. OpenClaw's pre-prompt estimate (2026.7.x `contextBudgetStatus.estimatedPromptTokens`, which counts the system
   prompt and tools too), source `openclaw-estimate`.
5. The chars/4 estimate of what the model is sent, source `estimate`.
6. sessions.json `totalTokens` not marked fresh, source `index`.

How far a session is from OpenClaw's compaction point: OpenClaw 2026.7.x compacts before a prompt when its
estimate exceeds `promptBudgetBeforeReserve` (recorded in `contextBudgetStatus`); without that record the same
budget is computed from the window and OpenClaw's defaults (reserve max(16384, floor 20000), at least
min(8000, window/2) left for the prompt). `toCompaction` = that point − tokens.

Which files occd rewrote: the ledger's newest observation of the session (every occd action records one, as the
daemon does after a strip). When it is an `estimate` at size S, the usage in the file is stale unless a reply
with usage was appended after S (OpenClaw only appends; occd's restore records a fresh observation).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

USAGE, ESTIMATE, OPENCLAW_ESTIMATE, INDEX = "usage", "estimate", "openclaw-estimate", "index"

# OpenClaw's defaults for the pre-prompt budget (2026.7.x: attempt.tool-run-context, compaction defaults)
RESERVE_TOKENS = 16384
RESERVE_TOKENS_FLOOR = 20000
MIN_PROMPT_BUDGET_TOKENS = 8000
MIN_PROMPT_BUDGET_RATIO = 0.5


def percent(tokens: int | None, window: int | None) -> float | None:
    """The share of the window, one decimal, rounded half up: the one rounding every command uses."""
    if tokens is None or not window:
        return None
    return float((Decimal(tokens) * 100 / Decimal(window)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def percent_text(p: float | None) -> str:
    """A percent from `percent()` as a whole number for people ("42%"), from the same one-decimal value."""
    if p is None:
        return "-"
    return f"{Decimal(str(p)).quantize(Decimal('1'), rounding=ROUND_HALF_UP)}%"


def tokens_text(tokens: int | None, source: str | None) -> str:
    """Tokens as every command shows them ("154k", estimates "~30k")."""
    from occd.units import human_tokens

    est = source in (ESTIMATE, OPENCLAW_ESTIMATE) and tokens is not None
    return ("~" if est else "") + human_tokens(tokens)


def context_text(tokens: int | None, source: str | None, window: int | None) -> str:
    """The context figure labelled, as `status SESSION` and `info` say it: "~47k (24% of the 200k window)";
    OpenClaw's own pre-prompt estimate (system prompt and tools included) is named as such."""
    from occd.units import human_tokens

    out = tokens_text(tokens, source)
    if tokens is not None and window:
        out += f" ({percent_text(percent(tokens, window))} of the {human_tokens(window)} window)"
    if source == OPENCLAW_ESTIMATE:
        out += ", OpenClaw's pre-prompt estimate"
    return out


def compaction_point(window: int | None, reserve: int | None = None) -> int | None:
    """OpenClaw's promptBudgetBeforeReserve for a window, with its default reserve."""
    if not window:
        return None
    budget = max(1, int(window))
    req = max(int(reserve) if reserve else RESERVE_TOKENS, RESERVE_TOKENS_FLOOR)
    min_prompt = min(MIN_PROMPT_BUDGET_TOKENS, max(1, int(budget * MIN_PROMPT_BUDGET_RATIO)))
    effective = min(req, max(0, budget - min_prompt))
    return max(1, budget - effective)


def _pos_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


# where a session's window came from (window_choice)
WINDOW_RECORDED, WINDOW_CONFIG_EDIT, WINDOW_NAMED, WINDOW_DEFAULT = "openclaw", "config-edit", "config", "default"


def window_choice(entry: dict | None, named: int | None, config_mtime: float | None = None,
                  default: int | None = None, session_id: str | None = None) -> tuple[int | None, str | None]:
    """(window, source): the session's context window, one rule for every command (list, info, status, sessions,
    the daemon).

    1. The budget OpenClaw itself recorded for the session's last turn (`contextBudgetStatus.contextTokenBudget`,
       when it is this session's), else the window it resolved at that turn (`contextTokens`): source `openclaw`.
    2. ... unless OpenClaw's config changed after that turn (openclaw.json newer than the entry's `updatedAt`) and
       names another window for the model: then that one, which the next turn uses, source `config-edit`: a
       figure that changed without a turn, re-checked at the next turn before anything is rotated.
    3. No record: `named`, the catalog's or the config's window (occd.openclaw.context_window(default=None):
       a catalog older than the config it derives from is not used), source `config`; else `default`
       (OpenClaw's default window), source `default`."""
    e = entry if isinstance(entry, dict) else {}
    cbs = e.get("contextBudgetStatus") if isinstance(e.get("contextBudgetStatus"), dict) else {}
    if session_id and cbs.get("sessionId") not in (None, session_id):
        cbs = {}  # recorded for another session (a rotation moved the key)
    ct = _pos_int(cbs.get("contextTokenBudget")) or _pos_int(e.get("contextTokens"))  # OpenClaw's records
    if ct is None:
        if named is not None:
            return named, WINDOW_NAMED
        return default, (WINDOW_DEFAULT if default is not None else None)
    upd = e.get("updatedAt")
    newer_config = (named is not None and named != ct and config_mtime is not None
                    and isinstance(upd, (int, float)) and not isinstance(upd, bool) and config_mtime * 1000 > upd)
    return (named, WINDOW_CONFIG_EDIT) if newer_config else (ct, WINDOW_RECORDED)


def session_window(entry: dict | None, named: int | None, config_mtime: float | None = None,
                   default: int | None = None, session_id: str | None = None) -> int | None:
    """The session's context window (window_choice without its source)."""
    return window_choice(entry, named, config_mtime, default, session_id)[0]


def compactions(index_count, file_count=None, *, indexed: bool = False) -> int | None:
    """How many times OpenClaw compacted the session, one rule for every command: OpenClaw's own count (the
    index's `compactionCount`, what `openclaw sessions list` shows), else the compactions in the transcript
    when the caller counted them, else 0 for an indexed entry (OpenClaw writes the count with the first
    compaction)."""
    def ok(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if ok(index_count):
        return index_count
    if ok(file_count):
        return file_count
    return 0 if indexed else None


@dataclass
class Figure:
    tokens: int | None
    source: str | None                 # usage | estimate | openclaw-estimate | index | None (unknown)
    window: int | None
    measured: int | None = None        # the last real measurement (usage), even when it is stale
    stale_usage: bool = False          # occd rewrote the file after that measurement
    compact_at: int | None = None      # OpenClaw's compaction point (prompt budget before the reserve)
    compact_at_source: str | None = None   # "openclaw" (contextBudgetStatus) | "default" (computed)
    openclaw_estimate: int | None = None   # contextBudgetStatus.estimatedPromptTokens (when not stale)
    should_compact: bool | None = None
    route: str | None = None
    last_checkpoint: dict | None = None    # the newest compactionCheckpoints item: reason, tokensBefore/After

    @property
    def percent(self) -> float | None:
        return percent(self.tokens, self.window)

    @property
    def to_compaction(self) -> int | None:
        if self.compact_at is None or self.tokens is None:
            return None
        return self.compact_at - self.tokens

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "source": self.source, "window": self.window, "percent": self.percent,
                "measured": self.measured, "staleUsage": self.stale_usage, "compactionPoint": self.compact_at,
                "compactionPointSource": self.compact_at_source, "toCompaction": self.to_compaction,
                "openclawEstimate": self.openclaw_estimate, "shouldCompact": self.should_compact,
                "route": self.route, "lastCheckpoint": self.last_checkpoint}


def session_figure(*, transcript: tuple[int | None, str | None] = (None, None), entry: dict | None = None,
                   window: int | None = None, after_rewrite: int | None = None,
                   session_id: str | None = None) -> Figure:
    """The figure from what is known of a session (pure).

    transcript: (tokens, source) measured on the transcript: source "usage" (last real usage + estimate of what
        follows) or "estimate" (no usage in the file); (None, None) when unknown or not read.
    entry: the session's sessions.json / database entry (OpenClaw's numbers), or None.
    window: the context window, when known (else contextBudgetStatus.contextTokenBudget is used).
    after_rewrite: the estimate of the file when occd rewrote it after its last measurement (see
        `stale_estimate`), else None.
    """
    entry = entry if isinstance(entry, dict) else {}
    cbs = entry.get("contextBudgetStatus")
    if not isinstance(cbs, dict) or (session_id and cbs.get("sessionId") not in (None, session_id)):
        cbs = {}
    if window is None:
        window = _pos_int(cbs.get("contextTokenBudget"))
    total = _pos_int(entry.get("totalTokens"))
    t_tokens, t_source = transcript
    measured = t_tokens if t_source == USAGE else None
    if entry.get("totalTokensFresh") and total is not None:
        measured = total
    fig = Figure(None, None, window, measured=measured)
    if after_rewrite is not None:
        fig.tokens, fig.source, fig.stale_usage = after_rewrite, ESTIMATE, True
    elif entry.get("totalTokensFresh") and total is not None:
        fig.tokens, fig.source = total, USAGE
    elif t_tokens is not None and t_source == USAGE:
        fig.tokens, fig.source = t_tokens, USAGE
    elif _pos_int(cbs.get("estimatedPromptTokens")) is not None:
        fig.tokens, fig.source = cbs["estimatedPromptTokens"], OPENCLAW_ESTIMATE
    elif t_tokens is not None and t_source == ESTIMATE:
        fig.tokens, fig.source = t_tokens, ESTIMATE
    elif total is not None:
        fig.tokens, fig.source = total, INDEX
    budget = _pos_int(cbs.get("promptBudgetBeforeReserve"))
    recorded_window = _pos_int(cbs.get("contextTokenBudget"))
    if budget is not None and window is not None and recorded_window is not None and recorded_window != window:
        budget = None  # recorded for another window (the config changed since): computed for this one below
    if budget is not None:
        fig.compact_at, fig.compact_at_source = budget, "openclaw"
    else:
        fig.compact_at = compaction_point(window, _pos_int(cbs.get("reserveTokens")))
        fig.compact_at_source = "default" if fig.compact_at is not None else None
    if cbs and after_rewrite is None:
        fig.openclaw_estimate = _pos_int(cbs.get("estimatedPromptTokens"))
        sc = cbs.get("shouldCompact")
        fig.should_compact = sc if isinstance(sc, bool) else None
        fig.route = cbs.get("route") if isinstance(cbs.get("route"), str) else None
    cps = entry.get("compactionCheckpoints")
    if isinstance(cps, list) and cps and isinstance(cps[-1], dict):
        last = cps[-1]
        fig.last_checkpoint = {k: last.get(k) for k in ("reason", "tokensBefore", "tokensAfter", "createdAt")
                               if k in last}
    return fig


# --------------------------------------------------------------------------------------------------------------
# occd's rewrites: which files have a stale usage
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RewriteMark:
    """The ledger's newest observation of a session when it is an estimate: the file had `size` bytes and its
    figure was `tokens` (e.g. right after occd stripped it)."""

    size: int
    tokens: int


def stale_estimate(path: str | os.PathLike | None, mark: RewriteMark | None) -> int | None:
    """The figure of a file occd rewrote after its last measurement: `mark.tokens` plus the chars/4 estimate of
    what was appended since; None when there is no mark, the file is shorter than it was (replaced), or a
    reply with real usage was appended since (then the usage is current again). Reads only the appended bytes."""
    if mark is None or path is None:
        return None
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size < mark.size:
        return None
    if size == mark.size:
        return mark.tokens
    from occd.transcript import summarize_range

    try:
        rs = summarize_range(path, mark.size)
    except OSError:
        return None
    if rs.last_usage is not None:
        return None
    return mark.tokens + rs.trailing_est


def rewrite_marks(agent: str, ledger=None) -> dict[str, RewriteMark]:
    """session id -> RewriteMark for the agent's sessions whose newest ledger observation is an estimate.

    ledger: an open occd Ledger (the daemon's), else the ledger file is read directly, read-only, with sqlite3
    (no SQLAlchemy import for `occd list`); no ledger, or one that cannot be read: {} (the figures are then
    those of the files and OpenClaw's index)."""
    if ledger is None:
        return _read_marks(agent).get(agent, {})
    try:
        rows = [(agent, r["session_id"], r["size"], r["context_tokens"], r["tokens_source"])
                for r in ledger.latest_observations(agent)]
    except Exception:  # noqa: BLE001 - the ledger only refines the figure; an unreadable one is skipped
        return {}
    return _marks(rows).get(agent, {})


def rewrite_marks_by_agent() -> dict[str, dict[str, RewriteMark]]:
    """rewrite_marks for every agent at once, from the ledger file (read-only, one connection and one query):
    a command over 2,000 agents does not open the ledger 2,000 times. {} when there is no readable ledger."""
    return _read_marks(None)


def _read_marks(agent: str | None) -> dict[str, dict[str, RewriteMark]]:
    """The ledger file read directly, read-only, with sqlite3 (no SQLAlchemy import for `occd list`): one agent's
    newest observations, or every agent's. {} when there is no ledger or it cannot be read."""
    sql = ("SELECT s.agent_id, s.session_id, o.size, o.context_tokens, o.tokens_source FROM sessions s "
           "JOIN observations o ON o.id = (SELECT id FROM observations WHERE session_pk = s.id "
           "ORDER BY ts DESC, id DESC LIMIT 1) WHERE s.archived_at IS NULL")
    args: tuple = ()
    if agent is not None:
        sql, args = sql + " AND s.agent_id = ?", (agent,)
    try:
        import sqlite3

        from occd import paths

        p = paths.ledger_path()
        if not p.exists():
            return {}
        con = sqlite3.connect(f"{Path(p).as_uri()}?mode=ro", uri=True, timeout=2)
        try:
            rows = con.execute(sql, args).fetchall()
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - the ledger only refines the figure; an unreadable one is skipped
        return {}
    return _marks(rows)


def _marks(rows) -> dict[str, dict[str, RewriteMark]]:
    """{agent: {session id: RewriteMark}} of (agent, session, size, tokens, source) rows whose figure is an estimate."""
    out: dict[str, dict[str, RewriteMark]] = {}
    for agent, sid, size, tokens, src in rows:
        if src == ESTIMATE and isinstance(size, int) and isinstance(tokens, int):
            out.setdefault(agent, {})[sid] = RewriteMark(size, tokens)
    return out


def file_figure(path: str | os.PathLike | None, *, entry: dict | None = None, window: int | None = None,
                mark: RewriteMark | None = None, session_id: str | None = None,
                transcript: tuple[int | None, str | None] | None = None, tail_window: int = 8 * 1024) -> Figure:
    """session_figure for a session with a transcript file: reads what it needs of the file (the bytes appended
    since occd's rewrite, or the tail for the last usage when OpenClaw's index has no fresh figure).
    transcript: (tokens, source) already measured (e.g. `occd info`'s full scan); None: read the tail."""
    after = stale_estimate(path, mark)
    if after is None and transcript is None and path is not None:
        e = entry if isinstance(entry, dict) else {}
        if not (e.get("totalTokensFresh") and _pos_int(e.get("totalTokens")) is not None):
            from occd.transcript import context_tokens_from_tail

            try:
                transcript = context_tokens_from_tail(path, window=tail_window)
            except OSError:
                transcript = None
    return session_figure(transcript=transcript or (None, None), entry=entry, window=window, after_rewrite=after,
                          session_id=session_id)
