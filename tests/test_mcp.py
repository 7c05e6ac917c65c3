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


# ---------------------------------------------------------------------------------------------------------
# Claude Code's protocol (2026-07-28: no initialize, an envelope in every request's _meta), schema, errors
# ---------------------------------------------------------------------------------------------------------

_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.330"},
         "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}}


def _modern_session(requests: list[tuple[str, dict]], env: dict, cwd: Path) -> dict:
    """Send requests as Claude Code 2.1.330 does (server/discover first, no initialize) over stdio; {id: response}."""
    import subprocess

    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": {**p, "_meta": _META}})
             for i, (m, p) in enumerate(requests)]
    cmd = _occd_command()
    proc = subprocess.Popen([*cmd, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=str(cwd), text=True)
    out: dict = {}
    try:
        for ln in lines:  # one at a time: each answer before the next request, like a client would
            proc.stdin.write(ln + "\n")
            proc.stdin.flush()
            want = json.loads(ln)["id"]
            while want not in out:
                raw = proc.stdout.readline()
                assert raw, f"server closed: {proc.stderr.read()[-2000:]}"
                msg = json.loads(raw)
                if "id" in msg:
                    out[msg["id"]] = msg
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            proc.kill()
    return out


def test_mcp_claude_code_protocol_2026_07_28_schema_and_errors(isolated_env):
    home = isolated_env
    repo = git_repo(home / "src" / "app", "main")
    make_cc_session(home, repo, "cc-1", ["fix login redirect"], "main", time.time() - 1200)
    env = dict(os.environ)
    long_name = str(repo / ("x" * 300))
    r = _modern_session([
        ("server/discover", {}),
        ("tools/list", {}),
        ("tools/call", {"name": "openclaw_session_list", "arguments": {"repo": str(repo), "limit": 5}}),
        ("tools/call", {"name": "openclaw_session_list", "arguments": {"repo": str(repo), "limit": 0}}),
        ("tools/call", {"name": "openclaw_session_list", "arguments": {"repo": str(repo), "limit": 201}}),
        ("tools/call", {"name": "openclaw_project_status", "arguments": {"path": long_name}}),
        ("tools/call", {"name": "openclaw_session_list", "arguments": {"repo": long_name, "task": "x"}}),
        ("tools/call", {"name": "openclaw_project_status", "arguments": {"path": "/" + "y" * 5000}}),
        ("tools/call", {"name": "openclaw_session_list", "arguments": {"limit": "many"}}),
    ], env, repo)
    assert "2026-07-28" in r[0]["result"]["supportedVersions"]
    tools = {t["name"]: t for t in r[1]["result"]["tools"]}
    assert set(tools) == {"openclaw_project_status", "openclaw_session_list"}
    for t in tools.values():
        assert t["annotations"]["readOnlyHint"] is True
        for name, prop in t["inputSchema"]["properties"].items():
            assert len(prop.get("description", "")) > 30, (t["name"], name)  # more than "Repo"
    lim = tools["openclaw_session_list"]["inputSchema"]["properties"]["limit"]
    assert (lim["minimum"], lim["maximum"]) == (1, 200)
    listing = r[2]["result"]
    assert not listing.get("isError")
    body = listing.get("structuredContent") or json.loads(listing["content"][0]["text"])
    assert [s["id"] for s in body["sessions"]] == ["cc-1"]
    errors = [r[i]["result"] for i in range(3, 9)]
    for e in errors:  # every bad argument: an error result with one clear line, never a silent clamp
        assert e["isError"] is True
        text = e["content"][0]["text"]
        assert "\n" not in text and "pydantic" not in text and "validation error" not in text, text
    assert "limit" in errors[0]["content"][0]["text"] and "1 to 200" in errors[0]["content"][0]["text"]
    assert "limit" in errors[1]["content"][0]["text"] and "1 to 200" in errors[1]["content"][0]["text"]
    for e in errors[2:4]:
        assert "longer than the file system allows" in e["content"][0]["text"]
    assert "path" in errors[4]["content"][0]["text"] and "too long" in errors[4]["content"][0]["text"]
    assert "limit" in errors[5]["content"][0]["text"]


def test_mcp_minimal_environment_says_where_it_looked(isolated_env, tmp_path):
    """The MCP Inspector and the Python SDK start servers with a minimal environment: nothing found must say
    which places were looked in, not just `sessions: []`."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = _occd_command()
    empty = tmp_path / "empty-home"
    empty.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(empty), "OCCD_HOME": str(tmp_path / "occd-home")}
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], env=env, cwd=str(empty))

    async def go():
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("openclaw_session_list", {})

    body = _text(anyio.run(go))
    assert body["sessions"] == [] and body["count"] == 0
    places = {p["source"]: p for p in body["searched"]}
    assert places["openclaw"]["status"] == "missing" and places["openclaw"]["path"] == str(empty / ".openclaw")
    assert places["claude-code"]["status"] == "missing"
    assert places["claude-code"]["path"] == str(empty / ".claude" / "projects")
    assert str(empty / ".openclaw") in body["note"] and "OPENCLAW_STATE_DIR" in body["note"]
