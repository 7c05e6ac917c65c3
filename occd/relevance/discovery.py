"""Discovery: every session occd can find, as one record shape.

- OpenClaw: every agent of the state directory, file era (sessions.json + .jsonl) and database era (read-only
  SQLite), through occd.openclaw's stores.
- Claude Code: `~/.claude/projects/<slug>/*.jsonl` (`$CLAUDE_CONFIG_DIR/projects` when set), slug = the
  absolute project path with every character outside [A-Za-z0-9] replaced by '-'.
- Linking: OpenClaw records the Claude CLI session it drives in the session entry (`claudeCliSessionId`,
  `cliSessionIds["claude-cli"]`, `cliSessionBindings["claude-cli"].sessionId`; seen in the 2026.7.1 and
  2026.9.6 sources). A Claude Code session named there is merged into the OpenClaw record (source "both").
- Origin: a first user message carrying `[openclaw:agent=<id>]` names the agent that started the session.
- Running: Claude Code keeps `~/.claude/sessions/<pid>.json` ({"pid", "sessionId", "status": busy | waiting |
  idle, "procStart", ...}) while its process lives: pid alive (and the same process) + session id is a sure
  answer. OpenClaw: the transcript lock (file era), the session row's status (database era). Nothing is guessed
  from how recently a file was written.
- The caller: Claude Code starts MCP servers (and its tools) with CLAUDE_CODE_SESSION_ID (an OpenClaw session on
  the Claude CLI backend is found through its link); OPENCLAW_TOOLS_MCP_AGENT_SESSION_KEY, the agent session key
  OpenClaw hands the MCP server of an agent session, is honoured when set. That session is marked `self`.
- Last activity is the newest entry timestamp in the tail (a copied or restored file keeps its real age);
  the file's mtime only when no entry has one.

Transcripts are read at their head and tail only; message and compaction counts come from an incremental
line count (headtail.Counter) that reads each byte once over the life of the cache.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, Mapping

from occd.relevance.headtail import Counter, head_tail
from occd.relevance.prompts import SKIP_PREFIXES, claude_prompt_text, text_of
from occd.relevance.redact import squash
from occd.transcript import jsontext

ORIGIN_RE = re.compile(r"\[openclaw:agent=([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\]")
CLAUDE_BACKEND = "claude-cli"
CLAUDE_WINDOW = 200_000
CLAUDE_WINDOW_1M = 1_000_000
TEXT_KEEP = 2000          # characters of a user message kept in memory (digests use far fewer)
# Slash commands that manage the session rather than ask for work: a message, never a task.
HOUSEKEEPING_COMMANDS = frozenset("""
compact clear context cost model help status resume config login logout memory permissions doctor exit quit mcp
agents hooks ide vim theme usage export rewind statusline add-dir bashes todos output-style privacy-settings
release-notes upgrade terminal-setup feedback bug fast effort plugin plugins skills rename
""".split())
# The model's context window as Claude Code 2.1.330 reports it (`modelUsage.contextWindow` of `claude -p
# --output-format json`, checked per model on 2026-11-25): 1M for Opus 4.7+, Sonnet 5+, Haiku 5+, Fable, and
# for any model run with the 1M option ("[1m]" in requestedModel, the context-1m beta in the request); 200k
# for the others.
_CLAUDE_MODEL = re.compile(r"claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2}))?(?!\d)")
_ONE_M_FROM = {"opus": (4, 7), "sonnet": (5, 0), "haiku": (5, 0), "fable": (0, 0), "mythos": (0, 0)}
CALLER_CLAUDE_ENV = "CLAUDE_CODE_SESSION_ID"
CALLER_OPENCLAW_ENV = "OPENCLAW_TOOLS_MCP_AGENT_SESSION_KEY"


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
    context_source: str | None = None  # occd.openclaw.figure: usage | estimate | openclaw-estimate | index
    compaction_count: int = 0
    model: str | None = None
    running: bool = False
    running_source: str | None = None   # lock | database | claude-code busy (pid N)
    open_in: str | None = None          # a live Claude Code process holds it, idle
    is_self: bool = False               # the session asking (CLAUDE_CODE_SESSION_ID / the agent's session key)
    file_mtime: float | None = None
    index_updated: float | None = None  # the index's updatedAt (OpenClaw), epoch seconds
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
        return "\n".join(" ".join(x.split()) for x in (self.label, self.first_user_message, self.latest_user_task) if x)

    def context_percent(self) -> float | None:
        from occd.openclaw.figure import percent

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
            "runningSource": self.running_source, "openIn": self.open_in, "self": self.is_self,
            "fileModified": _iso(self.file_mtime),
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


def _is_task(text: str | None) -> bool:
    """Something the user asked: not a tool's output, a hook's note, or occd's own seed of a rotated session
    (that is occd writing, not the user asking: it is never shown as the session's task)."""
    from occd.transcript.marks import SEED_MARK

    if not text or not text.strip():
        return False
    s = text.lstrip()
    return not s.startswith(SKIP_PREFIXES + (SEED_MARK,)) and not s.startswith(("<command-name>", "<command-message>"))


def task_of_prompt(prompt: str | None) -> str | None:
    """The task a prompt asks for: a slash command's arguments (`/orchestrator build X` -> "build X"), the
    command itself when it has none (`/init`), nothing for housekeeping commands (`/compact`)."""
    if not prompt:
        return None
    s = prompt.strip()
    if s.startswith("/"):
        name, _, args = s[1:].partition(" ")
        if name and "/" not in name and "\n" not in name and len(name) <= 64:
            if args.strip():
                return args.strip()
            return None if name.lower() in HOUSEKEEPING_COMMANDS else s
    return s


def claude_context_window(model: str | None, requested: str | None = None, one_m_beta: bool = False,
                          tokens: int | None = None) -> int:
    """The context window Claude Code gives the session's model (see _ONE_M_FROM); a session that already
    holds more than 200k tokens of context has the 1M window whatever its model is called."""
    if one_m_beta or any(m and "[1m]" in m.lower() for m in (model, requested)):
        return CLAUDE_WINDOW_1M
    m = _CLAUDE_MODEL.search((model or requested or "").lower())
    if m:
        fam, major, minor = m.group(1), int(m.group(2)), int(m.group(3) or 0)
        if (major, minor) >= _ONE_M_FROM[fam]:
            return CLAUDE_WINDOW_1M
    if tokens is not None and tokens > CLAUDE_WINDOW:
        return CLAUDE_WINDOW_1M
    return CLAUDE_WINDOW


def _updated_at(info) -> float | None:
    """The index entry's own `updatedAt` (epoch ms → s), not a value filled in from the file's mtime."""
    v = (getattr(info, "entry", None) or {}).get("updatedAt")
    return v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def last_entry_time(objs: list[dict]) -> float | None:
    """The newest `timestamp` among transcript entries (ISO or epoch)."""
    best = None
    for o in objs:
        t = _ts(o.get("timestamp"))
        if t is not None and (best is None or t > best):
            best = t
    return best


def origin_of(text: str | None) -> str | None:
    m = ORIGIN_RE.search(text or "")
    return m.group(1) if m else None


def claude_slug(path: str | os.PathLike) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(Path(path).expanduser().absolute()))


def claude_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR")
    return Path(base).expanduser() if base else Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


def claude_projects_dir(env: Mapping[str, str] | None = None) -> Path:
    return claude_root(env) / "projects"


@dataclass(frozen=True)
class Caller:
    """The session that is asking (from the environment its tool or MCP server runs with)."""

    claude_session_id: str | None = None
    openclaw_key: str | None = None

    def matches(self, s: "Session") -> bool:
        if self.claude_session_id and self.claude_session_id in (s.id, s.claude_session_id):
            return True
        return bool(self.openclaw_key and s.key and s.source in ("openclaw", "both") and s.key == self.openclaw_key)

    def to_json(self) -> dict:
        return {"claudeSessionId": self.claude_session_id, "openclawSessionKey": self.openclaw_key}


def caller_from_env(env: Mapping[str, str] | None = None) -> Caller | None:
    env = os.environ if env is None else env
    cc = (env.get(CALLER_CLAUDE_ENV) or "").strip() or None
    oc = (env.get(CALLER_OPENCLAW_ENV) or "").strip() or None
    return Caller(cc, oc) if (cc or oc) else None


def _pid_is(pid: int, proc_start: str | None) -> bool:
    """Is `pid` alive, and (when Claude Code recorded its start time and /proc can tell) the same process?"""
    from occd.openclaw.locks import pid_alive, proc_starttime

    if not pid_alive(pid):
        return False
    if proc_start and proc_start.isdigit():
        actual = proc_starttime(pid)
        if actual is not None:
            return str(actual) == proc_start
    return True


def claude_live_sessions(root: Path) -> dict[str, dict]:
    """{session id: {"pid", "status"}} of the Claude Code processes alive now (`<root>/sessions/<pid>.json`)."""
    out: dict[str, dict] = {}
    d = root / "sessions"
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        if not n.endswith(".json"):
            continue
        try:
            o = json.loads((d / n).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(o, dict) or not isinstance(o.get("sessionId"), str) or isinstance(o.get("pid"), bool) \
                or not isinstance(o.get("pid"), int):
            continue
        ps = o.get("procStart")
        if _pid_is(o["pid"], ps if isinstance(ps, str) else None):
            status = o.get("status") if isinstance(o.get("status"), str) else "unknown"
            out[o["sessionId"]] = {"pid": o["pid"], "status": status}
    return out


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

def read_claude_session(path: Path, counter: Counter | None = None, *,
                        live: Mapping[str, dict] | None = None) -> Session | None:
    try:
        st = path.stat()
        head, tail, _whole = head_tail(path)
    except OSError:
        return None
    sid = path.stem
    s = Session(id=sid, source="claude-code", claude_session_id=sid, path=str(path), claude_path=str(path),
                size=st.st_size, file_mtime=st.st_mtime, mtime_ns=st.st_mtime_ns)
    for o in head:
        if s.repo_path is None and isinstance(o.get("cwd"), str):
            s.repo_path = o["cwd"]
        if s.created is None and o.get("timestamp"):
            s.created = _ts(o.get("timestamp"))
        if s.first_user_message is None:
            p = claude_prompt_text(o)
            if p is not None:
                t = task_of_prompt(p)
                if t:
                    s.first_user_message = t[:TEXT_KEEP]
    requested = None
    one_m = False
    branch_seen = False
    for o in reversed(tail):
        if not branch_seen and isinstance(o.get("gitBranch"), str) and o["gitBranch"]:
            branch_seen = True  # the newest entry's branch; "HEAD" = detached or a name Claude Code cannot write
            s.branch = None if o["gitBranch"] == "HEAD" else o["gitBranch"]
        if o.get("type") == "assistant" and s.context_tokens is None:
            msg = o.get("message") or {}
            u = msg.get("usage") if isinstance(msg, dict) else None
            if isinstance(u, dict) and msg.get("model") != "<synthetic>":
                s.context_tokens = sum(int(u.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                                     "cache_read_input_tokens", "output_tokens")
                                       if isinstance(u.get(k), (int, float)) and not isinstance(u.get(k), bool))
            if s.model is None and isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
                s.model = msg["model"]
                if isinstance(o.get("requestedModel"), str):
                    requested = o["requestedModel"]
        if o.get("type") == "api-request" and not one_m:
            params = o.get("params")
            betas = params.get("betas") if isinstance(params, dict) else None
            one_m = isinstance(betas, list) and any(isinstance(b, str) and b.startswith("context-1m") for b in betas)
        if s.latest_user_task is None:
            t = task_of_prompt(claude_prompt_text(o))
            if t:
                s.latest_user_task = t[:TEXT_KEEP]
        if s.repo_path is None and isinstance(o.get("cwd"), str):
            s.repo_path = o["cwd"]
    c = (counter or Counter(None)).counts(path, "claude-code")
    s.compaction_count = c["compactions"]
    s.message_count = c["user"] + c["assistant"]
    if s.latest_user_task is None:
        s.latest_user_task = s.first_user_message
    s.context_window = claude_context_window(s.model, requested, one_m, s.context_tokens)
    s.last_modified = last_entry_time(tail) or st.st_mtime
    s.origin_agent = origin_of(s.first_user_message)
    proc = (live or {}).get(sid)
    if proc is not None:
        if proc["status"] == "idle":
            s.open_in = f"Claude Code pid {proc['pid']} (idle)"
        else:
            s.running, s.running_source = True, f"claude-code {proc['status']} (pid {proc['pid']})"
    return s


def claude_sessions(projects: Path, *, repo: Path | None = None, counter: Counter | None = None,
                    live: Mapping[str, dict] | None = None) -> list[Session]:
    try:
        dirs = sorted(os.listdir(projects))
    except OSError:
        return []
    want = claude_slug(repo) if repo is not None else None
    if live is None:
        live = claude_live_sessions(projects.parent)
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
            s = read_claude_session(pdir / n, counter, live=live)
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
    t = text_of(m.get("content"))
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
    from occd.openclaw.figure import file_figure

    p = info.path
    s = Session(id=info.session_id, source="openclaw", agent=agent, key=info.key, path=str(p), era=store.era,
                size=info.size, label=info.label or info.display_name, model=info.model,
                last_modified=info.mtime if info.mtime is not None else (info.updated_at or 0) / 1000 or None,
                index_updated=_updated_at(info))
    try:
        st = os.stat(p)
        s.mtime_ns = st.st_mtime_ns
        head, tail, _whole = head_tail(p)
    except OSError as e:
        s.warnings.append(f"cannot read {p}: {e.strerror}")
        return s
    _fill_from_objects(s, head, tail)
    s.file_mtime = s.last_modified
    s.last_modified = last_entry_time(tail) or s.last_modified
    c = (counter or Counter(None)).counts(p, "openclaw")
    s.message_count = c["user"] + c["assistant"]
    s.compaction_count = _compactions(info, c["compactions"])
    s.context_window = _window(state_dir, agent, info, cfg)
    fig = file_figure(p, entry=info.entry, window=s.context_window, mark=(marks or {}).get(info.session_id),
                      session_id=info.session_id, tail_window=256 * 1024)  # the one figure (occd.openclaw.figure)
    s.context_tokens, s.context_source = fig.tokens, fig.source
    try:
        if store.is_running(info):
            s.running, s.running_source = True, "lock"
    except Exception:  # noqa: BLE001 - an unreadable lock is reported as not running; actions re-check
        pass
    return s


def _window(state_dir: Path, agent: str, info, cfg: dict) -> int | None:
    """The session's window by the one rule (occd.openclaw.figure.session_window)."""
    from occd.openclaw import context_window_for_session

    return context_window_for_session(state_dir, agent, info, config=cfg)


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
                      unreadable: list[str] | None = None) -> tuple[list[Session], dict[str, Session]]:
    """(sessions, {claude session id: the OpenClaw session naming it}). An agent whose store occd cannot read
    (a schema it does not know, a missing column) is named in `warnings` with what to do, and its id added to
    `unreadable`."""
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
                    from occd.openclaw.figure import rewrite_marks

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
    oc.open_in = oc.open_in or cc.open_in
    oc.origin_agent = oc.origin_agent or cc.origin_agent
    oc.first_user_message = oc.first_user_message or cc.first_user_message
    oc.latest_user_task = oc.latest_user_task or cc.latest_user_task


@dataclass
class Place:
    """A place discovery looked in, and what it found there."""

    source: str          # openclaw | claude-code
    path: str | None
    status: str          # missing | empty | found | not-searched
    sessions: int = 0    # sessions found there (in the repository, when one was given)
    elsewhere: int = 0   # when none was: sessions there outside the repository
    unreadable: list[str] = field(default_factory=list)  # agents whose store occd cannot read (see the warnings)

    def describe(self) -> str:
        name = {"openclaw": "OpenClaw state", "claude-code": "Claude Code projects"}[self.source]
        if self.status == "missing":
            return f"{name} {self.path}: missing"
        bad = (f", agent {', '.join(self.unreadable)} not readable by occd (see the warning)"
               if self.unreadable else "")
        if self.status == "empty":
            return f"{name} {self.path}: no sessions" + (" occd can read" if self.unreadable else "") + (
                f" in the repository ({self.elsewhere} elsewhere)" if self.elsewhere else "") + bad
        if self.status == "not-searched":
            return f"{name}: not searched"
        return f"{name} {self.path}: {self.sessions} session{'s' if self.sessions != 1 else ''}" + bad

    def to_json(self) -> dict:
        return {"source": self.source, "path": self.path, "status": self.status, "sessions": self.sessions,
                "elsewhere": self.elsewhere, "unreadable": self.unreadable}


@dataclass
class Discovery:
    sessions: list[Session]
    warnings: list[str]
    counter_bytes_read: int = 0
    places: list[Place] = field(default_factory=list)
    repo: str | None = None
    caller: Caller | None = None

    def nothing_found(self) -> str | None:
        """Why the list is empty, naming every place looked in (None when something was found)."""
        if self.sessions:
            return None
        where = "; ".join(p.describe() for p in self.places) or "nowhere"
        scope = f" in repository {self.repo}" if self.repo else ""
        hint = ""
        if any(p.status == "missing" for p in self.places) and not any(p.elsewhere for p in self.places):
            hint = (" — set OPENCLAW_STATE_DIR (or occd's state_dir) / CLAUDE_CONFIG_DIR when the sessions live "
                    "elsewhere, e.g. in the MCP server's env")
        return f"No sessions found{scope}. Looked in: {where}{hint}."

    def to_json(self) -> dict:
        return {"sessions": [s.to_json() for s in self.sessions], "warnings": self.warnings,
                "count": len(self.sessions), "repo": self.repo, "searched": [p.to_json() for p in self.places],
                "caller": self.caller.to_json() if self.caller else None, "note": self.nothing_found()}


def discover(*, state_dir: Path | None, agent: str | None = None, repo: str | os.PathLike | None = None,
             claude_projects: Path | None = None, include_claude: bool = True, include_openclaw: bool = True,
             counter_cache: Path | None = None, caller: Caller | None = None) -> Discovery:
    """Every session of every OpenClaw agent (or `agent`) and of Claude Code, linked and filtered by `repo`
    (a session belongs to a repo when its working directory is inside it), the caller's own session marked.
    Newest first. `places` says where it looked and what it found there."""
    from occd import paths

    repo_p = Path(repo).expanduser().resolve() if repo is not None else None
    cache = counter_cache if counter_cache is not None else paths.cache_dir() / "relevance-counts.json"
    counter = Counter(cache)
    warnings: list[str] = []
    places: list[Place] = []
    oc: list[Session] = []
    links: dict[str, Session] = {}
    if include_openclaw:
        if state_dir is None or not state_dir.is_dir():
            if agent is not None and state_dir is not None:
                openclaw_sessions(state_dir, agent=agent, counter=counter, warnings=warnings)  # raises: says why
            places.append(Place("openclaw", str(state_dir) if state_dir else None, "missing"))
        else:
            bad: list[str] = []
            oc, links = openclaw_sessions(state_dir, agent=agent, repo=repo_p, counter=counter, warnings=warnings,
                                          unreadable=bad)
            places.append(Place("openclaw", str(state_dir), "found" if oc else "empty", len(oc), unreadable=bad))
    cc: list[Session] = []
    if include_claude:
        projects = claude_projects if claude_projects is not None else claude_projects_dir()
        if not projects.is_dir():
            places.append(Place("claude-code", str(projects), "missing"))
        else:
            for s in claude_sessions(projects, repo=repo_p, counter=counter):
                linked = links.get(s.id)
                if linked is not None:
                    _merge(linked, s)
                    continue
                if agent is not None and s.origin_agent != agent:
                    continue
                s.agent = s.origin_agent
                cc.append(s)
            places.append(Place("claude-code", str(projects), "found" if cc else "empty", len(cc)))
    if repo_p is not None:  # OpenClaw sessions kept only for their Claude link: drop those that found none inside
        oc = [s for s in oc if _inside(s.repo_path, repo_p)]
    counter.save()
    out = oc + cc
    if repo_p is not None and not out:  # say how many the repo filter left out, where
        for p in places:
            if p.status == "empty":
                p.elsewhere = (_count_all(Path(p.path), agent) if p.source == "openclaw"
                               else _count_claude_files(Path(p.path)))
    if caller is not None:
        for s in out:
            s.is_self = caller.matches(s)
    out.sort(key=lambda s: s.last_modified or 0, reverse=True)
    return Discovery(out, warnings, counter.bytes_read, places, str(repo_p) if repo_p else None, caller)


def _count_claude_files(projects: Path) -> int:
    n = 0
    try:
        for d in os.listdir(projects):
            try:
                n += sum(1 for f in os.listdir(projects / d) if f.endswith(".jsonl") and not f.startswith("."))
            except OSError:
                continue
    except OSError:
        pass
    return n


def _count_all(state_dir: Path, agent: str | None) -> int:
    """Sessions of the OpenClaw state whatever their directory (only to say how many a repo filter left out)."""
    from occd.errors import OccdError
    from occd.openclaw import list_agents, open_store

    n = 0
    try:
        agents = list_agents(state_dir)
    except OccdError:
        return 0
    for a in agents:
        if a.era == "empty" or (agent is not None and a.id != agent):
            continue
        try:
            store = open_store(state_dir, a.id)
            try:
                n += len(store.sessions())
            finally:
                close = getattr(store, "close", None)
                if close:
                    close()
        except Exception:  # noqa: BLE001 - only a count for a message
            continue
    return n


def facts_of(s: Session):
    from occd.relevance.scoring import Facts

    return Facts(id=s.id, branch=s.branch, last_modified=s.last_modified, created=s.created,
                 message_count=s.message_count, size=s.size, compactions=s.compaction_count or 0,
                 context_tokens=s.context_tokens, context_window=s.context_window, running=s.running,
                 label=s.label, key=s.key, is_self=s.is_self)


def iter_agents(sessions: Iterable[Session]) -> list[str]:
    return sorted({s.agent for s in sessions if s.agent})
