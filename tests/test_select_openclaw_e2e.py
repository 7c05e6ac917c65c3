"""`occd sessions` / `select` on a real OpenClaw 2026.7.1 state (file era, offline, scripted model): the facts
occd reads, the caller left out by its session key, and an unrelated task starting fresh."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from e2e_harness import OpenClawHome, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_real_openclaw_session_facts_caller_and_advice(tmp_path):
    require_e2e()
    with OpenClawHome("2026.7.1", tmp_path) as oc:
        note = oc.workspace / "invoice-notes.txt"
        note.write_text("the invoice export needs VAT totals\n")
        oc.turn(f"READ {note} and plan the invoice export")
        oc.turn("add VAT totals to the invoice export")
        ws = str(oc.workspace)  # where the agent ran (not a git repository: select filters by no repository)
        r = oc.occd("sessions", "--json")
        assert r.returncode == 0, r.stderr
        (s,) = json.loads(r.stdout)["sessions"]
        # 2 prompts and 3 replies (the tool call, the text after its result, the second answer): the tool result
        # is shown with its call, not as a message
        roles = [json.loads(ln)["message"]["role"] for ln in open(s["path"])
                 if json.loads(ln).get("type") == "message"]
        assert roles.count("toolResult") >= 1
        assert s["messageCount"] == roles.count("user") + roles.count("assistant") == 5
        assert s["running"] is False and s["key"] == "agent:main:main" and s["agent"] == "main"
        assert s["latestUserTask"].endswith("add VAT totals to the invoice export")

        def select(task, **env):
            p = subprocess.run([sys.executable, "-m", "occd", "select", "--task", task, "--no-llm", "--json"],
                               capture_output=True, text=True, timeout=180, env={**oc.env, **env}, cwd=ws)
            assert p.returncode == 0, p.stderr
            return json.loads(p.stdout)

        out = select("VAT totals in the invoice export")
        assert (out["action"], out["sessionId"]) == ("resume", s["id"]), out["reason"]
        assert select("translate the onboarding guide into Spanish")["action"] == "fresh"
        out = select("VAT totals in the invoice export", OPENCLAW_TOOLS_MCP_AGENT_SESSION_KEY="agent:main:main")
        assert out["action"] == "fresh" and "calling session itself" in out["reason"]
