"""Spirals and blocked sessions in the database era (OpenClaw 2026.8.1+): found from the read-only database,
rescued through OpenClaw's supported calls (reset + seed through the gateway; the lean view where it covers the
session), never by rewriting the database and never by a compaction. And the routine trigger there: OpenClaw's
own budget, not the share of the window."""

from __future__ import annotations

import time

import orjson
import pytest

from occd.config import load_settings
from occd.jobs import JobContext
from occd.ledger import Ledger
from occd.openclaw.dbstore import loop_signals
from occd.policy import breaker as brk
from occd.policy.budget import Prediction, StripTarget, prompt_budget
from occd.policy.emergency import BLOCKED, SPIRAL, detect, observations_from_signals
from occd.policy.strip import decide_budget_strip
from occd.policy.types import SessionState
from statefactory import DbState, message

KEY = "agent:main:main"
NOTICE = "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session."
ZERO = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
USED = {"input": 900, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 905}


def _events(plan: list[str], tag: str = "", text_len: int = 20) -> list[dict]:
    """A transcript from a plan: "t" a user turn answered by the model, "c" a compaction entry, "b" a user turn
    OpenClaw answered with its overflow notice (all-zero usage), "e" one the provider refused for its size (as
    2026.9.6 stores it), "r" a reset marker."""
    out, parent, n = [], None, 0
    for step in plan:
        n += 1
        i = f"{tag}{n}"
        if step in ("t", "b"):
            out.append(message("user", f"question {i} " + "x" * text_len, id=f"u{i}", parent=parent))
            reply = NOTICE if step == "b" else f"answer {i} " + "y" * text_len
            out.append(message("assistant", reply, id=f"a{i}", parent=f"u{i}", usage=ZERO if step == "b" else USED))
            parent = f"a{i}"
        elif step == "e":  # how 2026.9.6 stores a turn the provider refused for its size
            out.append(message("user", f"question {i} " + "x" * text_len, id=f"u{i}", parent=parent))
            a = message("assistant", "", id=f"a{i}", parent=f"u{i}", usage=ZERO)
            a["message"].update(content=[], stopReason="error", errorMessage=(
                "400 This model's maximum context length is 30000 tokens. However, your messages resulted in "
                "43083 tokens. Please reduce the length of the messages."))
            out.append(a)
            parent = f"a{i}"
        elif step == "c":
            out.append({"type": "compaction", "id": f"c{i}", "parentId": parent, "summary": "s",
                        "firstKeptEntryId": parent, "tokensBefore": 9, "timestamp": "2026-11-25T10:00:00.000Z"})
            parent = f"c{i}"
        elif step == "r":
            out.append({"type": "reset", "id": f"r{i}", "parentId": parent, "reason": "reset",
                        "timestamp": "2026-11-25T10:00:00.000Z"})
            parent = f"r{i}"
    return out


def _lines(events: list[dict]) -> list[bytes]:
    head = {"type": "session", "version": 4, "id": "s", "timestamp": "2026-11-25T09:00:00.000Z", "cwd": "/w"}
    return [orjson.dumps(e) + b"\n" for e in [head, *events]]


def _detect(plan: list[str], recent_turns: int = 10):
    return detect(observations_from_signals(loop_signals(_lines(_events(plan)), recent_turns)), time.time())


# ---- detection from the database's signals (pure) ------------------------------------------------------------

def test_compactions_on_consecutive_turns_are_a_spiral():
    em = _detect(["t", "t", "t", "c", "t", "c", "t"])
    assert em is not None and em.kind == SPIRAL
    # the turns named are "after how many user turns" each compaction came: 3 and 4
    assert em.details["compactionTurns"] == [3, 4]
    # the same when the signals only cover the last three turns (the newest three: 4th, 5th and the one before)
    assert _detect(["t", "t", "t", "c", "t", "c", "t"], recent_turns=3).details["compactionTurns"] == [3, 4]


def test_overflow_notice_as_the_last_reply_is_blocked():
    em = _detect(["t", "t", "c", "b"])
    assert em is not None and em.kind == BLOCKED
    # 2026.9.6: the refused turn is stored as an error message with the provider's words and no usage
    em = _detect(["t", "e"])
    assert em is not None and em.kind == BLOCKED
    assert _detect(["t", "e", "t"]) is None  # a turn answered since


def test_neither_one_compaction_or_a_notice_answered_since_or_before_a_reset():
    assert _detect(["t", "t", "t"]) is None
    assert _detect(["t", "t", "c", "t", "t", "t", "t"]) is None  # one compaction, long ago
    assert _detect(["t", "b", "t"]) is None  # the model answered the turn after the notice
    assert _detect(["t", "c", "t", "c", "b", "r", "t"]) is None  # all of it before the reset: history


# ---- the decision (pure) -------------------------------------------------------------------------------------

def _decide(*, emergency=None, predicted=30_000, mode="act", running=False, covered_strip=True):
    policy = load_settings({"policy": {"mode": mode, "min_idle_minutes": 5}}).policy_for("main")
    now = 1_800_000_000.0
    s = SessionState(agent="main", session_key=KEY, session_id="sid", context_tokens=None, context_window=128_000,
                     compaction_count=2, last_activity=now - 3600, running=running)
    p = Prediction(predicted, 108_000, 4_000, 12_000, "session")
    target = StripTarget(2, 50_000, 54_000, 20_000)  # a strip would reach the target
    em = None if emergency is None else _detect(["t", "t", "t", "c", "t", "c", "t"] if emergency == SPIRAL
                                                else ["t", "c", "b"])
    return decide_budget_strip(s, policy, now=now, prediction=p, target=target, emergency=em,
                               strip_emergencies=covered_strip)


def test_database_era_emergencies_are_rotations_never_strips():
    for kind in (SPIRAL, BLOCKED):
        d = _decide(emergency=kind, covered_strip=False)
        assert d is not None and d.action == "rotate" and d.act and d.details["emergency"] == kind
        assert d.policy == f"emergency:{kind.lower()}"
    # the file era strips the same spiral (it can rewrite the transcript)
    assert _decide(emergency=SPIRAL, covered_strip=True).action == "strip"


def test_no_emergency_and_far_from_the_budget_is_nothing():
    assert _decide(covered_strip=False) is None


def test_observe_mode_says_would_and_a_running_session_waits():
    d = _decide(emergency=BLOCKED, covered_strip=False, mode="observe")
    assert d.would_do and not d.act and "would rotate" in d.reason
    d = _decide(emergency=BLOCKED, covered_strip=False, running=True)
    assert d.deferred and not d.act


def test_reserve_capped_at_a_quarter_of_the_window_from_2026_9_5():
    # OpenClaw 9.6 recorded promptBudgetBeforeReserve 30,000 for a 40,000 window (reserve 20,000 capped to 10,000)
    assert prompt_budget(40_000, reserve_cap=0.25) == 30_000
    assert prompt_budget(128_000, reserve_cap=0.25) == 108_000  # the floor (20,000) is under the cap
    assert prompt_budget(40_000) == 20_000  # 2026.7.x–9.4: no cap


# ---- through the daemon's apply job on a database-era state (no gateway running) -----------------------------

def _state(tmp_path, plan, *, status_pct: float | None = None, usage_pct: float | None = None, age_s=3600):
    db = DbState(tmp_path / ".openclaw")
    (db.state_dir / "openclaw.json").write_text("{}")
    events = _events(plan, text_len=400)
    entry = {"contextTokens": 128_000, "compactionCount": plan.count("c")}
    if status_pct is not None:  # OpenClaw's last pre-prompt check (as 9.6 records it in entry_json)
        entry["contextBudgetStatus"] = {"estimatedPromptTokens": int(108_000 * status_pct / 100),
                                        "messageCount": 0, "contextTokenBudget": 128_000,
                                        "promptBudgetBeforeReserve": 108_000}
    if usage_pct is not None:
        entry["totalTokens"] = int(128_000 * usage_pct / 100)
        entry["totalTokensFresh"] = True
    db.add_session(KEY, events=events, entry=entry, updated_at=int((time.time() - age_s) * 1000))
    return db.state_dir


def _run(state, led, mode="act", covered=False, lean_at=None, **policy):
    from occd.jobs import apply, scan

    s = load_settings({"state_dir": str(state), "policy": {"mode": mode, "min_idle_minutes": 5, **policy}})
    ctx = JobContext(settings=s, ledger=led, state_dir=state)
    scan.run(ctx)
    if covered:
        ctx.cache["lean.covered"] = {KEY}
        if lean_at is not None:
            obs = ctx.last_scan.sessions[0]
            led.record_action("lean", "main", obs.session_id, KEY, trigger="auto", policy="p", reason="lean on",
                              outcome="ok", now=lean_at)
    counts = apply.run(ctx)
    return counts, led.history(limit=50)


def _kinds(rows):
    return [(a["kind"], a["outcome"], bool(a["dry_run"]), (a.get("before") or {}).get("emergency")) for a in rows]


def test_blocked_db_session_goes_to_rotation_not_compaction(isolated_env, tmp_path):
    state = _state(tmp_path, ["t", "t", "c", "b"], status_pct=60)
    led = Ledger.open()
    counts, rows = _run(state, led)
    # the rotation was tried at once (no idle wait for an emergency) through OpenClaw, which is not installed
    # here: it failed (counted, for the breaker); never a compaction
    assert counts["rotated"] == 0 and counts["failed"] == 1 and counts["considered"] == 1, counts
    assert not any(k == "compact" for k, *_ in _kinds(rows))


def test_observe_mode_records_the_would_rotate(isolated_env, tmp_path):
    state = _state(tmp_path, ["t", "t", "t", "c", "t", "c", "t"], status_pct=60)
    led = Ledger.open()
    counts, rows = _run(state, led, mode="observe")
    assert ("rotate", "skipped", True, SPIRAL) in _kinds(rows) or any(
        k == "rotate" and dry and em == SPIRAL for k, _, dry, em in _kinds(rows)), _kinds(rows)
    assert not any(k == "compact" for k, *_ in _kinds(rows))


def test_open_breaker_blocks_the_rotation(isolated_env, tmp_path):
    state = _state(tmp_path, ["t", "t", "c", "b"], status_pct=60)
    led = Ledger.open()
    now = time.time()
    led.set_breaker(brk.BreakerState(agent="main", kind="rotate", state=brk.OPEN, opened_at=now - 60,
                                     reason="test: tripped", updated_at=now - 60), now=now - 60)
    counts, rows = _run(state, led)
    rot = [a for a in rows if a["kind"] == "rotate"]
    assert rot and all(a["outcome"] == "skipped" and not a["dry_run"] for a in rot), _kinds(rows)
    assert "breaker" in rot[0]["reason"]
    assert not any(k == "compact" for k, *_ in _kinds(rows))


def test_routine_trigger_is_openclaws_budget_not_the_share_of_the_window(isolated_env, tmp_path):
    # 70% of the window by usage (the old trigger: 60%) but OpenClaw's own check far under its budget: nothing
    state = _state(tmp_path, ["t", "t"], status_pct=20, usage_pct=70)
    led = Ledger.open()
    counts, rows = _run(state, led)
    assert rows == [] and counts["considered"] == 0


@pytest.mark.slow
def test_covered_by_the_lean_view(isolated_env, tmp_path):
    # BLOCKED: rotated even though the lean view covers it (OpenClaw refuses the next turn whatever it hides)
    state = _state(tmp_path / "a", ["t", "t", "c", "b"], status_pct=60)
    led = Ledger.open(tmp_path / "a.db")
    counts, rows = _run(state, led, covered=True)
    assert counts["failed"] == 1  # the rotation was tried (a compaction would be a row)
    assert not any(k == "compact" for k, *_ in _kinds(rows))
    # SPIRAL with the lean view turned on after OpenClaw's last compaction: the lean view is the tool, nothing else
    compacted = time.mktime(time.strptime("2026-11-25T10:00:00", "%Y-%m-%dT%H:%M:%S")) - time.timezone
    state = _state(tmp_path / "b", ["t", "t", "t", "c", "t", "c", "t"], status_pct=60)
    led = Ledger.open(tmp_path / "b.db")
    counts, rows = _run(state, led, covered=True, lean_at=compacted + 60)
    assert [k for k, *_ in _kinds(rows)] == ["lean"] and counts["considered"] == 0, (_kinds(rows), counts)
    # ... and when OpenClaw compacted again after the lean view went on, it is rotated
    state = _state(tmp_path / "c", ["t", "t", "t", "c", "t", "c", "t"], status_pct=60)
    led = Ledger.open(tmp_path / "c.db")
    counts, rows = _run(state, led, covered=True, lean_at=compacted - 3600)
    assert counts["failed"] == 1, counts
    assert not any(k == "compact" for k, *_ in _kinds(rows))


def test_status_marks_a_rotation_done_for_an_emergency():
    from occd.report.status import _emergencies

    rot = {"kind": "rotate", "trigger": "auto", "agent_id": "main", "session_id": "s1", "session_key": KEY,
           "policy": "emergency:blocked", "before": {"compactions": 0}, "dry_run": False, "outcome": "ok",
           "reason": "BLOCKED: ...", "ts": 1.0}
    assert [(e["kind"], e["action"]) for e in _emergencies([rot])] == [("BLOCKED", "rotate")]
    assert _emergencies([{**rot, "policy": "rotate_at_compactions"}]) == []


@pytest.mark.slow
def test_a_failing_database_era_compaction_is_tried_once_per_turn_and_trips_its_breaker(isolated_env, tmp_path,
                                                                                         monkeypatch):
    """The routine database-era strip is OpenClaw's compaction through its gateway. When that fails (here: no
    `openclaw` on PATH, as in a loop run with `agent --local`), occd tries once per agent turn, not every
    cycle, and the failures count for the breaker of the kind they are recorded as (compact)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    def heavy(where):  # five tool turns of ~15k tokens each and 12k of prompt overhead: over the budget a run on
        db = DbState(where / ".openclaw")
        (db.state_dir / "openclaw.json").write_text("{}")
        entry = {"contextTokens": 128_000, "compactionCount": 0,
                 "contextBudgetStatus": {"estimatedPromptTokens": 12_000, "messageCount": 0,
                                         "contextTokenBudget": 128_000, "promptBudgetBeforeReserve": 108_000}}
        db.add_session(KEY, events=_tool_events(5, 30_000), entry=entry,
                       updated_at=int((time.time() - 3600) * 1000))
        return db.state_dir

    state = heavy(tmp_path)
    led = Ledger.open()
    for _ in range(3):  # three cycles, no new turn in between
        _run(state, led, compact_db_sessions=True, keep_recent_turns=0)  # a strip, not a rotation
    tries = [a for a in led.history(limit=50) if a["kind"] == "compact"]
    assert [a["outcome"] for a in tries] == ["failed"], _kinds(led.history(limit=50))
    # two earlier failures in the breaker's window: this one opens it
    now = time.time()
    for k in (1, 2):
        led.record_action("compact", "main", "other-session", "agent:main:other", trigger="auto", policy="p",
                          reason="r", outcome="failed", error="e", now=now - 60 * k)
    state2 = heavy(tmp_path / "2")
    _run(state2, led, compact_db_sessions=True, keep_recent_turns=0)
    assert led.get_breaker("main", "compact").state == brk.OPEN

    # by default occd never asks for that compaction: it records once that it would not, and why
    led2 = Ledger.open(tmp_path / "l2.db")
    state3 = heavy(tmp_path / "3")
    for _ in range(2):
        counts, rows = _run(state3, led2, keep_recent_turns=0)
    assert [(a["kind"], a["outcome"]) for a in rows] == [("compact", "skipped")]
    assert "occd lean enable" in rows[0]["reason"] and counts["acted"] == 0
    # the agent goes on (its estimate and so the reason's percentage change every turn): still once an hour
    import json as _json

    c = DbState(state3).connect("main")
    for turn in range(3):
        (raw,) = c.execute("SELECT entry_json FROM session_nodes WHERE session_key = ?", (KEY,)).fetchone()
        e = _json.loads(raw)
        e["contextBudgetStatus"]["estimatedPromptTokens"] += 2_000
        time.sleep(0.01)
        at = int(time.time() * 1000)  # a new agent turn, after occd's last look
        e["updatedAt"] = at
        with c:
            c.execute("UPDATE session_nodes SET entry_json = ?, updated_at = ?, last_interaction_at = ? "
                      "WHERE session_key = ?", (_json.dumps(e), at, at, KEY))
            c.execute("UPDATE session_nodes SET entry_valid = 1 WHERE session_key = ?", (KEY,))
        counts, rows = _run(state3, led2, min_idle_minutes=0)
    c.close()
    assert [(a["kind"], a["outcome"]) for a in rows] == [("compact", "skipped")], _kinds(rows)


def _tool_events(turns: int, chars: int) -> list[dict]:
    """Turns that each read a file: a question, the model's call, the tool's result of `chars`, an answer."""
    out, parent = [], None
    for i in range(1, turns + 1):
        for e in ({"id": f"u{i}", "message": {"role": "user", "content": f"Q{i}: READ /w/doc{i}.txt"}},
                  {"id": f"c{i}", "message": {"role": "assistant", "stopReason": "toolUse", "usage": USED, "content": [
                      {"type": "toolCall", "id": f"call{i}", "name": "read", "arguments": {"path": f"/w/doc{i}.txt"}}]}},
                  {"id": f"r{i}", "message": {"role": "toolResult", "toolCallId": f"call{i}", "toolName": "read",
                                              "content": [{"type": "text", "text": "z " * (chars // 2)}]}},
                  {"id": f"a{i}", "message": {"role": "assistant", "stopReason": "stop", "usage": USED,
                                              "content": [{"type": "text", "text": f"doc{i} is about z"}]}}):
            out.append({"type": "message", "parentId": parent, "timestamp": "2026-11-25T10:00:00.000Z", **e})
            parent = e["id"]
    return out
