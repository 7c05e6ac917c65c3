"""`occd mcp`: an MCP server over stdio (the `mcp` package, 2.x `MCPServer` API) so a Claude Code or OpenClaw
session can ask occd for itself:

- `openclaw_project_status(path)`: git/gh status of a repository (occd project-status).
- `openclaw_session_list(repo?, agent?, task?, limit?)`: discovered sessions (OpenClaw agents and Claude Code);
  with a task, each is scored and the resume / fresh / queue decision is included (occd select).

Text taken from transcripts is redacted before it is returned (the caller is a model session). Imported only
by the `mcp` command: the mcp package is never loaded by other commands or the daemon.
"""

from __future__ import annotations

import errno
import os
import time
from typing import Annotated, Any

from pydantic import Field

SERVER_NAME = "occd"
LIMIT_MAX = 200
PATH_MAX = 4096

PathArg = Annotated[str, Field(min_length=1, max_length=PATH_MAX, description=(
    "Absolute path of the git working tree (or any path inside it). Default: the server's working directory."))]
RepoArg = Annotated[str | None, Field(max_length=PATH_MAX, description=(
    "Absolute path of a git working tree: only sessions whose working directory is inside it. Omitted: with a "
    "task, the server's working directory's repository; without one, every session."))]
AgentArg = Annotated[str | None, Field(max_length=64, description=(
    "OpenClaw agent id (e.g. 'main'): only that agent's sessions and the Claude Code sessions it started."))]
TaskArg = Annotated[str | None, Field(max_length=4000, description=(
    "The work to do, in a sentence. Given: every session is rated for it and the answer says resume (which "
    "session), start fresh, or queue behind a running one, and why. Omitted: just the list."))]
LimitArg = Annotated[int, Field(ge=1, le=LIMIT_MAX, description=(
    f"How many sessions (or scored candidates) to return, newest (or best) first: 1 to {LIMIT_MAX}."))]


def _settings():
    from occd.config import load_settings

    return load_settings()


def _check_path(name: str, value: str | None) -> None:
    """One clear message for a path the file system cannot take (too long, a NUL byte), before anything uses it."""
    from occd.errors import UsageError

    if value is None:
        return
    if "\0" in value:
        raise UsageError(f"{name} contains a NUL byte", f"give {name} as a plain path")
    longest = max((len(part.encode()) for part in value.split(os.sep)), default=0)
    name_max = 255
    try:
        name_max = os.pathconf("/", "PC_NAME_MAX")
    except (OSError, ValueError):
        pass
    if len(value.encode()) >= PATH_MAX or longest > name_max:
        raise UsageError(f"{name} is longer than the file system allows ({len(value.encode())} bytes, longest "
                         f"component {longest}; limits {PATH_MAX - 1} and {name_max})",
                         f"give the path of a git working tree as {name}")


def project_status_tool(path: str = ".") -> dict[str, Any]:
    from occd.relevance.project import project_status

    _check_path("path", path)
    return project_status(path).to_json()


def session_list_tool(repo: str | None = None, agent: str | None = None, task: str | None = None,
                      limit: int = 20) -> dict[str, Any]:
    from pathlib import Path

    from occd.errors import UsageError

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise UsageError(f"limit must be a whole number from 1 to {LIMIT_MAX} (got {limit!r})",
                         "leave it out for 20")
    _check_path("repo", repo)
    s = _settings()
    if task and task.strip():
        from occd.relevance.select import select_session

        r = select_session(s, task=task, repo=repo, agent=agent, now=time.time()).to_json()
        r["candidates"] = r["candidates"][:limit]
        return r
    from occd.relevance.discovery import caller_from_env, discover
    from occd.relevance.project import find_root
    from occd.relevance.select import state_dir_of

    root = find_root(repo) if repo else None
    d = discover(state_dir=state_dir_of(s), agent=agent, repo=Path(root) if root else None, caller=caller_from_env())
    out = d.to_json()
    out["sessions"] = out["sessions"][:limit]
    out["success"] = True
    return out


def _one_line_validation(tool: str, exc) -> str:
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e.get("loc", ()) if x not in ("Arguments",)) or "arguments"
        ctx = e.get("ctx") or {}
        msg = e.get("msg", "invalid")
        if e.get("type") in ("less_than_equal", "greater_than_equal", "less_than", "greater_than"):
            msg = f"must be from 1 to {LIMIT_MAX}" if where == "limit" else msg
        elif e.get("type") == "string_too_long":
            msg = f"is too long (at most {ctx.get('max_length')} characters)"
        got = e.get("input")
        got_s = repr(got) if not isinstance(got, str) or len(got) <= 40 else f"a string of {len(got)} characters"
        parts.append(f"{where} {msg[:1].lower() + msg[1:]} (got {got_s})")
    return f"{tool}: bad argument: " + "; ".join(parts)


# The tools `occd mcp` serves (name -> description): `occd mcp --json` lists them without serving.
TOOLS = {
    "openclaw_project_status": ("Git status of a repository: branch, ahead/behind, uncommitted and untracked counts, "
                             "stashes, recent commits, key docs (README, AGENTS.md, CLAUDE.md), open pull requests "
                             "and their checks when gh is logged in. Read-only."),
    "openclaw_session_list": ("Sessions of OpenClaw agents and Claude Code for a repository, newest first, with "
                             "branch, last activity, messages, context use, compactions and whether a run is in "
                             "progress. With a task: each scored for resuming that task, and the decision (resume "
                             "which session, start fresh, or queue behind a running one) with the reason. The "
                             "calling session is marked self and never recommended. When nothing is found, `note` "
                             "says where it looked. Read-only."),
}


def build_server():
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import ValidationError

    from occd import __version__
    from occd.errors import OccdError

    class _Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if isinstance(e.__cause__, ValidationError):  # one line naming the argument, not pydantic's page
                    raise ToolError(_one_line_validation(name, e.__cause__)) from e.__cause__
                raise

        async def run_stdio_async(self) -> None:
            """The package's stdio transport, except that a line that is not a JSON-RPC message gets the JSON-RPC
            answer (-32700 Parse error, -32600 Invalid Request; id null) instead of being dropped unanswered."""
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read_stream, write_stream):
                await self._lowlevel_server.run(_answer_bad_lines(read_stream, write_stream), write_stream,
                                                self._lowlevel_server.create_initialization_options())

    server = _Server(SERVER_NAME, version=__version__,
                     instructions="Ask occd about the repository's state and which earlier coding-agent session "
                                  "(OpenClaw or Claude Code) is worth resuming for a task. Read-only: it never "
                                  "changes a session or the repository.")

    async def _call(fn, **kw):
        import anyio

        try:
            return await anyio.to_thread.run_sync(lambda: fn(**kw))
        except OccdError as e:
            raise ToolError(f"{e.message}" + (f" (hint: {e.hint})" if e.hint else "")) from None
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else str(e)
            if e.errno == errno.ENAMETOOLONG:
                why = "the path is longer than the file system allows"
            raise ToolError(f"{why}" + (f": {str(e.filename)[:120]}" if e.filename else "")) from None
        except ValueError as e:
            raise ToolError(f"bad argument: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    @server.tool(name="openclaw_project_status", annotations=read_only,
                 description=TOOLS["openclaw_project_status"])
    async def openclaw_project_status(path: PathArg = ".") -> dict[str, Any]:
        return await _call(project_status_tool, path=path)

    @server.tool(name="openclaw_session_list", annotations=read_only,
                 description=TOOLS["openclaw_session_list"])
    async def openclaw_session_list(repo: RepoArg = None, agent: AgentArg = None, task: TaskArg = None,
                                    limit: LimitArg = 20) -> dict[str, Any]:
        return await _call(session_list_tool, repo=repo, agent=agent, task=task, limit=limit)

    return server


def rpc_error_for(exc: Exception) -> dict:
    """The JSON-RPC error object for a line the transport could not take as a message."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if any(e.get("type") == "json_invalid" for e in errors) or not errors:
        return {"code": -32700, "message": "Parse error: the line is not valid JSON"}
    return {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 request, notification or response"}


class _answer_bad_lines:
    """A receive stream over the transport's: an Exception item (a line that failed to parse) is answered on
    `write_stream` with a JSON-RPC error and skipped; everything else passes through unchanged."""

    def __init__(self, inner, write_stream):
        self._inner = inner
        self._write = write_stream

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def __aenter__(self):
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self._inner.__aexit__(*exc)

    def __aiter__(self):
        return self

    async def __anext__(self):
        while True:
            item = await self._inner.__anext__()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def receive(self):
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, exc: Exception) -> None:
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError

        err = rpc_error_for(exc)
        try:
            await self._write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(**err))))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass


def serve() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)  # stderr only: stdout is the protocol channel
    build_server().run("stdio")
