"""Discovery: every session occd can find, as one record shape.

- OpenClaw: every agent of the state directory, file era (sessions.json + .jsonl) and database era (read-only
  SQLite), through occd.openclaw's stores.
- Claude Code: `~/.claude/projects/<slug>/*.jsonl` (`$CLAUDE_CONFIG_DIR/projects` when set), slug = the
  absolute project path with every character outside [A-Za-z0-9] replaced by '-'.
- Linking: OpenClaw records the Claude CLI session it drives in the session entry (`claudeCliSessionId`,
  `cliSessionIds["claude-cli"]`, `cliSessionBindings["claude-cli"].sessionId`; seen in the 2026.7.1 and
  2026.9.6 sources). A Claude Code session named there is merged into the OpenClaw record (source "both").
- Origin: a first user message carrying `[openclaw:agent=<id>]` names the agent that started the session.

Transcripts are read at their head and tail only; message and compaction counts come from an incremental
byte-pattern count (headtail.Counter) that reads each byte once over the life of the cache.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, Mapping

from occd.relevance.headtail import Counter, head_tail
from occd.relevance.redact import squash

ORIGIN_RE = re.compile(r"\[openclaw:agent=([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\]")
CLAUDE_BACKEND = "claude-cli"
CLAUDE_WINDOW = 200_000
TEXT_KEEP = 2000          # characters of a user message kept in memory (digests use far fewer)
_SKIP_PREFIXES = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>",
                  "Caveat: The messages below", "[Request interrupted", "<system-reminder>", "<bash-input>",
                  "<bash-stdout>", "<user-prompt-submit-hook>")
OC_PATTERNS = (b'"type":"message"', b'"type":"compaction"')
CC_PATTERNS = (b'"type":"user"', b'"type":"assistant"', b'"subtype":"compact_boundary"')


@dataclass
class Session:
    id: str
    source: str                       # openclaw | claude-code | both
    agent: str | None = None
    key: str | None = None
    claude_session_id: str | None = None
    repo_path: str | None = None
    branch: str | None = None
    first_user_message: str | None = None
    latest_user_task: str | None = None
    last_modified: float | None = None  # epoch seconds
    created: float | None = None
    message_count: int | None = None
    size: int | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    context_source: str | None = None  # occd.figure: usage | estimate | openclaw-estimate | index
    compaction_count: int = 0
    model: str | None = None
    running: bool = False
    running_source: str | None = None   # lock | database | recent-write
    origin_agent: str | None = None
    label: str | None = None
    path: str | None = None
    era: str | None = None
    claude_path: str | None = None
    mtime_ns: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        """Changes whenever the session's content can have changed."""
        import hashlib

        parts = (self.source, self.id, self.size, self.mtime_ns, self.last_modified, self.compaction_count,
                 self.message_count, self.claude_session_id)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]

    def digest_text(self) -> str:
        """The words the keyword fallback compares (unredacted, local only)."""
        return " ".join(x for x in (self.label, self.first_user_message, self.latest_user_task) if x)

    def context_percent(self) -> float | None:
        from occd.figure import percent

        return percent(self.context_tokens, self.context_window)

    def to_json(self, text_limit: int = 300) -> dict:
        return {
            "id": self.id, "source": self.source, "agent": self.agent, "key": self.key,
            "claudeSessionId": self.claude_session_id, "repoPath": self.repo_path, "branch": self.branch,
            "firstUserMessage": squash(self.first_user_message, text_limit) or None,
            "latestUserTask": squash(self.latest_user_task, text_limit) or None,
            "lastModified": _iso(self.last_modified), "created": _iso(self.created),
            "messageCount": self.message_count, "size": self.size, "contextTokens": self.context_tokens,
            "contextWindow": self.context_window, "contextPercent": self.context_percent(),
            "contextSource": self.context_source,
            "compactionCount": self.compaction_count, "model": self.model, "running": self.running,
            "runningSource": self.running_source,
            "origin": f"[openclaw:agent={self.origin_agent}]" if self.origin_agent else None,
            "originAgent": self.origin_agent, "label": self.label, "path": self.path, "era": self.era,
            "claudePath": self.claude_path,
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _ts(v) -> float | None:
    """ISO string or epoch (s or ms) → epoch seconds."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return v / 1000.0 if v > 1e11 else float(v)
    if isinstance(v, str) and v:
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _text_of(content) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                if b.get("type") in ("tool_result", "toolResult"):
                    return None  # a tool result carried in a user line: not something the user asked
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    parts.append(b["text"])
        return "\n".join(parts) if parts else None
    return None


def _is_task(text: str | None) -> bool:
    if not text or not text.strip():
        return False
    s = text.lstrip()
    return not s.startswith(_SKIP_PREFIXES)


def origin_of(text: str | None) -> str | None:
    m = ORIGIN_RE.search(text or "")
    return m.group(1) if m else None


def claude_slug(path: str | os.PathLike) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(Path(path).expanduser().absolute()))


def claude_projects_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR")
    root = Path(base).expanduser() if base else Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"
    return root / "projects"


def _inside(path: str | None, repo: Path | None) -> bool:
    if repo is None:
        return True
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(repo)
        return True
    except (ValueError, OSError):
        return False


# ---------------------------------------------------------------------------------------------------------
# Claude Code
# ---------------------------------------------------------------------------------------------------------

def read_claude_session(path: Path, counter: Counter | None = None, *, now: float | None = None,
                        idle_seconds: float = 120) -> Session | None:
    try:
        st = path.stat()
        head, tail, whole = head_tail(path)
    except OSError:
        return None
    sid = path.stem
    s = Session(id=sid, source="claude-code", claude_session_id=sid, path=str(path), claude_path=str(path),
                size=st.st_size, last_modified=st.st_mtime, mtime_ns=st.st_mtime_ns, context_window=CLAUDE_WINDOW)
    for o in head:
        if s.repo_path is None and isinstance(o.get("cwd"), str):
            s.repo_path = o["cwd"]
        if s.created is None and o.get("timestamp"):
            s.created = _ts(o.get("timestamp"))
        if s.first_user_message is None and o.get("type") == "user" and not o.get("isMeta") \
                and not o.get("isCompactSummary") and not o.get("isSidechain"):
            t = _text_of((o.get("message") or {}).get("content"))
            if _is_task(t):
                s.first_user_message = t[:TEXT_KEEP]
    for o in reversed(tail):
        if s.branch is None and isinstance(o.get("gitBranch"), str) and o["gitBranch"]:
            s.branch = o["gitBranch"]
        if o.get("type") == "assistant" and s.context_tokens is None:
            msg = o.get("message") or {}
            u = msg.get("usage") if isinstance(msg, dict) else None
            if isinstance(u, dict):
                s.context_tokens = sum(int(u.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                                     "cache_read_input_tokens", "output_tokens"))
            if s.model is None and isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
                s.model = msg["model"]
        if s.latest_user_task is None and o.get("type") == "user" and not o.get("isMeta") \
                and not o.get("isCompactSummary") and not o.get("isSidechain"):
            t = _text_of((o.get("message") or {}).get("content"))
            if _is_task(t):
                s.latest_user_task = t[:TEXT_KEEP]
        if s.repo_path is None and isinstance(o.get("cwd"), str):
            s.repo_path = o["cwd"]
    if whole:
        s.compaction_count = sum(1 for o in head if o.get("type") == "system" and o.get("subtype") == "compact_boundary")
        s.message_count = sum(1 for o in head if o.get("type") in ("user", "assistant"))
    elif counter is not None:
        c = counter.counts(path, CC_PATTERNS)
        s.compaction_count = c['"subtype":"compact_boundary"']
        s.message_count = c['"type":"user"'] + c['"type":"assistant"']
    if s.latest_user_task is None:
        s.latest_user_task = s.first_user_message
    s.origin_agent = origin_of(s.first_user_message)
    now = time.time() if now is None else now
    if now - st.st_mtime < idle_seconds:  # Claude Code keeps no lock file: a write moments ago means busy
        s.running, s.running_source = True, "recent-write"
    return s


def claude_sessions(projects: Path, *, repo: Path | None = None, counter: Counter | None = None,
                    now: float | None = None, idle_seconds: float = 120) -> list[Session]:
    try:
        dirs = sorted(os.listdir(projects))
    except OSError:
        return []
    want = claude_slug(repo) if repo is not None else None
    out = []
    for d in dirs:
        if want is not None and d != want and not d.startswith(want + "-"):
            continue
        pdir = projects / d
        try:
            names = os.listdir(pdir)
        except OSError:
            continue
        for n in names:
            if not n.endswith(".jsonl") or n.startswith("."):
                continue
            s = read_claude_session(pdir / n, counter, now=now, idle_seconds=idle_seconds)
            if s is None:
                continue
            if repo is not None and not (d == want and s.repo_path is None) and not _inside(s.repo_path, repo):
                continue
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------------------------
# OpenClaw
# ---------------------------------------------------------------------------------------------------------

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
    t = _text_of(m.get("content"))
    return t if _is_task(t) else None


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
            s.created = _ts(o.get("timestamp"))
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


def _file_session(state_dir: Path, agent: str, store, info, counter: Counter | None, cfg: dict,
                  marks: dict | None = None) -> Session | None:
    from occd.figure import file_figure
    from occd.openclaw import context_window

    p = info.path
    s = Session(id=info.session_id, source="openclaw", agent=agent, key=info.key, path=str(p), era=store.era,
                size=info.size, label=info.label or info.display_name, model=info.model,
                last_modified=info.mtime if info.mtime is not None else (info.updated_at or 0) / 1000 or None)
    try:
        st = os.stat(p)
        s.mtime_ns = st.st_mtime_ns
        head, tail, whole = head_tail(p)
    except OSError as e:
        s.warnings.append(f"cannot read {p}: {e.strerror}")
        return s
    _fill_from_objects(s, head, tail)
    if whole:
        msgs = sum(1 for o in head if o.get("type") == "message")
        comps = sum(1 for o in head if o.get("type") == "compaction")
    elif counter is not None:
        c = counter.counts(p, OC_PATTERNS)
        msgs, comps = c['"type":"message"'], c['"type":"compaction"']
    else:
        msgs, comps = None, 0
    s.message_count = msgs
    s.compaction_count = max(info.compaction_count or 0, comps or 0)
    ct = (info.entry or {}).get("contextTokens")
    s.context_window = ct if isinstance(ct, int) and ct > 0 else context_window(
        state_dir, agent=agent, model=info.model, provider=info.model_provider, config=cfg)
    fig = file_figure(p, entry=info.entry, window=s.context_window, mark=(marks or {}).get(info.session_id),
                      session_id=info.session_id, tail_window=256 * 1024)  # the one figure (occd.figure)
    s.context_tokens, s.context_source = fig.tokens, fig.source
    try:
        if store.is_running(info):
            s.running, s.running_source = True, "lock"
    except Exception:  # noqa: BLE001 - an unreadable lock is reported as not running; actions re-check
        pass
    return s


def _db_session(state_dir: Path, agent: str, store, info, cfg: dict) -> Session:
    from occd.openclaw import context_window

    s = Session(id=info.session_id, source="openclaw", agent=agent, key=info.key, era="db", size=info.size,
                label=info.label or info.display_name, model=info.model,
                last_modified=(info.updated_at or 0) / 1000 or None, compaction_count=info.compaction_count or 0)
    head: list[dict] = []
    tail: list[dict] = []
    try:
        c = store.conn()
        import orjson

        def objs(rows):
            out = []
            for ej, ez in rows:
                try:
                    if ej is not None:
                        o = orjson.loads(ej)
                    elif ez is not None:
                        from occd.openclaw.dbstore import _decode_zstd

                        o = orjson.loads(_decode_zstd(ez))
                    else:
                        continue
                except (ValueError, Exception):  # noqa: BLE001 - one bad row is skipped
                    continue
                if isinstance(o, dict):
                    out.append(o)
            return out

        q = "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq {} LIMIT 60"
        head = objs(c.execute(q.format("ASC"), (info.session_id,)).fetchall())
        tail = list(reversed(objs(c.execute(q.format("DESC"), (info.session_id,)).fetchall())))
        row = c.execute("SELECT SUM(CASE WHEN event_json IS NULL OR instr(event_json, '\"type\":\"message\"') > 0 "
                        "THEN 1 ELSE 0 END) FROM transcript_events WHERE session_id = ? AND seq > 0",
                        (info.session_id,)).fetchone()
        s.message_count = int(row[0] or 0) if row else None
    except Exception as e:  # noqa: BLE001 - a busy or unknown database: the record keeps the index facts
        s.warnings.append(f"{agent}/{info.session_id}: transcript not readable ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    _fill_from_objects(s, head, tail)
    usage = next((u for u in (_oc_usage(o) for o in reversed(tail)) if u), None)
    ct = (info.entry or {}).get("contextTokens")
    s.context_window = ct if isinstance(ct, int) and ct > 0 else context_window(
        state_dir, agent=agent, model=info.model, provider=info.model_provider, config=cfg)
    from occd.figure import session_figure

    fig = session_figure(transcript=(usage, "usage") if usage is not None else (None, None), entry=info.entry,
                         window=s.context_window, session_id=info.session_id)  # the one figure (occd.figure)
    s.context_tokens, s.context_source = fig.tokens, fig.source
    if info.status == "running":
        s.running, s.running_source = True, "database"
    return s


def openclaw_sessions(state_dir: Path, *, agent: str | None = None, repo: Path | None = None,
                      counter: Counter | None = None, warnings: list[str] | None = None) -> tuple[list[Session], dict[str, Session]]:
    """(sessions, {claude session id: the OpenClaw session naming it})."""
    from occd.errors import OccdError
    from occd.openclaw import list_agents, load_openclaw_config, open_store

    warnings = warnings if warnings is not None else []
    try:
        agents = list_agents(state_dir)
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
    for a in agents:
        if a.era == "empty" or (agent is not None and a.id != agent):
            continue
        try:
            store = open_store(state_dir, a.id)
            infos = store.sessions()
        except OccdError as e:
            warnings.append(f"agent {a.id}: {e.message}")
            continue
        warnings.extend(f"agent {a.id}: {w}" for w in getattr(store, "warnings", []))
        marks = None
        try:
            for info in infos:
                if store.era != "db" and marks is None:
                    from occd.figure import rewrite_marks

                    marks = rewrite_marks(a.id)
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
                if repo is not None and not _inside(s.repo_path, repo) and not ids:
                    continue
                out.append(s)
        finally:
            close = getattr(store, "close", None)
            if close:
                close()
    return out, links


def _merge(oc: Session, cc: Session) -> None:
    oc.source = "both"
    oc.claude_session_id = cc.id
    oc.claude_path = cc.path
    oc.branch = oc.branch or cc.branch
    oc.repo_path = cc.repo_path or oc.repo_path
    oc.compaction_count = max(oc.compaction_count, cc.compaction_count)
    if cc.last_modified and (oc.last_modified is None or cc.last_modified > oc.last_modified):
        oc.last_modified = cc.last_modified
    if cc.running and not oc.running:
        oc.running, oc.running_source = True, cc.running_source
    oc.origin_agent = oc.origin_agent or cc.origin_agent
    oc.first_user_message = oc.first_user_message or cc.first_user_message
    oc.latest_user_task = oc.latest_user_task or cc.latest_user_task


@dataclass
class Discovery:
    sessions: list[Session]
    warnings: list[str]
    counter_bytes_read: int = 0

    def to_json(self) -> dict:
        return {"sessions": [s.to_json() for s in self.sessions], "warnings": self.warnings,
                "count": len(self.sessions)}


def discover(*, state_dir: Path | None, agent: str | None = None, repo: str | os.PathLike | None = None,
             claude_projects: Path | None = None, include_claude: bool = True, include_openclaw: bool = True,
             now: float | None = None, idle_seconds: float = 120, counter_cache: Path | None = None) -> Discovery:
    """Every session of every OpenClaw agent (or `agent`) and of Claude Code, linked and filtered by `repo`
    (a session belongs to a repo when its working directory is inside it). Newest first."""
    from occd import paths

    now = time.time() if now is None else now
    repo_p = Path(repo).expanduser().resolve() if repo is not None else None
    cache = counter_cache if counter_cache is not None else paths.cache_dir() / "relevance-counts.json"
    counter = Counter(cache)
    warnings: list[str] = []
    oc: list[Session] = []
    links: dict[str, Session] = {}
    if include_openclaw and state_dir is not None:
        oc, links = openclaw_sessions(state_dir, agent=agent, repo=repo_p, counter=counter, warnings=warnings)
    cc: list[Session] = []
    if include_claude:
        projects = claude_projects if claude_projects is not None else claude_projects_dir()
        for s in claude_sessions(projects, repo=repo_p, counter=counter, now=now, idle_seconds=idle_seconds):
            linked = links.get(s.id)
            if linked is not None:
                _merge(linked, s)
                continue
            if agent is not None and s.origin_agent != agent:
                continue
            s.agent = s.origin_agent
            cc.append(s)
    if repo_p is not None:  # OpenClaw sessions kept only for their Claude link: drop those that found none inside
        oc = [s for s in oc if _inside(s.repo_path, repo_p)]
    counter.save()
    out = oc + cc
    out.sort(key=lambda s: s.last_modified or 0, reverse=True)
    return Discovery(out, warnings, counter.bytes_read)


def facts_of(s: Session):
    from occd.relevance.scoring import Facts

    return Facts(id=s.id, branch=s.branch, last_modified=s.last_modified, created=s.created,
                 message_count=s.message_count, size=s.size, compactions=s.compaction_count or 0,
                 context_tokens=s.context_tokens, context_window=s.context_window, running=s.running,
                 label=s.label, key=s.key)


def iter_agents(sessions: Iterable[Session]) -> list[str]:
    return sorted({s.agent for s in sessions if s.agent})
