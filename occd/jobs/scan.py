"""The scan job: observe every agent's sessions cheaply and record what changed in the ledger.

Incremental by design (the daemon runs it every 5 minutes for months):
- every transcript is stat'ed; an unchanged (inode, size, mtime) costs no read at all;
- a file that grew (same inode) is read from where the last scan stopped (only the appended lines);
- a new or replaced file is read from its tail only (the last assistant usage), never parsed whole;
- compaction counts come from OpenClaw's own index (file era: sessions.json; database era: entry_json), plus
  compaction entries seen in appended tails for transcripts the index does not know;
- the database era is read through the read-only store (never written).
Observations are written in one batch, only for sessions whose figures changed.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from occd.errors import OccdError

log = logging.getLogger("occd.jobs.scan")
CACHE_KEY = "scan.files"
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

    def summary(self) -> dict:
        return {"agents": len(self.agents), "sessions": len(self.sessions), "changed": self.changed,
                "bytesRead": self.bytes_read, "errors": len(self.errors)}


def _parse_ts(v) -> float | None:
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _complete_end(path: Path, size: int) -> tuple[int, int]:
    """(offset just after the last complete line at `size`, bytes read to find it): one byte when the file ends
    with a newline (the usual case), else a look back for the last newline (a line being written)."""
    if size == 0:
        return 0, 0
    with open(path, "rb") as fh:
        fd = fh.fileno()
        if os.pread(fd, 1, size - 1) == b"\n":
            return size, 1
        back = min(size, 64 * 1024)
        buf = os.pread(fd, back, size - back)
    i = buf.rfind(b"\n")
    return (size - back + i + 1 if i >= 0 else 0), 1 + len(buf)


def _file_tokens(path: Path, st: os.stat_result, cached: dict | None, result: ScanResult) -> dict:
    """The incremental per-file state: {ino, size, mtime_ns, end, tokens, source, entries, compactions,
    last_ts}. Reads only what changed."""
    from occd.transcript import context_tokens_from_tail, summarize_range

    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    if cached and (cached["ino"], cached["size"], cached["mtime_ns"]) == key:
        return cached
    if cached and cached["ino"] == st.st_ino and st.st_size >= cached["end"] and cached.get("end") is not None:
        rs = summarize_range(path, cached["end"])
        result.bytes_read += rs.end - rs.start
        new = dict(cached)
        new.update(ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, end=rs.end)
        if rs.last_usage is not None:
            new["tokens"], new["source"] = rs.last_usage + rs.trailing_est, "usage"
        elif rs.trailing_est and new.get("tokens") is not None:
            new["tokens"] = new["tokens"] + rs.trailing_est
        if new.get("entries") is not None:
            new["entries"] += rs.entries
        new["compactions_seen"] = new.get("compactions_seen", 0) + rs.compactions
        new["last_ts"] = _parse_ts(rs.last_timestamp) or new.get("last_ts")
        return new
    # new, replaced or shrunk: the tail only
    stats: dict = {"bytes_read": 0}
    tokens, source = context_tokens_from_tail(path, window=TAIL_WINDOW, stats=stats)
    end, n = _complete_end(path, st.st_size)
    result.bytes_read += stats.get("bytes_read", 0) + n
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "end": end, "tokens": tokens,
            "source": source if tokens is not None else None, "entries": None, "compactions_seen": 0,
            "last_ts": None}


def scan_agent(ctx, agent, result: ScanResult, files: dict, seen_paths: set) -> None:
    from occd.openclaw import context_window_for_session, open_store

    store = open_store(ctx.state_dir, agent.id)
    era = getattr(store, "era", agent.era)
    result.agents[agent.id] = era
    try:
        infos = store.sessions()
    finally:
        for w in getattr(store, "warnings", []) or []:
            result.errors.append(f"{agent.id}: {w}")
            log.warning("%s: %s", agent.id, w)
    windows: dict = {}
    for info in infos:
        if ctx.stop.is_set():
            return
        wkey = (getattr(info, "model", None), (info.entry or {}).get("contextTokens"))
        if wkey not in windows:
            try:
                windows[wkey] = context_window_for_session(ctx.state_dir, agent.id, info)
            except OccdError:
                windows[wkey] = None
        window = windows[wkey]
        if info.path is None:  # database era: figures from OpenClaw's own entry, no transcript read
            result.sessions.append(SessionObs(
                agent.id, era, info.session_id, info.key, None, info.size, info.compaction_count or 0,
                info.total_tokens, "index" if info.total_tokens is not None else None, window, None,
                (info.updated_at or 0) / 1000 or None, running=store.is_running(info)))
            continue
        path = Path(info.path)
        try:
            st = os.stat(path)
            state = _file_tokens(path, st, files.get(str(path)), result)
        except FileNotFoundError:
            result.errors.append(f"{agent.id}/{info.session_id}: transcript vanished during the scan")
            log.warning("%s/%s: transcript vanished during the scan", agent.id, info.session_id)
            continue
        except (OSError, OccdError) as e:
            msg = getattr(e, "message", None) or str(e)
            result.errors.append(f"{agent.id}/{info.session_id}: {msg}")
            log.warning("%s/%s: %s", agent.id, info.session_id, msg)
            continue
        files[str(path)] = state
        seen_paths.add(str(path))
        compactions = info.compaction_count if info.compaction_count is not None else state.get("compactions_seen", 0)
        tokens, source = state.get("tokens"), state.get("source")
        if info.total_tokens is not None and (info.entry or {}).get("totalTokensFresh") and source != "estimate":
            # OpenClaw's own figure (what `openclaw sessions list` shows), unless occd rewrote the file since
            tokens, source = info.total_tokens, "usage"
        elif tokens is None and info.total_tokens is not None:
            tokens, source = info.total_tokens, "index"
        last = max(st.st_mtime, state.get("last_ts") or 0)
        result.sessions.append(SessionObs(
            agent.id, era, info.session_id, info.key, path, st.st_size, compactions, tokens, source, window,
            state.get("entries"), last, running=store.is_running(info)))


def run(ctx) -> dict:
    from occd.openclaw import list_agents

    t0 = time.monotonic()
    result = ScanResult(started=ctx.now())
    files = ctx.cache.get(CACHE_KEY)
    if files is None:
        files = _load_cache()
    seen: set = set()
    try:
        agents = list_agents(ctx.state_dir)
    except OccdError as e:
        result.errors.append(e.message)
        log.error("%s (%s)", e.message, e.hint)
        agents = []
    for agent in agents:
        if ctx.stop.is_set():
            break
        if agent.era == "empty":
            result.agents[agent.id] = "empty"
            continue
        try:
            scan_agent(ctx, agent, result, files, seen)
        except OccdError as e:
            result.errors.append(f"{agent.id}: {e.message}")
            log.warning("%s: %s", agent.id, e.message)
            result.agents.setdefault(agent.id, agent.era)
    for p in [p for p in files if p not in seen]:  # forget files that are gone
        files.pop(p, None)
    ctx.cache[CACHE_KEY] = files
    _save_cache(files)
    now = ctx.now()
    for a, era in result.agents.items():
        ctx.ledger.record_agent(a, era, now=now)
    result.changed = ctx.ledger.record_observations([s.ledger_row() for s in result.sessions], now=now)
    result.duration_s = time.monotonic() - t0
    ctx.ledger.record_scan(result.started, result.duration_s, agents=len(result.agents),
                           sessions_seen=len(result.sessions), sessions_changed=result.changed,
                           bytes_read=result.bytes_read, errors=len(result.errors),
                           error_text="\n".join(result.errors[:50]) or None)
    ctx.last_scan = result
    return result.summary()


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


def _save_cache(files: dict) -> None:
    import orjson

    from occd import paths

    p = _cache_path()
    try:
        paths.ensure_dir(p.parent)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(orjson.dumps(files))
        os.replace(tmp, p)
    except OSError as e:  # the cache is an optimisation: a full disk only costs a tail read next time
        log.warning("could not save the scan cache %s: %s", p, e.strerror)
