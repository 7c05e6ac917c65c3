"""`occd mcp` over stdio, driven by the mcp package's own client: list the tools, call both."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from test_relevance import git_repo, make_cc_session, make_file_agent  # noqa: E402


def _occd_command() -> list[str]:
    exe = shutil.which("occd", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "occd"]


def _text(result) -> dict:
    if getattr(result, "structured_content", None):
        sc = result.structured_content
        return sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc
    for block in result.content:
        if getattr(block, "text", None):
            return json.loads(block.text)
    raise AssertionError(f"no content in {result}")


def test_mcp_stdio_lists_and_calls_both_tools(isolated_env):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    home = isolated_env
    repo = git_repo(home / "src" / "app", "main")
    now = time.time()
    make_file_agent(home / ".openclaw", "main", [
        {"sid": "oc-1", "users": ["refactor the webhook handler"], "cwd": str(repo), "mtime": now - 600}])
    make_cc_session(home, repo, "cc-1", ["fix login redirect"], "main", now - 1200)
    cmd = _occd_command()
    env = {k: v for k, v in os.environ.items()}  # isolated HOME/OCCD_HOME from the fixture
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], env=env, cwd=str(repo))

    async def go():
        async with Client(params, read_timeout_seconds=60) as client:
            tools = await client.list_tools()
            names = {t.name for t in tools.tools}
            status = await client.call_tool("openclaw_project_status", {"path": str(repo)})
            listing = await client.call_tool("openclaw_session_list", {"repo": str(repo)})
            scored = await client.call_tool("openclaw_session_list", {"repo": str(repo), "task": "webhook handler cleanup"})
            bad = await client.call_tool("openclaw_project_status", {"path": str(home)})
            return names, status, listing, scored, bad

    names, status, listing, scored, bad = anyio.run(go)
    assert {"openclaw_project_status", "openclaw_session_list"} <= names
    st = _text(status)
    assert st["branch"] == "main" and st["root"] == str(repo) and st["commits"][0]["subject"] == "initial commit"
    ls = _text(listing)
    assert {s["id"] for s in ls["sessions"]} == {"oc-1", "cc-1"}
    sc = _text(scored)
    assert sc["action"] in ("resume", "fresh", "queue") and sc["relevance"]["method"] == "keywords"
    assert "OPENAI_API_KEY" in sc["relevance"]["reason"]  # no key in the test env: keyword fallback, said so
    assert sc["candidates"][0]["id"] == "oc-1"
    assert bad.is_error and "not a git repository" in bad.content[0].text
