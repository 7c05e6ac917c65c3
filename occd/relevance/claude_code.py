"""Claude Code's side of discovery: `~/.claude/projects/<slug>/*.jsonl` (`$CLAUDE_CONFIG_DIR/projects` when set),
slug = the absolute project path with every character outside [A-Za-z0-9] replaced by '-'; which sessions a live
Claude Code process holds (`~/.claude/sessions/<pid>.json`: pid alive and the same process + session id); the
task a prompt asks for; the model's context window. Split out of occd/relevance/discovery.py (issue 25),
unchanged."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping

from occd.relevance.headtail import Counter, head_tail
from occd.relevance.prompts import claude_prompt_text
from occd.relevance.session import TEXT_KEEP, Session, inside, last_entry_time, origin_of, to_epoch

CLAUDE_WINDOW = 200_000
CLAUDE_WINDOW_1M = 1_000_000
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


def claude_slug(path: str | os.PathLike) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(Path(path).expanduser().absolute()))


def claude_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR")
    return Path(base).expanduser() if base else Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


def claude_projects_dir(env: Mapping[str, str] | None = None) -> Path:
    return claude_root(env) / "projects"


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
            s.created = to_epoch(o.get("timestamp"))
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
            if repo is not None and not (d == want and s.repo_path is None) and not inside(s.repo_path, repo):
                continue
            out.append(s)
    return out
