"""bench/bench_closed_loop.py: the shapes (--reads, --trace) reach the harness, and both arms print with cost.
A fake harness stands in for ../shared/closed-loop/run.sh (no OpenClaw run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE = r'''#!/usr/bin/env bash
arm=$1
mkdir -p "$2"; echo '{"runId": "a", "status": "ok"}' > "$2/turn1.json"
[ "$arm" = none ] && echo '{"ok": false, "error": {"type": "cli_error", "message": "Preflight compaction required but failed: x"}}' > "$2/turn2.json"
usd=2.0; [ "$arm" = occd ] && usd=1.5
printf '{"arm": "%s", "turns": 12, "compactions": 0, "questions_seen_at_end": 12, "turns_blocked_by_overflow": 0, "recent_results_intact": "5/5", "reads": "%s", "trace": "%s", "occd_knobs": "%s", "cost": {"prefix_breaks": 3, "usd_with_cache": {"anthropic": %s, "openai": 1.0}}}\n' \
  "$arm" "${READS:-}" "${TRACE:-}" "${OCCD_POLICY__MODE:-}" "$usd"
'''


def _bench():
    spec = importlib.util.spec_from_file_location("bench_closed_loop", ROOT / "bench" / "bench_closed_loop.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_shapes_reach_the_harness_and_both_arms_print_with_cost(tmp_path, monkeypatch, capsys):
    h = tmp_path / "run.sh"
    h.write_text(FAKE)
    trace = tmp_path / "session.jsonl"
    trace.write_text("{}\n")
    monkeypatch.setenv("OCCD_CLOSED_LOOP", str(h))
    monkeypatch.setenv("OCCD_POLICY__MODE", "observe")  # a knob of the caller's shell never reaches the arms
    b = _bench()
    assert b.main(["--reads", "4", "--turns", "12", "--workdir", str(tmp_path / "w"), "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["arm"] for r in rows] == ["none", "occd"]
    assert all(r["reads"] == "4" and r["trace"] == "" and r["occd_knobs"] == "" for r in rows)
    assert [(r["turns_failed"], r["turn_error"]) for r in rows] == [
        (1, "Preflight compaction required but failed: x"), (0, None)]  # OpenClaw answered a turn with an error
    assert b.main(["--trace", str(trace), "--workdir", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "replaying session.jsonl" in out
    none, occd = [ln for ln in out.splitlines() if ln.startswith(("none ", "occd "))]
    assert "2.000/1.000" in none and "1.500/1.000" in occd and "0.750/1.000" in occd  # cost, and vs alone
    assert 'none: 1 of 12 turns failed, e.g. "Preflight compaction required but failed: x"' in out
    assert json.loads((tmp_path / "t" / "loop-occd.out").read_text())["trace"] == str(trace.resolve())


def test_bad_shape_arguments_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCD_CLOSED_LOOP", str(tmp_path / "run.sh"))
    b = _bench()
    with pytest.raises(SystemExit, match="--reads must be at least 1"):
        b.main(["--reads", "0"])
    with pytest.raises(SystemExit, match="no such file"):
        b.main(["--trace", str(tmp_path / "missing.jsonl")])
    with pytest.raises(SystemExit, match="AGENTSxSESSIONS"):
        b.main(["--workstation", "fifty"])


RUN_BEFORE_BESIDE = r'''#!/usr/bin/env bash
# What the harness does with BEFORE and BESIDE, on a state with the loop's own config and agent.
export OPENCLAW_STATE_DIR="$2/state"
mkdir -p "$OPENCLAW_STATE_DIR/agents/main/sessions"; echo '{"mine": 1}' > "$OPENCLAW_STATE_DIR/openclaw.json"
bash -c "$BEFORE" > "$2.before" 2>&1 || exit 1
bash -c "$BESIDE" > "$2.beside" 2>&1 & BPID=$!
sleep 1.5; kill $BPID; wait $BPID
printf '{"arm": "%s", "turns": 1, "compactions": 0, "questions_seen_at_end": 1, "turns_blocked_by_overflow": 0, "recent_results_intact": "1/1", "wall_s": 10, "occd_cpu_s": 0.5}\n' "$1"
'''


def test_workstation_fills_the_state_and_runs_a_busy_agent_beside(tmp_path, monkeypatch, capsys):
    """--workstation: other agents' history in the loop's state (its openclaw.json and agent untouched), and an
    agent writing under its run lock the whole loop, its lock gone once it is stopped."""
    h = tmp_path / "run.sh"
    h.write_text(RUN_BEFORE_BESIDE)
    monkeypatch.setenv("OCCD_CLOSED_LOOP", str(h))
    b = _bench()
    assert b.main(["--workstation", "3x4", "--arms", "occd", "--workdir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert "workstation 3x4 + a busy agent" in out and "5.0%" in out  # occd's CPU share of the loop's wall time
    state = tmp_path / "w" / "loop-occd" / "state"
    assert json.loads((state / "openclaw.json").read_text()) == {"mine": 1}
    assert (state / "agents" / "main").is_dir()
    for a in range(3):
        index = json.loads((state / "agents" / f"agent{a:04d}" / "sessions" / "sessions.json").read_text())
        assert len(index) == 4 and all(Path(e["sessionFile"]).is_file() for e in index.values())
    busy = state / "agents" / "busy" / "sessions"
    (transcript,) = busy.glob("*.jsonl")
    assert len(transcript.read_text().splitlines()) > 3  # a line every 0.2 s
    assert not list(busy.glob("*.lock"))
    assert json.loads((tmp_path / "w" / "loop-occd.beside").read_text().splitlines()[-1])["lines"] > 3


def test_make_trace_writes_a_coding_sessions_shape(tmp_path):
    """bench/make_trace.py: a transcript of user turns with 0 to 31 tool calls, each result a real text of this
    repository, the same for the same seed (the closed loop's TRACE replays one tool result per call)."""
    spec = importlib.util.spec_from_file_location("make_trace", ROOT / "bench" / "make_trace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert mod.main([str(a)]) == 0 and mod.main([str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    calls, sizes = [], []
    for e in (json.loads(x) for x in a.read_text().splitlines()[1:]):
        m = e["message"]
        if m["role"] == "user":
            calls.append(0)
        elif m["role"] == "toolResult":
            calls[-1] += 1
            sizes.append(len(m["content"][0]["text"]))
    assert calls == mod.CALLS[:30] and max(calls) == 31 and 0 in calls
    assert min(sizes) >= 200 and max(sizes) <= 20_000
    assert mod.main([str(tmp_path / "c.jsonl"), "--turns", "0"]) == 2
