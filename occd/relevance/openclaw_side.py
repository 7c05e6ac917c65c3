"""OpenClaw's side of discovery: every agent of the state directory, file era (sessions.json + .jsonl) and
database era (read-only SQLite), through occd.openclaw's stores; running from the transcript lock (file era) or
the session row's status (database era); the Claude CLI sessions an entry names (`claudeCliSessionId`,
`cliSessionIds["claude-cli"]`, `cliSessionBindings["claude-cli"].sessionId`). Split out of
occd/relevance/discovery.py (issue 25), unchanged."""

from __future__ import annotations

import os
from pathlib import Path

from occd.relevance.headtail import Counter, head_tail
from occd.relevance.prompts import text_of
from occd.relevance.session import TEXT_KEEP, Session, inside, is_task, last_entry_time, origin_of, to_epoch
from occd.transcript import jsontext

CLAUDE_BACKEND = "claude-cli"


def _updated_at(info) -> float | None:
    """The index entry's own `updatedAt` (epoch ms → s), not a value filled in from the file's mtime."""
    v = (getattr(info, "entry", None) or {}).get("updatedAt")
    return v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def claude_ids_of(entry: dict) -> set[str]:
    """The Claude Code session ids an OpenClaw session entry names."""
    ids = set()
    v = entry.get("claudeCliSessionId")
    if isinstance(v, str) and v.strip():
        ids.add(v.strip())
    m = entry.get("cliSessionIds")
    if isinstance(m, dict) and isinstance(m.get(CLAUDE_BACKEND), str) and m[CLAUDE_BACKEND].strip():
        ids.add(m[CLAUDE_BACKEND].strip())
    b = entry.get("cliSessionBindings")
    if isinstance(b, dict) and isinstance(b.get(CLAUDE_BACKEND), dict):
        v = b[CLAUDE_BACKEND].get("sessionId")
        if isinstance(v, str) and v.strip():
            ids.add(v.strip())
    return ids


def _oc_user_text(o: dict) -> str | None:
    if o.get("type") != "message":
        return None
    m = o.get("message")
    if not isinstance(m, dict) or m.get("role") != "user":
        return None
    t = text_of(m.get("content"))
    return t if is_task(t) else None


def _oc_usage(o: dict) -> int | None:
    if o.get("type") != "message":
        return None
    m = o.get("message")
    if not isinstance(m, dict) or m.get("role") != "assistant" or m.get("stopReason") in ("error", "aborted"):
        return None
    u = m.get("usage")
    if not isinstance(u, dict):
        return None
    if isinstance(u.get("totalTokens"), int) and u["totalTokens"] > 0:
        return u["totalTokens"]
    n = sum(int(u.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite") if isinstance(u.get(k), (int, float)))
    return n or None


def _fill_from_objects(s: Session, head: list[dict], tail: list[dict]) -> None:
    for o in head:
        if o.get("type") == "session":
            if isinstance(o.get("cwd"), str):
                s.repo_path = o["cwd"]
            s.created = to_epoch(o.get("timestamp"))
            continue
        if s.first_user_message is None:
            t = _oc_user_text(o)
            if t:
                s.first_user_message = t[:TEXT_KEEP]
    for o in reversed(tail):
        if s.latest_user_task is None:
            t = _oc_user_text(o)
            if t:
                s.latest_user_task = t[:TEXT_KEEP]
        if s.model is None and o.get("type") == "message" and isinstance(o.get("message"), dict) \
                and o["message"].get("role") == "assistant" and isinstance(o["message"].get("model"), str):
            s.model = o["message"]["model"]
        if s.latest_user_task is not None and s.model is not None:
            break
    if s.latest_user_task is None:
        s.latest_user_task = s.first_user_message
    s.origin_agent = origin_of(s.first_user_message)


MEMO_FIELDS = ("repo_path", "created", "first_user_message", "latest_user_task", "origin_agent", "model",
               "last_modified", "context_tokens", "context_source", "shown")


def _memo_tag(info, window, mark) -> str:
    """What else than the file a session's derived figures depend on: its index entry, window and rewrite mark."""
    import hashlib

    import orjson

    try:
        e = orjson.dumps(info.entry, option=orjson.OPT_SORT_KEYS, default=str)
    except TypeError:
        e = repr(info.entry).encode()
    return hashlib.sha1(e + repr((info.model, window, mark)).encode()).hexdigest()


def _file_session(state_dir: Path, agent: str, store, info, counter: Counter | None, cfg: dict,
                  marks: dict | None = None) -> Session | None:
    """The session as discovery shows it. What comes from reading the transcript (its head and tail, its figure)
    is kept in the counter's cache with the file's inode, size and mtime: an unchanged session costs a stat."""
    from occd.openclaw.figure import file_figure

    p = info.path
    s = Session(id=info.session_id, source="openclaw", agent=agent, key=info.key, path=str(p), era=store.era,
                size=info.size, label=info.label or info.display_name, model=info.model,
                last_modified=info.mtime if info.mtime is not None else (info.updated_at or 0) / 1000 or None,
                index_updated=_updated_at(info))
    counter = counter or Counter(None)
    try:
        st = os.stat(p)
        s.mtime_ns = st.st_mtime_ns
        c = counter.counts(p, "openclaw", st)
    except OSError as e:
        s.warnings.append(f"cannot read {p}: {e.strerror}")
        return s
    s.file_mtime = s.last_modified
    s.message_count = c["user"] + c["assistant"]
    s.compaction_count = _compactions(info, c["compactions"])
    s.context_window = _window(state_dir, agent, info, cfg)
    mark = (marks or {}).get(info.session_id)
    tag = _memo_tag(info, s.context_window, mark)
    memo = counter.memo(p, st, tag)
    if memo is not None:
        for k in MEMO_FIELDS:
            setattr(s, k, memo.get(k))
        s.shown_texts()
        if s.shown != memo.get("shown"):  # kept by an older occd, or made from other texts
            counter.remember(p, st, tag, {k: getattr(s, k) for k in MEMO_FIELDS})
    else:
        try:
            head, tail, _whole = head_tail(p)
        except OSError as e:
            s.warnings.append(f"cannot read {p}: {e.strerror}")
            return s
        _fill_from_objects(s, head, tail)
        s.last_modified = last_entry_time(tail) or s.last_modified
        fig = file_figure(p, entry=info.entry, window=s.context_window, mark=mark, session_id=info.session_id,
                          tail_window=256 * 1024)  # the one figure (occd.openclaw.figure)
        s.context_tokens, s.context_source = fig.tokens, fig.source
        s.shown_texts()
        counter.remember(p, st, tag, {k: getattr(s, k) for k in MEMO_FIELDS})
    try:
        if store.is_running(info):
            s.running, s.running_source = True, "lock"
    except Exception:  # noqa: BLE001 - an unreadable lock is reported as not running; actions re-check
        pass
    return s


_NAMED: dict = {}  # (config object id, state dir, agent, model, provider) -> the window the config names


def _window(state_dir: Path, agent: str, info, cfg: dict) -> int | None:
    """The session's window by the one rule (occd.openclaw.figure.session_window); what the config names for a
    model is looked up once per agent and model while the same config object is in use (one listing)."""
    from occd.openclaw import config_mtime, context_window
    from occd.openclaw.figure import session_window
    from occd.openclaw.state import DEFAULT_CONTEXT_WINDOW

    model, provider = getattr(info, "model", None), getattr(info, "model_provider", None)
    k = (id(cfg), str(state_dir), agent, model, provider)
    if "cfg" not in _NAMED or _NAMED["cfg"] is not cfg:  # another listing: forget (and keep the config alive while its id is a key)
        _NAMED.clear()
        _NAMED["cfg"], _NAMED["mtime"] = cfg, config_mtime(state_dir)
    if k not in _NAMED:
        _NAMED[k] = context_window(state_dir, agent=agent, model=model, provider=provider, config=cfg, default=None)
    return session_window(getattr(info, "entry", None), _NAMED[k], _NAMED["mtime"], DEFAULT_CONTEXT_WINDOW)


def _compactions(info, in_file: int | None = None) -> int:
    from occd.openclaw.figure import compactions

    return compactions(info.compaction_count, in_file, indexed=bool(info.key)) or 0


def _db_session(state_dir: Path, agent: str, store, info, cfg: dict) -> Session:
    s = Session(id=info.session_id, source="openclaw", agent=agent, key=info.key, era="db", size=info.size,
                label=info.label or info.display_name, model=info.model,
                last_modified=(info.updated_at or 0) / 1000 or None, compaction_count=_compactions(info),
                index_updated=_updated_at(info))
    head: list[dict] = []
    tail: list[dict] = []
    try:
        c = store.conn()

        def objs(rows):
            out = []
            for ej, ez in rows:
                try:
                    if ej is not None:
                        o = jsontext.loads(ej)
                    elif ez is not None:
                        from occd.openclaw.dbstore import _decode_zstd

                        o = jsontext.loads(_decode_zstd(ez))
                    else:
                        continue
                except (ValueError, Exception):  # noqa: BLE001 - one bad row is skipped
                    continue
                if isinstance(o, dict):
                    out.append(o)
            return out

        zstd = "event_zstd" if store._has("transcript_events", "event_zstd") else "NULL"  # 9.6+ only
        q = (f"SELECT event_json, {zstd} FROM transcript_events WHERE session_id = ? "
             "ORDER BY seq {} LIMIT 60")
        head = objs(c.execute(q.format("ASC"), (info.session_id,)).fetchall())
        tail = list(reversed(objs(c.execute(q.format("DESC"), (info.session_id,)).fetchall())))
        # user and assistant messages, as in the file era (a tool result is shown with its call); a compressed
        # event (event_json NULL) is counted as a message without decoding it
        row = c.execute("SELECT SUM(CASE WHEN event_json IS NULL OR (instr(event_json, '\"type\":\"message\"') > 0 "
                        "AND instr(event_json, '\"role\":\"toolResult\"') = 0) "
                        "THEN 1 ELSE 0 END) FROM transcript_events WHERE session_id = ? AND seq > 0",
                        (info.session_id,)).fetchone()
        s.message_count = int(row[0] or 0) if row else None
    except Exception as e:  # noqa: BLE001 - a busy or unknown database: the record keeps the index facts
        s.warnings.append(f"{agent}/{info.session_id}: transcript not readable ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    _fill_from_objects(s, head, tail)
    s.last_modified = last_entry_time(tail) or s.last_modified
    usage = next((u for u in (_oc_usage(o) for o in reversed(tail)) if u), None)
    s.context_window = _window(state_dir, agent, info, cfg)
    from occd.openclaw.figure import session_figure

    fig = session_figure(transcript=(usage, "usage") if usage is not None else (None, None), entry=info.entry,
                         window=s.context_window, session_id=info.session_id)  # the one figure (occd.openclaw.figure)
    s.context_tokens, s.context_source = fig.tokens, fig.source
    if info.status == "running":
        s.running, s.running_source = True, "database"
    return s


def openclaw_sessions(state_dir: Path, *, agent: str | None = None, repo: Path | None = None,
                      counter: Counter | None = None, warnings: list[str] | None = None,
                      unreadable: list[str] | None = None, agents=None) -> tuple[list[Session], dict[str, Session]]:
    """(sessions, {claude session id: the OpenClaw session naming it}). An agent whose store occd cannot read
    (a schema it does not know, a missing column) is named in `warnings` with what to do, and its id added to
    `unreadable`. `agents`: list_agents() when the caller already has it (a loop over agents lists them once)."""
    from occd.errors import OccdError
    from occd.openclaw import list_agents, load_openclaw_config, open_store

    warnings = warnings if warnings is not None else []
    try:
        agents = list_agents(state_dir) if agents is None else agents
    except OccdError as e:
        if agent is not None:
            raise
        warnings.append(e.message)
        return [], {}
    if agent is not None and agent not in {a.id for a in agents}:
        names = ", ".join(a.id for a in agents) or "none"
        raise OccdError(f"Agent '{agent}' not found", f"agents in {state_dir}: {names}", code="AGENT_NOT_FOUND")
    try:
        cfg = load_openclaw_config(state_dir)
    except OccdError as e:
        warnings.append(e.message)
        cfg = {}
    out: list[Session] = []
    links: dict[str, Session] = {}
    all_marks = None if agent is None else {}  # one agent: rewrite_marks of that agent alone
    for a in agents:
        if a.era == "empty" or (agent is not None and a.id != agent):
            continue
        try:
            store = open_store(state_dir, a)
            infos = store.sessions()
        except OccdError as e:
            from occd.openclaw.health import store_warning

            warnings.append(store_warning(state_dir, a, e))  # the words `occd doctor` gives, with what to do
            if unreadable is not None:
                unreadable.append(a.id)
            continue
        warnings.extend(f"agent {a.id}: {w}" for w in getattr(store, "warnings", []))
        marks = None
        try:
            for info in infos:
                if store.era != "db" and marks is None:
                    if agent is not None:
                        from occd.openclaw.figure import rewrite_marks

                        marks = rewrite_marks(a.id)
                    else:
                        if all_marks is None:  # every agent's, in one read of the ledger
                            from occd.openclaw.figure import rewrite_marks_by_agent

                            all_marks = rewrite_marks_by_agent()
                        marks = all_marks.get(a.id, {})
                if store.era == "db":
                    s = _db_session(state_dir, a.id, store, info, cfg)
                else:
                    s = _file_session(state_dir, a.id, store, info, counter, cfg, marks)
                if s is None:
                    continue
                warnings.extend(s.warnings)
                ids = claude_ids_of(info.entry or {})
                if ids:
                    s.claude_session_id = sorted(ids)[0]
                    for i in ids:
                        links[i] = s
                if repo is not None and not inside(s.repo_path, repo) and not ids:
                    continue
                out.append(s)
        finally:
            close = getattr(store, "close", None)
            if close:
                close()
    return out, links
