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

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from occd.relevance.claude_code import claude_projects_dir, claude_sessions
from occd.relevance.headtail import Counter
from occd.relevance.openclaw_side import openclaw_sessions
from occd.relevance.session import Session, inside

CALLER_CLAUDE_ENV = "CLAUDE_CODE_SESSION_ID"
CALLER_OPENCLAW_ENV = "OPENCLAW_TOOLS_MCP_AGENT_SESSION_KEY"


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
        oc = [s for s in oc if inside(s.repo_path, repo_p)]
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
            store = open_store(state_dir, a)
            try:
                n += len(store.sessions())
            finally:
                close = getattr(store, "close", None)
                if close:
                    close()
        except Exception:  # noqa: BLE001 - only a count for a message
            continue
    return n
