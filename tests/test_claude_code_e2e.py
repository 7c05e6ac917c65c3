"""occd against sessions the real Claude Code CLI writes (offline, tests/e2e): the facts occd
reads (messages as Claude Code shows them, compactions, slash-command tasks, window, branch, last activity),
running from Claude Code's live-process files, the advice `select` gives with keywords and with a scripted
model (never an unrelated session, never the caller), and `occd mcp` called by Claude Code itself over its
2026-07-28 protocol."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from claude_code_harness import CC_DIR, CC_VERSION, ClaudeCodeHome, require_claude_code
from e2e_harness import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    for args in (["init", "-q", "-b", "main"], ["add", "calc.py"], ["commit", "-q", "-m", "calculator"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


def _json(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr[-2000:] + p.stdout[-2000:]
    return json.loads(p.stdout)


def _last_timestamp(path: Path) -> float:
    best = 0.0
    for line in path.read_text().splitlines():
        ts = json.loads(line).get("timestamp")
        if isinstance(ts, str):
            best = max(best, datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp())
    return best


def _fake_anthropic(tmp_path: Path, rating: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    p = subprocess.Popen([sys.executable, str(CC_DIR / "fake_anthropic.py"), str(port)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env={**os.environ, "FAKE_RATING": rating,
                                                         "FAKE_LOG": str(tmp_path / f"fake-{rating}.jsonl")})
    time.sleep(0.7)
    return p, f"http://127.0.0.1:{port}"


def test_real_claude_code_sessions_facts_running_and_advice(tmp_path):
    require_claude_code()
    repo = _repo(tmp_path / "calc")
    with ClaudeCodeHome(CC_VERSION, tmp_path, repo) as cc:
        a = cc.run("add a subtract function to the calculator")["session_id"]
        cc.run("USE_BASH check the status", "--resume", a, "--allowedTools", "Bash")
        cc.run("USE_READ the calc file", "--resume", a)
        cc.run("/compact", "--resume", a)
        cc.run("after the compaction: add tests for subtract", "--resume", a)
        b = cc.run("/init")["session_id"]
        c = cc.run("write the release notes for the billing export")["session_id"]

        listing = _json(cc.occd("sessions", "--repo", str(repo), "--json"))
        by = {s["id"]: s for s in listing["sessions"]}
        assert set(by) == {a, b, c}
        sa = by[a]
        # Claude Code shows 5 prompts (/compact is one) and 6 replies (a text + Bash call is one reply)
        assert sa["messageCount"] == 11 and sa["compactionCount"] == 1
        assert sa["branch"] == "main" and sa["repoPath"] == str(repo)
        assert sa["firstUserMessage"] == "add a subtract function to the calculator"
        assert sa["latestUserTask"] == "after the compaction: add tests for subtract"
        assert sa["model"] == "claude-opus-5-5" and sa["contextWindow"] == 1_000_000  # as claude -p reports it
        assert sa["running"] is False  # finished seconds ago: not running (no 120 s guess)
        assert datetime.fromisoformat(sa["lastModified"]).timestamp() == pytest.approx(
            _last_timestamp(cc.session_file(a)), abs=1)
        assert by[b]["latestUserTask"] == "/init" and by[b]["messageCount"] == 2

        # keywords: the related session is resumed; unrelated work starts fresh, and says why
        r = _json(cc.occd("select", "--task", "add a subtract function to the calculator", "--repo", str(repo),
                          "--no-llm", "--json"))
        assert (r["action"], r["sessionId"]) == ("resume", a), r["reason"]
        r = _json(cc.occd("select", "--task", "translate the user guide into French", "--repo", str(repo),
                          "--no-llm", "--json"))
        assert r["action"] == "fresh" and "no session is related" in r["reason"]

        # a scripted model through litellm: 0.9 for the subtract session → resume it; a model that rates every
        # session 0 (the "Resume 02ddd362: scores 0.60 ≥ 0.60 (relevance 0.00 ...)") → fresh
        llm = {"OCCD_LLM__MODEL": "anthropic/claude-haiku-4-5", "OCCD_LLM__API_BASE": cc.api_base,
               "OCCD_LLM__TIMEOUT_SECONDS": "60"}
        r = _json(cc.occd("select", "--task", "add a subtract function to the calculator", "--repo", str(repo),
                          "--json", env=llm))
        assert r["relevance"]["method"] == "model" and (r["action"], r["sessionId"]) == ("resume", a), r
        zero, base = _fake_anthropic(tmp_path, "zero")
        try:
            r = _json(cc.occd("select", "--task", "add a subtract function to the calculator", "--repo", str(repo),
                              "--json", env={**llm, "OCCD_LLM__API_BASE": base}))
        finally:
            zero.send_signal(signal.SIGTERM)
            zero.wait(timeout=10)
        assert r["relevance"]["method"] == "model" and r["action"] == "fresh" and r["sessionId"] is None, r
        assert "0.00" in r["reason"]

        # the caller: inside session A (as Claude Code's Bash tool or MCP server would be), A is not offered
        r = _json(cc.occd("select", "--task", "add a subtract function to the calculator", "--repo", str(repo),
                          "--no-llm", "--json", env={"CLAUDE_CODE_SESSION_ID": a, "CLAUDECODE": "1"}))
        assert r["sessionId"] != a and r["action"] == "fresh"
        assert next(x for x in r["candidates"] if x["id"] == a)["self"] is True

        # running: a busy run is running (from ~/.claude/sessions/<pid>.json), and not a moment after it ends
        run = cc.start("USE_SLEEP take your time", "--resume", c)
        try:
            live = cc.home / ".claude" / "sessions"
            end = time.monotonic() + 60
            while time.monotonic() < end and not any(
                    c in f.read_text() for f in live.glob("*.json") if f.is_file()):
                time.sleep(0.5)
            busy = {s["id"]: s for s in _json(cc.occd("sessions", "--repo", str(repo), "--json"))["sessions"]}
            assert busy[c]["running"] is True and busy[c]["runningSource"].startswith("claude-code busy (pid ")
            assert busy[a]["running"] is False
            q = _json(cc.occd("select", "--task", "x", "--label", c, "--repo", str(repo), "--no-llm", "--json"))
            assert (q["action"], q["sessionId"]) == ("queue", c)
        finally:
            run.communicate(timeout=120)
        done = {s["id"]: s for s in _json(cc.occd("sessions", "--repo", str(repo), "--json"))["sessions"]}
        assert done[c]["running"] is False


def test_claude_code_calls_occd_mcp_and_is_not_offered_itself(tmp_path):
    require_claude_code()
    repo = _repo(tmp_path / "calc")
    occd = shutil.which("occd", path=str(Path(sys.executable).parent))
    assert occd, "occd is not installed in the test environment"
    with ClaudeCodeHome(CC_VERSION, tmp_path, repo) as cc:
        added = cc.cli("mcp", "add", "occd", "--", occd, "mcp")
        assert added.returncode == 0, added.stderr
        listed = cc.cli("mcp", "list")
        assert "occd" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
        a = cc.run("add a subtract function to the calculator")["session_id"]
        out = cc.run("USE_OCCD_TASK which session should do this", "--resume", a,
                     "--allowedTools", "mcp__occd__openclaw_session_list")
        assert "The tool returned (ok" in out["result"], out["result"]
        results = []
        for line in cc.session_file(a).read_text().splitlines():
            o = json.loads(line)
            content = (o.get("message") or {}).get("content") if o.get("type") == "user" else None
            for blk in content if isinstance(content, list) else []:
                if blk.get("type") == "tool_result" and "candidates" in json.dumps(blk):
                    inner = blk["content"]
                    results.append(json.loads(inner if isinstance(inner, str) else inner[0]["text"]))
        (r,) = results
        # Claude Code started `occd mcp` with CLAUDE_CODE_SESSION_ID = a: the caller is marked, never the answer
        assert r["caller"]["claudeSessionId"] == a
        assert r["action"] != "queue" and r["sessionId"] != a, r["reason"]
        assert [x["self"] for x in r["candidates"] if x["id"] == a] == [True]
