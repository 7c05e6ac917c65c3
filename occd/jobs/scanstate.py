"""What the scan job sees and keeps between cycles: its records (SessionObs, ScanResult), the incremental
per-file state (read only what changed: the appended lines of a file that grew, the tail of a new or replaced
one) and the cache file that keeps that state across restarts. Split out of occd/jobs/scan.py (issue 25),
unchanged."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from occd.units import iso_seconds

log = logging.getLogger("occd.jobs.scan")  # the scan's own logger, as before the split
TAIL_WINDOW = 8 * 1024  # the last reply and its usage are usually in the last few KB; reads go back further if not


@dataclass
class SessionObs:
    agent: str
    era: str
    session_id: str
    session_key: str | None
    path: Path | None
    size: int | None
    compaction_count: int
    context_tokens: int | None
    tokens_source: str | None
    context_window: int | None
    entry_count: int | None
    last_activity: float | None
    running: bool = False
    changed: bool = False
    # OpenClaw's own records for the budget trigger (file era: sessions.json); not written to the ledger
    budget_status: dict | None = None   # contextBudgetStatus: its last pre-prompt check
    checkpoints: tuple = ()             # compactionCheckpoints as (reason, createdAt seconds)
    prompt_budget: int | None = None    # promptBudgetBeforeReserve for this session's window
    midrun_check: bool = False          # compaction.midTurnPrecheck.enabled: OpenClaw checks mid-run too
    model: str | None = None
    # where the window came from (occd.openclaw.figure.window_choice): "config-edit" is a figure that changed
    # without a turn (the config was edited since the session's last turn): re-checked at its next turn before
    # anything is rotated
    window_source: str | None = None

    def ledger_row(self) -> dict:
        return dict(agent=self.agent, session_id=self.session_id, session_key=self.session_key,
                    path=str(self.path) if self.path else None, era=self.era,
                    compaction_count=self.compaction_count, context_tokens=self.context_tokens,
                    tokens_source=self.tokens_source, context_window=self.context_window, size=self.size,
                    entry_count=self.entry_count, last_activity=self.last_activity)


@dataclass
class ScanResult:
    started: float
    duration_s: float = 0.0
    agents: dict = field(default_factory=dict)      # agent id -> era
    sessions: list[SessionObs] = field(default_factory=list)
    bytes_read: int = 0
    errors: list[str] = field(default_factory=list)
    changed: int = 0
    reused: int = 0                                 # observations kept from the last scan (nothing changed)
    kept: set = field(default_factory=set)          # id() of those observations

    def summary(self) -> dict:
        return {"agents": len(self.agents), "sessions": len(self.sessions), "changed": self.changed,
                "bytesRead": self.bytes_read, "errors": len(self.errors)}


MARK = 32  # bytes kept from just before `end`: an in-place rewrite that ends up longer is not an append


def _mark(fd: int, end: int) -> tuple[str, int]:
    n = min(MARK, end)
    return (os.pread(fd, n, end - n).hex() if n else ""), n


def _complete_end(path: Path, size: int) -> tuple[int, str, int]:
    """(offset just after the last complete line at `size`, the mark before it, bytes read): MARK bytes when the
    file ends with a newline (the usual case), else a look back for the last newline (a line being written)."""
    if size == 0:
        return 0, "", 0
    with open(path, "rb") as fh:
        fd = fh.fileno()
        n = min(MARK, size)
        buf = os.pread(fd, n, size - n)
        if buf.endswith(b"\n"):
            return size, buf.hex(), n
        back = min(size, 64 * 1024)
        buf = os.pread(fd, back, size - back)
        i = buf.rfind(b"\n")
        end = size - back + i + 1 if i >= 0 else 0
        return end, buf[max(0, i + 1 - MARK):i + 1].hex() if i >= 0 else "", n + back


def file_state(path: Path, st: os.stat_result, tokens: int | None, source: str | None) -> dict:
    """The cache entry for a file whose figures are known (apply, after occd rewrote it)."""
    end, mark, _ = _complete_end(path, st.st_size)
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "end": end, "mark": mark,
            "tokens": tokens, "source": source if tokens is not None else None, "entries": None,
            "compactions_seen": 0, "last_ts": None,
            "stale": source == "estimate" and tokens is not None}  # occd rewrote it: its usage is stale


def _appended(path: Path, st: os.stat_result, cached: dict, result: ScanResult) -> bool:
    """The file grew by appends since `cached` (same inode, longer, and the bytes before the old end are the
    ones seen then)."""
    end = cached.get("end")
    if end is None or cached["ino"] != st.st_ino or st.st_size < end:
        return False
    if end == 0:
        return True
    with open(path, "rb") as fh:
        mark, n = _mark(fh.fileno(), end)
    result.bytes_read += n
    return mark == cached.get("mark")


def _file_tokens(path: Path, st: os.stat_result, cached: dict | None, result: ScanResult) -> dict:
    """The incremental per-file state: {ino, size, mtime_ns, end, mark, tokens, source, entries,
    compactions_seen, last_ts}. Reads only what changed."""
    from occd.transcript import context_tokens_from_tail, summarize_range

    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    if cached and (cached["ino"], cached["size"], cached["mtime_ns"]) == key:
        return cached
    if cached and _appended(path, st, cached, result):
        rs = summarize_range(path, cached["end"])
        result.bytes_read += rs.end - rs.start
        new = dict(cached)
        new.update(ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, end=rs.end)
        if rs.end != rs.start:
            with open(path, "rb") as fh:
                new["mark"], n = _mark(fh.fileno(), rs.end)
            result.bytes_read += n
        if rs.last_usage is not None:
            new["tokens"], new["source"] = rs.last_usage + rs.trailing_est, "usage"
            new["stale"] = False  # a reply measured the file again
        elif rs.trailing_est and new.get("tokens") is not None:
            new["tokens"] = new["tokens"] + rs.trailing_est
        if new.get("entries") is not None:
            new["entries"] += rs.entries
        new["compactions_seen"] = new.get("compactions_seen", 0) + rs.compactions
        new["last_ts"] = iso_seconds(rs.last_timestamp) or new.get("last_ts")
        return new
    # new, replaced, shrunk or rewritten: the tail only
    stats: dict = {"bytes_read": 0}
    tokens, source = context_tokens_from_tail(path, window=TAIL_WINDOW, stats=stats)
    end, mark, n = _complete_end(path, st.st_size)
    result.bytes_read += stats.get("bytes_read", 0) + n
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "end": end, "mark": mark,
            "tokens": tokens, "source": source if tokens is not None else None, "entries": None,
            "compactions_seen": 0, "last_ts": None, "tail": True}


def _cache_path() -> Path:
    from occd import paths

    return paths.cache_dir() / "scan-files.json"


def _load_cache() -> dict:
    import orjson

    try:
        data = orjson.loads(_cache_path().read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_cache(files: dict) -> str | None:
    """Write the per-file scan state; returns an error line instead of raising (the cache is an optimisation:
    a full disk only costs tail reads after a restart)."""
    import orjson

    from occd import paths

    p = _cache_path()
    try:
        paths.write_private(p, orjson.dumps(files))
        return None
    except OSError as e:
        msg = f"could not save the scan cache {p}: {e.strerror or e}"
        log.warning("%s", msg)
        return msg
