"""`occd status` / `occd history` on a ledger built through the public Ledger API (no daemon needed)."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from occd.cli.main import cli
from occd.ledger import Ledger


def run(*args):
    r = CliRunner().invoke(cli, list(args))
    return r


def fill(now: float) -> str:
    sid = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    with Ledger.open() as led:
        for i in range(48):
            led.record_observations([dict(agent="main", session_id=sid, session_key="agent:main:main", era="file",
                                          compaction_count=i // 12, context_tokens=1000 * (i % 12 + 1),
                                          tokens_source="usage", context_window=20_000, size=10_000 + i)],
                                    now=now - (48 - i) * 1800)
        led.record_action("strip", "main", sid, "agent:main:main", trigger="auto", policy="strip_at_context_percent",
                          reason="context 60% of the window >= 60% (observe mode: would strip)", outcome="ok",
                          dry_run=True, now=now - 600)
        led.record_scan(now - 60, 0.05, agents=1, sessions_seen=1, sessions_changed=1, bytes_read=1234)
    return sid


def test_fresh_machine_json_and_human(isolated_env):
    r = run("status", "--json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["ledger"] is None and data["agents"] == [] and data["daemon"]["running"] is False
    r = run("history", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["actions"] == []
    r = run("status", "--rotations")
    assert r.exit_code == 0 and "No rotations" in r.output


def test_status_overview_and_session_sparklines_ascii_on_a_pipe(isolated_env):
    now = time.time()
    sid = fill(now)
    data = json.loads(run("status", "--json").stdout)
    (a,) = data["agents"]
    assert a["id"] == "main" and a["era"] == "file" and a["sessions"] == 1
    assert a["biggest"][0]["contextPercent"] == 60.0 and a["compactionsTotal"] == 3
    assert a["wouldDo"] and "would strip" in a["wouldDo"][0]["reason"]
    assert data["lastScan"]["bytesRead"] == 1234
    r = run("status")
    assert r.exit_code == 0 and "Agent main" in r.output and "60%" in r.output and "observe mode would" in r.output
    assert "\x1b[" not in r.output  # no colour on a pipe
    r = run("status", sid[:8])
    assert r.exit_code == 0 and "context tokens" in r.output and "compactions" in r.output
    line = next(x for x in r.output.splitlines() if "context tokens" in x)
    assert all(ord(ch) < 128 for ch in line)  # ASCII sparkline when not a terminal
    js = json.loads(run("status", sid[:8], "--json").stdout)
    assert js["sessionId"] == sid and js["buckets"] and js["actions"][0]["dryRun"]
    assert run("status", "ffffffff").exit_code == 1


def test_history_filters(isolated_env):
    now = time.time()
    fill(now)
    with Ledger.open() as led:
        led.record_action("restore", "main", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", trigger="manual", outcome="ok",
                          now=now - 10 * 86400)
    assert len(json.loads(run("history", "--json").stdout)["actions"]) == 2
    assert len(json.loads(run("history", "--since", "7d", "--json").stdout)["actions"]) == 1
    assert [a["kind"] for a in json.loads(run("history", "--kind", "restore", "--json").stdout)["actions"]] == ["restore"]
    r = run("history", "--agent", "other", "--json")  # an agent the ledger never saw: an error, not "nothing"
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["code"] == "AGENT_NOT_FOUND"
    assert len(json.loads(run("history", "--session", "0190a1b2", "--json").stdout)["actions"]) == 2


def test_status_says_how_far_each_session_is_from_compaction(isolated_env):
    """OpenClaw compacts when the prompt passes the window minus its reserve (default reserveTokensFloor 20000; on
    a small window at least half the window stays usable): status gives that point and the distance to it."""
    now = time.time()
    with Ledger.open() as led:
        for sid, tokens, window in (("0190a1b2-0000-7000-8000-000000000001", 150_000, 200_000),
                                    ("0190a1b2-0000-7000-8000-000000000002", 190_000, 200_000)):
            led.record_observations([dict(agent="main", session_id=sid, session_key=f"agent:main:{sid[-1]}", era="file",
                                          compaction_count=0, context_tokens=tokens, tokens_source="usage",
                                          context_window=window, size=1000)], now=now - 60)
    data = json.loads(run("status", "--json").stdout)
    got = {b["sessionId"][-1]: (b["compactionPoint"], b["toCompaction"]) for b in data["agents"][0]["biggest"]}
    assert got == {"1": (180_000, 30_000), "2": (180_000, -10_000)}
    out = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "120"}).stdout
    assert "TO COMPACT" in out and "30k" in out and "over by 10k" in out


def test_many_quiet_agents_are_one_line_in_the_text_form(isolated_env):
    """A workstation of many agents (issue 29): the agents with nothing in use and nothing done are one line of
    the text form (2,000 agents' tables took seconds to print and nobody reads them); --json lists every agent;
    with a few agents, each has its block as before."""
    now = time.time()
    with Ledger.open() as led:
        for i in range(20):
            busy = i in (3, 17)
            led.record_observations([dict(agent=f"a{i:02d}", session_id=f"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a{i:02d}",
                                          session_key=f"agent:a{i:02d}:main", era="file", compaction_count=0,
                                          context_tokens=5000, tokens_source="usage", context_window=20_000,
                                          size=1000, last_activity=now - (60 if busy else 10 * 86400))], now=now - 30)
        led.record_scan(now - 30, 0.05, agents=20, sessions_seen=20, sessions_changed=0, bytes_read=0)
    out = run("status").output
    assert "Agent a03 " in out and "Agent a17 " in out and "Agent a04 " not in out
    assert "18 more agents with no session in use and nothing done in 24 h (18 idle sessions" in " ".join(out.split())
    assert len(json.loads(run("status", "--json").stdout)["agents"]) == 20
    out = run("status", "--agent", "a04").output
    assert "Agent a04 " in out and "more agents" not in out
