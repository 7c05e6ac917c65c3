"""How deep a budget strip goes (issue 30.1): the newest `keep_recent_results` tool results whole (results, not
turns: a run of 4 calls makes 4), everything older stripped, so the next strip (a prompt-cache break) comes as
late as it can; fewer only when those would leave OpenClaw no room for the next run.

An agent whose turns are runs of several tool calls is simulated on disk, with OpenClaw's check before each model
request of a run (its estimate against its budget: a compaction when it is reached), and the daemon's cycle
(scan → apply, act mode) between runs."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from occd.config import load_settings
from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger
from occd.policy import budget as b
from simrun import BUDGET, SID, RunsAgent  # window 60,000, budget 40,000, prompt overhead 9,500


def _loop(home: Path, *, runs: int, calls: int, result_chars: int, midrun: bool = True, gap_s: float = 0.0,
          **policy) -> dict:
    agent = RunsAgent(home, result_chars, midrun=midrun, gap_s=gap_s)
    # cache_ttl_minutes 0: gentle strips too act between these back-to-back runs, not only urgent ones
    whole_turns = policy.pop("whole_turns", False)
    settings = load_settings({"state_dir": str(agent.state), "idle_seconds": 0,
                              "policy": {"mode": "act", "cache_ttl_minutes": 0, **policy}})
    if whole_turns:  # the rule before issue 30.1: strips keep whole turns (keep_recent_turns)
        settings = settings.model_copy(update={"policy": settings.policy.model_copy(
            update={"keep_recent_results": None})})
    strips, kept_after = 0, []
    with Ledger.open(home / "ledger.db") as led:  # each arm its own (the same session id in each)
        for _ in range(runs):
            agent.run(calls)
            out = run_cycle(JobContext(settings=settings, ledger=led, state_dir=agent.state), ["scan", "apply"])
            if os.environ.get("DBG"): print(agent.turns, out)
            done = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
            if len(done) > strips:
                strips = len(done)
                kept_after.append((len(agent.whole_results()), done[0]["before"], agent.estimate()[0]))
    text = agent.path.read_text()
    return {"strips": strips, "over": agent.over(), "kept": kept_after,
            "checks": agent.checks, "questions": sum(1 for i in range(1, runs + 1) if f'"Q{i}: ' in text),
            "newest": agent.whole_results()[-5:], "calls": calls, "runs": runs}


@pytest.mark.parametrize("calls", [1, 4])
def test_runs_of_calls_keep_the_newest_five_results_and_never_reach_the_budget(isolated_env, calls):
    r = _loop(isolated_env, runs=24, calls=calls, result_chars=3_000)
    assert r["over"] == []                               # OpenClaw never compacts, mid-run checks included
    assert r["questions"] == 24
    assert r["strips"] >= 2
    for kept, before, after in r["kept"]:
        assert kept == before["keepToolResults"] == 5    # the newest 5 results whole, every older one stripped
        assert after == before["predictedAfter"]          # the estimate of what the strip left is what it planned
    # the newest results at the end are the last run's and the ones before it, whole
    assert r["newest"][-1] == f"c24_{calls - 1}"


@pytest.mark.parametrize("calls,chars", [(1, 5_000), (4, 3_000)])
def test_with_openclaws_default_checks_and_a_user_who_leaves_time_strips_come_as_late_as_they_can(isolated_env,
                                                                                                 calls, chars):
    """OpenClaw checks before each prompt only (compaction.midTurnPrecheck off, its default). A user who leaves
    30 s after each run (occd acts within its settle time): occd strips only when the next prompt's check would
    compact (no turn to spare), so strips, each a prompt-cache break, are rarer than for a user whose follow-ups
    come at once (a turn to spare) and than with OpenClaw's mid-run checks on; no check OpenClaw makes reaches
    its budget in any of them, and every strip keeps the newest 5 results whole."""
    late = _loop(isolated_env / "late", runs=24, calls=calls, result_chars=chars, midrun=False, gap_s=30)
    queued = _loop(isolated_env / "queued", runs=24, calls=calls, result_chars=chars, midrun=False, gap_s=0)
    midrun = _loop(isolated_env / "midrun", runs=24, calls=calls, result_chars=chars, midrun=True, gap_s=30)
    for r in (late, queued, midrun):
        assert r["over"] == [] and r["questions"] == 24, r
        assert r["kept"] and all(kept == before["keepToolResults"] == 5 for kept, before, _ in r["kept"])
    assert late["strips"] < queued["strips"] and late["strips"] < midrun["strips"], (late, queued, midrun)
    assert max(late["checks"]) > max(queued["checks"])   # the room OpenClaw's own checks leave is used
    assert not any("turn to spare" in before.get("urgency", "") for _, before, _ in late["kept"][1:])


def test_deep_strips_come_less_often_and_send_less_than_whole_turns(isolated_env):
    """Runs of 4 calls: keeping whole turns (the old rule, keep_recent_results unset) keeps fewer whole results at
    a time and strips after nearly every run; by results the strips are rarer and every request smaller."""
    deep = _loop(isolated_env / "deep", runs=24, calls=4, result_chars=3_000)
    turns = _loop(isolated_env / "turns", runs=24, calls=4, result_chars=3_000, whole_turns=True)
    assert deep["over"] == [] and turns["over"] == []
    assert deep["strips"] < turns["strips"]
    assert sum(deep["checks"]) < sum(turns["checks"])


def test_a_run_too_large_for_five_keeps_the_most_that_leave_room(isolated_env):
    # each result ~4.3k in OpenClaw's estimate: 5 of them + a run of 4 would pass the 40k budget
    r = _loop(isolated_env, runs=10, calls=4, result_chars=7_000)
    assert r["over"] == []
    assert r["strips"] >= 3
    for kept, before, after in r["kept"]:
        assert kept == before["keepToolResults"] < 5
        assert after == before["predictedAfter"]
        assert before["predictedAfter"] + before["growthTokens"] < BUDGET
        assert math.isfinite(before["removedTokens"]) and before["removedTokens"] > 0


def test_the_strip_cuts_a_run_between_its_calls_and_openclaw_loads_it(isolated_env, oracle):
    r = _loop(isolated_env, runs=6, calls=4, result_chars=3_000)
    assert r["strips"] >= 1
    path = isolated_env / ".openclaw" / "agents" / "main" / "sessions" / f"{SID}.jsonl"
    entries = [json.loads(x) for x in path.read_text().splitlines()]
    calls = [b["id"] for e in entries if e.get("type") == "message" and e["message"]["role"] == "assistant"
             for b in e["message"]["content"] if b.get("type") == "toolCall"]
    results = [e["message"]["toolCallId"] for e in entries if e.get("type") == "message"
               and e["message"]["role"] == "toolResult"]
    assert calls == results                          # each kept call with its result, nothing orphaned
    assert 5 <= len(results) < 12 and results[0].endswith("_3")   # a run cut between its calls: its last kept
    chk = oracle.check(path)
    assert chk["ok"] and chk["orphanResults"] == 0 and chk["toolCalls"] == len(results), chk


def test_calls_sent_together_stay_together(tmp_path):
    """A message with several calls at once (parallel tool calls) is kept or stripped whole."""
    from occd.cleaner.plan import plan_strip
    from occd.transcript import scan

    lines = [{"type": "session", "version": 3, "id": SID, "timestamp": "2026-11-25T10:00:00.000Z", "cwd": "/w"}]
    parent = None
    for i in range(1, 4):
        for m in ({"role": "user", "content": f"Q{i}"},
                  {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{i}_{k}", "name": "read",
                                                     "arguments": {}} for k in range(3)]},
                  *({"role": "toolResult", "toolCallId": f"c{i}_{k}", "toolName": "read",
                     "content": [{"type": "text", "text": "x" * 100}]} for k in range(3)),
                  {"role": "assistant", "content": [{"type": "text", "text": f"A{i}"}]}):
            e = {"type": "message", "id": f"m{len(lines):03d}", "parentId": parent,
                 "timestamp": "2026-11-25T10:00:00.000Z", "message": m}
            parent = e["id"]
            lines.append(e)
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    plan = plan_strip(scan(f), 0, 0, keep_results=4)   # 4 of 3 + 3 + 3: the newest message of 3 and the one before
    assert plan.tool_calls_preserved == 6 and plan.tool_calls_removed == 3
    ctx = b.estimate_context(b.context_messages(lines))   # the estimate counts the same way
    assert ctx.tool_calls == 9
    assert ctx.after_keep_results(3) < ctx.after_keep_results(4) == ctx.after_keep_results(6)
    assert ctx.after_keep_results(6) < ctx.after_keep_results(7) == ctx.history


def test_a_run_larger_than_the_room_a_strip_left_is_said_in_status(isolated_env):
    """OpenClaw compacted during the first run after occd's strip although the strip left room for a run like the
    recent ones: an open warning RUN_OUTGREW_ROOM with the room and the run (occd acts between runs, and so does the
    lean view: OpenClaw asks it once per run), shown by status; the next strip verified without a compaction
    closes it."""
    agent = RunsAgent(isolated_env, 3_000)
    settings = load_settings({"state_dir": str(agent.state), "idle_seconds": 0,
                              "policy": {"mode": "act", "cache_ttl_minutes": 0}})
    jobs = ["scan", "apply", "verify"]
    with Ledger.open() as led:
        ctx = JobContext(settings=settings, ledger=led, state_dir=agent.state)
        while not [x for x in led.history(kind="strip") if x["outcome"] == "ok"]:
            agent.run(4)
            run_cycle(ctx, jobs)
        (strip,) = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
        assert strip["before"]["promptBudget"] - strip["before"]["predictedAfter"] > strip["before"]["growthTokens"]
        # the next run is far larger: OpenClaw compacts in the middle of it
        agent.run(2)
        entries = agent._entries()
        comp = {"type": "compaction", "id": "cmp00001", "parentId": entries[-1]["id"],
                "timestamp": "2026-11-25T10:00:00.000Z", "summary": "S", "firstKeptEntryId": entries[-1]["id"],
                "tokensBefore": 41_000}
        with open(agent.path, "a") as fh:
            fh.write(json.dumps(comp) + "\n")
        agent.run(1)
        idx = agent.sdir / "sessions.json"
        data = json.loads(idx.read_text())
        data["agent:main:main"]["compactionCount"] = 1
        data["agent:main:main"]["compactionCheckpoints"] = [{"reason": "threshold", "createdAt": int(time.time() * 1000),
                                                            "tokensBefore": 41_000, "tokensAfter": 12_000}]
        idx.write_text(json.dumps(data))
        run_cycle(ctx, jobs)
        (p,) = [x for x in led.open_problems() if x["code"] == "RUN_OUTGREW_ROOM"]
        assert p["severity"] == "warn" and "acts between runs" in p["message"] and "contextWindow" in p["hint"]
        assert p["details"]["roomTokens"] == strip["before"]["promptBudget"] - strip["before"]["predictedAfter"]
        # runs like the recent ones again: the next strip, verified without a compaction, closes it
        for _ in range(12):
            agent.run(4)
            run_cycle(ctx, jobs)
            if [v for v in led.history(kind="verify-strip") if v["outcome"] == "ok"]:
                break
        assert [x for x in led.open_problems() if x["code"] == "RUN_OUTGREW_ROOM"] == []
        led.sync_problems(("strip",), [p], subjects=[p["subject"]])  # (open again, for the views below)
    from occd.report.health import recorded_problems
    from occd.report.status import session_status

    # `status --check` and doctor name it; `occd status SESSION` shows it with its hint
    assert "RUN_OUTGREW_ROOM" in [x["code"] for x in recorded_problems()]
    one = session_status(load_settings({"state_dir": str(agent.state)}), SID)
    assert [x["code"] for x in one["problems"] if x["resolvedAt"] is None] == ["RUN_OUTGREW_ROOM"]


# a coding session's rhythm: mostly short runs, and a long investigation that comes back every few turns
CODING_RUNS = [3, 2, 16, 3, 1, 4, 2, 3, 15, 2, 3, 0, 4, 2, 3, 16, 1, 3, 2, 4, 3, 14, 2, 3, 1, 4, 2, 3, 16, 2]


def _coding_loop(home: Path, large: bool) -> dict:
    """CODING_RUNS, one daemon process (what it remembers of the turns lasts between cycles, as in `occd run`)."""
    from unittest import mock

    from occd.jobs import budget as jb

    agent = RunsAgent(home, 1_000)
    settings = load_settings({"state_dir": str(agent.state), "idle_seconds": 0, "policy": {"mode": "act"}})
    over_turns = []
    real = jb._seen_growth
    seen = real if large else (lambda *a: (real(*a)[0], 0))   # without the large-run rule: no large run known
    with mock.patch.object(jb, "_seen_growth", seen), Ledger.open() as led:
        ctx = JobContext(settings=settings, ledger=led, state_dir=agent.state)
        for n, calls in enumerate(CODING_RUNS, 1):
            if agent.run(calls):
                over_turns.append(n)
            run_cycle(ctx, ["scan", "apply"])
        strips = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
    text = agent.path.read_text()
    return {"over": over_turns, "strips": strips, "newest": agent.whole_results()[-5:],
            "questions": sum(1 for i in range(1, len(CODING_RUNS) + 1) if f'"Q{i}: ' in text)}


def test_room_for_the_sessions_large_runs(isolated_env):
    """Runs of 0 to 16 calls: occd strips when a run like the session's large ones (the largest of its last 20
    turns) would reach OpenClaw's budget, not only two like the last three, so the large run that comes back
    fits; without the rule OpenClaw's estimate passes its budget during such runs (it would compact)."""
    r = _coding_loop(isolated_env / "large", large=True)
    assert r["over"] == [], r["over"]
    assert r["questions"] == len(CODING_RUNS)
    assert r["newest"][-1] == f"c{len(CODING_RUNS)}_{CODING_RUNS[-1] - 1}"
    assert any(x["before"].get("urgency") == "large-run" and x["before"].get("largeRunTokens") for x in r["strips"])
    for x in r["strips"]:
        assert x["before"]["keepToolResults"] == 5            # as deep as the rules allow, every time
    old = _coding_loop(isolated_env / "recent", large=False)
    assert old["over"], "without the large-run rule a large run passes the budget (the test is not vacuous)"


def test_openclaws_mid_run_check_and_the_gap_occd_needs_come_from_the_settings(isolated_env):
    from occd.jobs.budget import gap_needed
    from occd.jobs.scan import midrun_check
    from occd.policy.estimate import entry_time, slim_entry

    on = {"agents": {"defaults": {"compaction": {"midTurnPrecheck": {"enabled": True}}}}}
    assert midrun_check(on) and not midrun_check(None) and not midrun_check({}) and not midrun_check(
        {"agents": {"defaults": {"compaction": {"midTurnPrecheck": {"enabled": "true"}}}}})
    assert gap_needed(load_settings({})) == 12.0                                  # settle 2 s + 10
    assert gap_needed(load_settings({"daemon": {"settle_seconds": 5}})) == 15.0
    assert gap_needed(load_settings({"daemon": {"watch": False}})) == 20.0         # polled every 10 s
    # a line's time: its own ISO timestamp, else its message's (epoch ms)
    line = {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-11-25T10:00:30.500Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1}}
    assert slim_entry(line)["message"]["_ts"] == entry_time(line) == 1795600830.5
    assert entry_time({"message": {"timestamp": 1795600830500}}) == 1795600830.5
    assert entry_time({"timestamp": "not a time"}) is None and entry_time({}) is None
