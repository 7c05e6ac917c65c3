"""The budget trigger through the daemon's jobs (scan → apply) on transcripts shaped like a real tool-heavy agent's:
the gentlest strip that reaches the target, observe mode, a blocked session handled at once."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from occd.config import load_settings
from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger
from occd.policy import budget as b

WINDOW = 60_000          # budget 40,000 (reserve floor 20,000)
OVERHEAD = 9_500
SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def _entries(turns: int, blocked: bool = False) -> list[dict]:
    out = [{"type": "session", "version": 3, "id": SID, "timestamp": "2026-11-25T10:00:00.000Z", "cwd": "/w"}]
    parent = None

    def add(o):
        nonlocal parent
        o.update(id=f"e{len(out):07d}", parentId=parent, timestamp="2026-11-25T10:00:00.000Z")
        parent = o["id"]
        out.append(o)

    for i in range(1, turns + 1):
        add({"type": "message", "message": {"role": "user", "content": f"Q{i}: READ /w/doc{i}.txt"}})
        add({"type": "message", "message": {"role": "assistant", "content": [
            {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"/w/doc{i}.txt"}}],
            "usage": {"input": 1000 * i, "output": 5, "totalTokens": 1000 * i + 5}, "stopReason": "toolUse"}})
        add({"type": "message", "message": {"role": "toolResult", "toolCallId": f"call_{i}", "toolName": "read",
                                            "content": [{"type": "text", "text": ("alpha beta " * 1600)[:16000]}]}})
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}],
                                            "usage": {"input": 1000 * i, "output": 5, "totalTokens": 1000 * i + 5},
                                            "stopReason": "stop"}})
    if blocked:
        add({"type": "compaction", "summary": "S", "firstKeptEntryId": out[1]["id"], "tokensBefore": 48000})
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text":
             "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session."}],
             "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0},
             "stopReason": "stop"}})
    return out


def _state(home: Path, turns: int, *, blocked: bool = False, age_s: float = 3600) -> tuple[Path, Path]:
    state = home / ".openclaw"
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    (state / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"fake": {"models": [{"id": "fake-model", "contextWindow": WINDOW}]}}}}))
    entries = _entries(turns, blocked)
    path = sdir / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    msgs = b.context_messages(entries)
    ctx = b.estimate_context(msgs)
    count = len(msgs) - 4  # OpenClaw's check before the last turn
    status = {"estimatedPromptTokens": math.ceil(sum(ctx.per_message[:count]) * 1.2) + OVERHEAD,
              "messageCount": count, "contextTokenBudget": WINDOW, "promptBudgetBeforeReserve": 40_000}
    old = time.time() - age_s
    os.utime(path, (old, old))
    (sdir / "sessions.json").write_text(json.dumps({"agent:main:main": {
        "sessionId": SID, "sessionFile": str(path), "updatedAt": int(old * 1000), "model": "fake-model",
        "modelProvider": "fake", "contextTokens": WINDOW, "contextBudgetStatus": status}}))
    return state, path


def _ctx(state, led, **policy):
    # keep_recent_turns 0: these three- and four-turn sessions test the target and the emergencies, not what a
    # strip keeps (tests/test_policy_budget.py covers keep_recent_turns)
    s = load_settings({"state_dir": str(state), "policy": {"min_idle_minutes": 5, "keep_recent_turns": 0, **policy}})
    return JobContext(settings=s, ledger=led, state_dir=state)


def _predicted(path: Path) -> int:
    entries = [json.loads(x) for x in path.read_text().splitlines()]
    return math.ceil(b.estimate_context(b.context_messages(entries)).history * 1.2) + OVERHEAD


def test_strips_as_deep_as_leaves_openclaw_a_run_of_room(isolated_env):
    state, path = _state(isolated_env, turns=3)   # ~38.7k predicted, +9.7k next turn: 97% of 40k after it
    with Ledger.open() as led:
        res = run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])["apply"][1]
        assert res["acted"] == 1
        (a,) = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
    keep = a["before"]["keepToolResults"]
    text = path.read_text()
    kept_results = text.count('"role": "toolResult"') + text.count('"role":"toolResult"')
    # keep_recent_results (5) asks for all three; with three OpenClaw would compact during the next run, so the
    # most that leave it that room are kept, and said so
    assert kept_results == keep == 2 == a["before"]["keepTurnsWithTools"]
    assert "only the newest 2 tool results (not 3" in a["reason"]
    growth = a["before"]["growthTokens"]
    assert _predicted(path) + growth < 40_000 == a["before"]["promptBudget"]
    assert _predicted(path) == a["before"]["predictedAfter"]
    assert all(f"Q{i}:" in text for i in (1, 2, 3))         # the user's questions stay
    entries = _entries(3)
    ctx = b.estimate_context(b.context_messages(entries))
    assert math.ceil(ctx.after_keep_results(keep + 1) * 1.2) + OVERHEAD + growth >= 40_000


def test_under_the_threshold_nothing_and_observe_mode_only_records(isolated_env):
    state, path = _state(isolated_env, turns=1)
    before = path.read_bytes()
    with Ledger.open() as led:
        run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])
        assert led.history(kind="strip") == []
    state2, path2 = _state(isolated_env / "o", turns=3)
    with Ledger.open() as led:
        run_cycle(_ctx(state2, led, mode="observe"), ["scan", "apply"])
        (a,) = led.history(kind="strip")
        assert a["dry_run"] and "would strip" in a["reason"]
    assert path.read_bytes() == before


def test_blocked_session_is_acted_on_without_the_idle_wait(isolated_env):
    state, path = _state(isolated_env, turns=4, blocked=True, age_s=200)  # idle 3 min < min_idle_minutes 5
    with Ledger.open() as led:
        run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])
        (a,) = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
        assert a["before"]["emergency"] == "BLOCKED" and a["policy"] == "emergency:blocked"
    assert _predicted(path) < 40_000


def _with_open_call(path: Path, age_s: float, *, spiral: bool = True) -> dict:
    """A 4th turn whose run crashed after the model called a tool: the call has no result, no lock is held.
    spiral: OpenClaw compacted after turn 3 to retry an overflow (a compaction entry, an `overflow-retry`
    checkpoint in the index): an emergency."""
    lines = path.read_text().splitlines()
    parent = json.loads(lines[-1])["id"]
    extra = []
    if spiral:
        extra.append({"type": "compaction", "id": "comp1", "parentId": parent, "timestamp": "2026-11-25T10:00:00.000Z",
                      "summary": "S", "firstKeptEntryId": "e0000005", "tokensBefore": 48000})
        parent = "comp1"
        idx_path = path.parent / "sessions.json"
        idx = json.loads(idx_path.read_text())
        idx["agent:main:main"].update(compactionCount=1, compactionCheckpoints=[
            {"reason": "overflow-retry", "createdAt": int((time.time() - 15 * 60) * 1000)}])
        idx_path.write_text(json.dumps(idx))
    user = {"type": "message", "id": "open-u", "parentId": parent, "timestamp": "2026-11-25T10:00:00.000Z",
            "message": {"role": "user", "content": "Q4: READ /w/doc4.txt"}}
    call = {"type": "message", "id": "open-c", "parentId": "open-u", "timestamp": "2026-11-25T10:00:00.000Z",
            "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "call_4", "name": "read",
                                                          "arguments": {"path": "/w/doc4.txt"}}],
                        "usage": {"input": 3000, "output": 5, "totalTokens": 3005}, "stopReason": "toolUse"}}
    path.write_text("\n".join(lines + [json.dumps(e) for e in extra] + [json.dumps(user), json.dumps(call)]) + "\n")
    old = time.time() - age_s
    os.utime(path, (old, old))
    return call


def test_a_crashed_run_in_an_emergency_is_cleaned_and_its_open_turn_left_as_it_is(isolated_env):
    """Issue 10: the daemon leaves a crashed run alone (OpenClaw patches it on the next turn) unless the session is
    in trouble; then it cleans it as `occd edit --crashed-run` does."""
    state, path = _state(isolated_env, turns=3)
    call = _with_open_call(path, age_s=20 * 60)  # no change for 20 min, no lock: the run crashed
    with Ledger.open() as led:
        res = run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])["apply"][1]
        assert res["acted"] == 1, res
        (a,) = led.history(kind="strip")
        assert a["outcome"] == "ok" and a["before"]["emergency"] == "SPIRAL"
    entries = [json.loads(x) for x in path.read_text().splitlines()]
    assert entries[-1] == call and entries[-2]["id"] == "open-u"  # the unanswered turn exactly as it was
    text = path.read_text()
    assert text.count('"toolResult"') < 3  # older tool results were stripped
    assert all(f"Q{i}:" in text for i in (1, 2, 3, 4))


def test_a_crashed_run_without_an_emergency_is_left_alone(isolated_env):
    state, path = _state(isolated_env, turns=3)
    _with_open_call(path, age_s=20 * 60, spiral=False)  # over the budget trigger, but not in trouble
    before = path.read_bytes()
    with Ledger.open() as led:
        res = run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])["apply"][1]
        assert res["acted"] == 0 and [x["outcome"] for x in led.history(kind="strip")] == ["deferred"]
    assert path.read_bytes() == before


def test_a_run_that_may_still_be_going_is_not_touched(isolated_env):
    state, path = _state(isolated_env, turns=3)
    _with_open_call(path, age_s=6 * 60)  # in trouble, idle for the policy (5 min), not long enough to be crashed
    before = path.read_bytes()
    with Ledger.open() as led:
        run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])
        assert [x["outcome"] for x in led.history(kind="strip")] == ["deferred"]
    assert path.read_bytes() == before
def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def _openclaw_turn(path: Path, i: int, at: float, *, compact: bool) -> None:
    """OpenClaw's next turn, appended: a compaction first (it compacted although occd had stripped), then a run."""
    lines = path.read_text().splitlines()
    parent = json.loads(lines[-1])["id"]
    new = []

    def add(o):
        nonlocal parent
        o.update(id=f"t{i}x{len(new)}", parentId=parent, timestamp=_iso(at))
        parent = o["id"]
        new.append(o)

    if compact:
        add({"type": "compaction", "summary": "S", "firstKeptEntryId": json.loads(lines[-1])["id"],
             "tokensBefore": 41000})
    add({"type": "message", "message": {"role": "user", "content": f"Q{i}: READ /w/doc{i}.txt"}})
    add({"type": "message", "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"/w/doc{i}.txt"}}],
        "usage": {"input": 9000, "output": 5, "totalTokens": 9005}, "stopReason": "toolUse"}})
    add({"type": "message", "message": {"role": "toolResult", "toolCallId": f"call_{i}", "toolName": "read",
                                        "content": [{"type": "text", "text": ("alpha beta " * 1600)[:16000]}]}})
    add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}],
                                        "usage": {"input": 19000, "output": 5, "totalTokens": 19005},
                                        "stopReason": "stop"}})
    path.write_text("\n".join(lines + [json.dumps(e) for e in new]) + "\n")
    os.utime(path, (at, at))


def test_a_window_too_small_for_the_agent_gets_the_strongest_strip_once_then_no_more(isolated_env):
    """Issue 30.5: a 60k window whose fresh session would be over the target (20k of a 40k budget); OpenClaw
    compacts although occd stripped. The strongest strip once, then no strip on every wake, and an open problem
    (status, doctor) with the numbers."""
    state, path = _state(isolated_env, turns=3)
    clock = [time.time()]
    with Ledger.open() as led:
        ctx = _ctx(state, led, mode="act")
        ctx.clock = lambda: clock[0]

        def cycle():
            run_cycle(ctx, ["scan", "apply"])
            return [a for a in led.history(kind="strip") if a["outcome"] == "ok"]

        assert len(cycle()) == 1                          # an ordinary strip
        assert led.open_problems(source="window") == []   # not verified yet: no compaction after it
        counts = []
        for i, compact in ((4, True), (5, True), (6, True), (7, False), (8, True), (9, True)):
            at = clock[0] + 60
            _openclaw_turn(path, i, at, compact=compact)
            clock[0] = at + 3600
            strips = cycle()
            counts.append(len(strips))
            if len(strips) == 2 and counts[-2:] == [1, 2]:  # the strongest strip, once verified and due
                assert strips[0]["before"]["windowTooSmall"]["freshSessionTokens"] > 20_000
                assert strips[0]["before"]["keepToolResults"] == 0
                assert '"toolResult"' not in path.read_text()  # every old tool call gone
        assert led.open_problems(source="window")          # verified after turn 4's compaction
        assert counts[0] == 1 and counts[-1] == 2 and counts.index(2) <= 1  # then no strip on any later wake
        (p,) = led.open_problems(source="window")
        assert p["code"] == "WINDOW_TOO_SMALL" and p["severity"] == "fail"
        assert "too small for this agent" in p["message"] and "no longer strips this session" in p["message"]
        assert f"{p['details']['overheadTokens']} tokens" in p["message"] and "40000-token budget" in p["message"]
    from occd.report.status import status

    st = status(load_settings({"state_dir": str(state)}))
    assert [p["code"] for p in st["problems"]] == ["WINDOW_TOO_SMALL"]   # status and doctor list open problems
