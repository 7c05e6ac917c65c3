"""Read-only views of sessions for `occd list` and `occd info` (both storage eras). Never writes anything."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from occd.actions.common import open_agent_store, resolve_session
from occd.errors import OccdError
from occd.openclaw.figure import Figure, compactions, file_figure, percent, rewrite_marks, session_figure


@dataclass
class SessionRow:
    session_id: str
    key: str | None
    path: Path | None
    updated_at: datetime | None
    size: int | None
    tokens: int | None
    tokens_source: str | None
    context_window: int | None
    compaction_count: int | None
    label: str | None
    running: bool = False
    unindexed: bool = False
    archived: bool = False
    figure: Figure | None = None

    @property
    def context_percent(self) -> float | None:
        return percent(self.tokens, self.context_window)

    def to_json(self, short: str | None = None) -> dict:
        """`short`: the id as the table shows it (unique among the listed ids: occd.ids.short_forms)."""
        from occd.openclaw.ids import short_id

        f = self.figure
        return {"id": self.session_id, "shortId": short or short_id(self.session_id), "key": self.key,
                "path": str(self.path) if self.path else None,
                "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
                "size": self.size, "tokens": self.tokens, "tokensSource": self.tokens_source,
                "contextWindow": self.context_window, "contextPercent": self.context_percent,
                "compactionPoint": f.compact_at if f else None, "toCompaction": f.to_compaction if f else None,
                "compactions": self.compaction_count, "label": self.label, "running": self.running,
                "unindexed": self.unindexed, "archived": self.archived}


@dataclass
class Listing:
    agent: str
    era: str
    sessions_dir: Path | None
    sessions: list[SessionRow]
    total: int
    warnings: list[str] = field(default_factory=list)


def _dt(v) -> datetime | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=timezone.utc)
    if isinstance(v, (int, float)):
        return datetime.fromtimestamp(v / 1000 if v > 1e11 else v, tz=timezone.utc)
    return None


def _label(info) -> str | None:
    for attr in ("label", "display_name"):
        v = getattr(info, attr, None)
        if v:
            return str(v)
    origin = getattr(info, "chat_type", None) or getattr(info, "last_channel", None)
    key = getattr(info, "key", None)
    if key:
        return key if not origin else f"{key} ({origin})"
    return origin


def _row(store, info, window_for, marks: dict) -> SessionRow:
    path = Path(info.path) if getattr(info, "path", None) else None
    size = getattr(info, "size", None)
    entry = getattr(info, "entry", None) or {}
    window = window_for(info)
    if path is not None and path.is_file():
        fig = file_figure(path, entry=entry, window=window, mark=marks.get(info.session_id),
                          session_id=info.session_id)
    else:
        fig = session_figure(entry=entry, window=window, session_id=info.session_id)
    tokens, source = fig.tokens, fig.source
    running = False
    lock_fn = getattr(store, "is_running", None)
    if lock_fn is not None:
        try:
            running = bool(lock_fn(info))
        except Exception:  # noqa: BLE001
            running = False
    comp = compactions(getattr(info, "compaction_count", None), indexed=bool(getattr(info, "key", None)))
    return SessionRow(info.session_id, getattr(info, "key", None), path,
                      _dt(getattr(info, "updated_at", None)) or (_dt(getattr(info, "mtime", None))),
                      size, tokens, source, fig.window, comp, _label(info),
                      running=running, unindexed=bool(getattr(info, "unindexed", False)),
                      archived=bool(getattr(info, "archived", False)), figure=fig)


def list_sessions(settings, *, agent: str | None = None, limit: int | None = None, archived: bool = False) -> Listing:
    state_dir, aid, store = open_agent_store(settings, agent)
    infos = store.archived_sessions() if archived else store.sessions()
    window_for = _window_lookup(state_dir, aid)
    total = len(infos)
    if not infos and not archived:
        raise OccdError(f"No sessions found for agent '{aid}'", "OpenClaw creates a session on the agent's first turn",
                        code="NO_SESSIONS")
    chosen = infos[:limit] if limit else infos
    marks = rewrite_marks(aid) if not archived else {}
    rows = [_row(store, i, window_for, marks) for i in chosen]
    if archived:
        _fill_from_ledger(aid, rows)
    return Listing(aid, getattr(store, "era", "file"), getattr(store, "sessions_dir", None), rows, total,
                   list(getattr(store, "warnings", []) or []))


def _fill_from_ledger(agent: str, rows: list[SessionRow]) -> None:
    """An archived transcript has left the index: its key and compaction count are what the ledger saw last."""
    from occd import paths

    if not rows or not paths.ledger_path().exists():
        return
    try:
        from occd.ledger import Ledger

        with Ledger.open(readonly=True) as led:
            known = {o["session_id"]: o for o in led.latest_observations(agent, include_archived=True)}
    except Exception:  # noqa: BLE001 - informative only
        return
    for r in rows:
        o = known.get(r.session_id)
        if o is None:
            continue
        if r.key is None and o.get("session_key"):
            r.key = o["session_key"]
            r.label = r.label or f"{o['session_key']} (archived)"
        if r.compaction_count is None:
            r.compaction_count = o.get("compaction_count")
        if o.get("context_tokens") is not None and o.get("size") == r.size:
            # the same file as when it was live: the figure `occd list` showed then (the same measure for the
            # same fact; the file alone lacks OpenClaw's index entry and reads a different figure)
            r.tokens, r.tokens_source = o["context_tokens"], o.get("tokens_source")
            r.context_window = o.get("context_window") or r.context_window


def _window_lookup(state_dir: Path, agent: str):
    """info -> the session's window by occd.openclaw.figure.session_window (the config's window per model, parsed once)."""
    from occd.openclaw.figure import session_window
    from occd.openclaw import config_mtime
    from occd.openclaw.state import DEFAULT_CONTEXT_WINDOW

    cache: dict = {}
    mtime = config_mtime(state_dir)

    def window_for(info) -> int | None:
        model = getattr(info, "model", None)
        provider = getattr(info, "model_provider", None)
        k = (provider, model)
        if k not in cache:
            try:
                from occd.openclaw import context_window

                cache[k] = context_window(state_dir, agent=agent, model=model, provider=provider, default=None)
            except Exception:  # noqa: BLE001 - informative only
                cache[k] = None
        return session_window(getattr(info, "entry", None), cache[k], mtime, DEFAULT_CONTEXT_WINDOW,
                              getattr(info, "session_id", None))

    return window_for


def session_info(settings, *, agent: str | None = None, ref: str | None = None) -> dict:
    from occd.transcript import analyze, estimated_tokens, scan
    from occd.transcript.scan import scan_stream

    state_dir, aid, store = open_agent_store(settings, agent, ref)
    info = resolve_session(store, ref, state_dir, aid) if ref else store.latest()
    path = Path(info.path) if getattr(info, "path", None) else None
    if path is not None:
        if not path.is_file():
            raise OccdError(f"Transcript of session '{info.session_id}' is missing",
                            f"the index points to {path}; run `occd list`", code="SESSION_NOT_FOUND")
        t = scan(path, prepare_strip=False)
        size = t.size
    else:
        data = b"".join(store.read_lines(info))  # the context: from the last reset marker on
        t = scan_stream(io.BytesIO(data))
        size = len(data)
    a = analyze(t)
    window = _window_lookup(state_dir, aid)(info)
    ctx = a.get("contextTokens") or {}
    measured = (ctx.get("tokens"), ctx.get("source")) if ctx.get("source") in ("usage", "estimate") else (None, None)
    entry = getattr(info, "entry", None) or {}
    if path is not None:
        fig = file_figure(path, entry=entry, window=window, mark=rewrite_marks(aid).get(info.session_id),
                          session_id=info.session_id, transcript=measured)
    else:
        fig = session_figure(transcript=measured, entry=entry, window=window, session_id=info.session_id)
    running = False
    if hasattr(store, "is_running"):
        try:
            running = bool(store.is_running(info))
        except Exception:  # noqa: BLE001
            running = False
    _more_warnings(a, t, info, path, running)
    out = {
        "sessionId": info.session_id, "key": getattr(info, "key", None), "agent": aid,
        "era": getattr(store, "era", "file"), "path": str(path) if path else None, "size": size,
        "running": running, "compactionCountIndex": getattr(info, "compaction_count", None),
        "compactions": compactions(getattr(info, "compaction_count", None), a.get("compactions"),
                                   indexed=bool(getattr(info, "key", None))),
        "context": {**fig.to_json(), "estimateNow": estimated_tokens(t) if not t.empty else None},
        "analysis": a,
    }
    if hasattr(store, "signals"):  # database era: spiral / blocked-session inputs (resets, compactions per turn)
        out["signals"] = store.signals(info)
    return out


def _more_warnings(a: dict, t, info, path: Path | None, running: bool, now: float | None = None) -> None:
    """What only the session's place tells: a header id other than the file's name, and whether a path that ends
    mid-run is running or a crashed run."""
    import time

    from occd.cleaner.plan import CRASHED_RUN_IDLE_S

    w = a.setdefault("warnings", [])
    hid = t.session_id if t.header_ok else None
    if hid is not None and path is not None:
        stem = path.name[:-len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
        if stem != hid and not stem.startswith(hid + "-topic-"):
            w.append({"code": "header-id-mismatch",
                      "message": f"the header's id {hid} differs from the file name {path.name} (index: "
                                 f"{info.session_id}); occd keeps the header's id when it edits"})
    if a.get("openCall"):
        age = (time.time() if now is None else now) - path.stat().st_mtime if path is not None else None
        what = "tool call has no result" if a["openCall"] == "call" else "tool result has no reply"
        if running:
            a["runState"] = "running"
        elif age is not None and age >= CRASHED_RUN_IDLE_S:
            a["runState"] = "crashed"
            w.append({"code": "crashed-run",
                      "message": f"the last {what}, no run holds the lock and the file has not changed for "
                                 f"{age / 60:.0f} min: a run that crashed (OpenClaw patches the unanswered call on "
                                 "the next turn); `occd edit --crashed-run` cleans it, leaving that turn as it is"})
        else:
            a["runState"] = "mid-run"
            w.append({"code": "mid-run", "message": f"the last {what}: a run is in progress (or crashed less than "
                                                    f"{CRASHED_RUN_IDLE_S // 60} min ago); `occd edit` waits"})


def live_figure(settings, agent: str, session_id: str) -> dict | None:
    """The context figure `occd list` shows for one live session now (after a strip: the estimate after it), as
    {tokens, source, window, percent}; None when the session is not in the agent's index any more (archived)."""
    try:
        state_dir, aid, store = open_agent_store(settings, agent)
        info = next((i for i in store.sessions() if i.session_id == session_id), None)
        if info is None:
            return None
        row = _row(store, info, _window_lookup(state_dir, aid), rewrite_marks(aid))
    except (OccdError, OSError):
        return None
    return {"tokens": row.tokens, "source": row.tokens_source, "window": row.context_window,
            "percent": row.context_percent}
