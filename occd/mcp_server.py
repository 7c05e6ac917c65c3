"""`occd mcp`: an MCP server over stdio (the `mcp` package, 2.x `MCPServer` API) so a Claude Code or OpenClaw
session can ask occd for itself:

- `openclaw_project_status(path)`: git/gh status of a repository (occd project-status).
- `openclaw_session_list(repo?, agent?, task?, limit?)`: discovered sessions (OpenClaw agents and Claude Code);
  with a task, each is scored and the resume / fresh / queue decision is included (occd select).

Text taken from transcripts is redacted before it is returned (the caller is a model session). Imported only
by the `mcp` command: the mcp package is never loaded by other commands or the daemon.
"""

from __future__ import annotations

import time
from typing import Any

SERVER_NAME = "occd"


def _settings():
    from occd.config import load_settings

    return load_settings()


def project_status_tool(path: str = ".") -> dict[str, Any]:
    from occd.relevance.project import project_status

    return project_status(path).to_json()


def session_list_tool(repo: str | None = None, agent: str | None = None, task: str | None = None,
                      limit: int = 20) -> dict[str, Any]:
    from pathlib import Path

    s = _settings()
    limit = max(1, min(int(limit or 20), 200))
    if task and task.strip():
        from occd.relevance.select import select_session

        r = select_session(s, task=task, repo=repo, agent=agent, now=time.time()).to_json()
        r["candidates"] = r["candidates"][:limit]
        return r
    from occd.relevance.discovery import discover
    from occd.relevance.project import find_root
    from occd.relevance.select import state_dir_of

    root = find_root(repo) if repo else None
    d = discover(state_dir=state_dir_of(s), agent=agent, repo=Path(root) if root else None,
                 idle_seconds=s.idle_seconds)
    out = d.to_json()
    out["sessions"] = out["sessions"][:limit]
    out["success"] = True
    return out


def build_server():
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from occd import __version__
    from occd.errors import OccdError

    server = MCPServer(SERVER_NAME, version=__version__,
                       instructions="Ask occd about the repository's state and which earlier coding-agent session "
                                    "(OpenClaw or Claude Code) is worth resuming for a task.")

    async def _call(fn, **kw):
        import anyio

        try:
            return await anyio.to_thread.run_sync(lambda: fn(**kw))
        except OccdError as e:
            raise ToolError(f"{e.message}" + (f" (hint: {e.hint})" if e.hint else "")) from None

    @server.tool(name="openclaw_project_status",
                 description="Git status of a repository: branch, ahead/behind, uncommitted and untracked counts, "
                             "stashes, recent commits, key docs (README, AGENTS.md, CLAUDE.md), open pull requests "
                             "and their checks when gh is logged in.")
    async def openclaw_project_status(path: str = ".") -> dict[str, Any]:
        return await _call(project_status_tool, path=path)

    @server.tool(name="openclaw_session_list",
                 description="Sessions of OpenClaw agents and Claude Code for a repository, newest first. With a "
                             "task: each scored for resuming that task, and the decision (resume which session, "
                             "start fresh, or queue behind a running one) with the reason.")
    async def openclaw_session_list(repo: str | None = None, agent: str | None = None, task: str | None = None,
                                    limit: int = 20) -> dict[str, Any]:
        return await _call(session_list_tool, repo=repo, agent=agent, task=task, limit=limit)

    return server


def serve() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)  # stderr only: stdout is the protocol channel
    build_server().run("stdio")
