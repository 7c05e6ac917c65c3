"""Issue 23 item 6: a spiralling session in a small window (OpenClaw 2026.7.35 with contextWindow 32000: budget
12k, prompt overhead 22k). A fresh session would be over the target too, so no rotation (the strongest strip
instead, as the README says); one decision per session per cycle; a fresh session's figure includes the prompt
overhead its first turn sends."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from click.testing import CliRunner

from occd.cli.main import cli
from occd.ledger import Ledger
from occd.policy import budget as b
from tests.test_budget_jobs import SID, _ctx, _entries

WINDOW = 32_000      # budget 12,000 (reserve floor 20,000)
OVERHEAD = 22_000    # system prompt + tools: a fresh session alone is over any target
KEY = "agent:main:main"


def _state(home: Path, turns: int = 6, compactions: int = 4) -> tuple[Path, Path]:
    state = home / ".openclaw"
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    (state / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"fake": {"models": [{"id": "fake-model", "contextWindow": WINDOW}]}}}}))
    entries = _entries(turns)
    path = sdir / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    msgs = b.context_messages(entries)
    ctx = b.estimate_context(msgs)
    count = len(msgs) - 4
    status = {"estimatedPromptTokens": math.ceil(sum(ctx.per_message[:count]) * 1.2) + OVERHEAD,
              "messageCount": count, "contextTokenBudget": WINDOW, "promptBudgetBeforeReserve": 12_000}
    old = time.time() - 3600
    os.utime(path, (old, old))
    now_ms = int(time.time() * 1000)
    (sdir / "sessions.json").write_text(json.dumps({KEY: {
        "sessionId": SID, "sessionFile": str(path), "updatedAt": int(old * 1000), "model": "fake-model",
        "modelProvider": "fake", "contextTokens": WINDOW, "contextBudgetStatus": status,
        "compactionCount": compactions,
        "compactionCheckpoints": [{"reason": "overflow-retry", "createdAt": now_ms - 120_000,
                                   "tokensBefore": 30_000, "tokensAfter": 25_000}]}}))
    return state, path


def _cycle(state, led, mode="act"):
    from occd.jobs import run_cycle

    return run_cycle(_ctx(state, led, mode=mode), ["scan", "apply", "rotate"])


def test_spiral_in_a_small_window_is_stripped_not_rotated(isolated_env):
    state, path = _state(isolated_env)
    with Ledger.open() as led:
        out = _cycle(state, led)
        rows = led.history(limit=50)
    idx = json.loads((path.parent / "sessions.json").read_text())
    assert idx[KEY]["sessionId"] == SID                     # not rotated: a fresh session cannot help
    assert not any(a["kind"] == "rotate" and a["outcome"] == "ok" for a in rows), rows
    strips = [a for a in rows if a["kind"] == "strip" and a["outcome"] == "ok"]
    assert len(strips) == 1 and "would not help" in strips[0]["reason"], rows
    assert (strips[0]["before"] or {}).get("keepTurnsWithTools") == 0
    assert out["rotate"][1]["rotated"] == 0


def test_one_decision_per_session_per_cycle(isolated_env):
    """A session the budget policy acts on, that also has enough compactions for the scheduled rotation: each
    cycle records one decision for it (never a strip or rotation and a rotation or its cooldown skip)."""
    from tests.test_budget_jobs import _state as normal_state

    state, path = normal_state(isolated_env, 12)
    idx_path = path.parent / "sessions.json"
    idx = json.loads(idx_path.read_text())
    idx[KEY]["compactionCount"] = 4
    idx_path.write_text(json.dumps(idx))
    with Ledger.open() as led:
        seen = 0
        for _ in range(3):
            _cycle(state, led)
            rows = led.history(limit=500)
            new = [(a["kind"], a["outcome"]) for a in rows[: len(rows) - seen]
                   if a["kind"] in ("rotate", "strip") and not a["dry_run"]]
            seen = len(rows)
            assert len(new) <= 1, new


def test_a_fresh_sessions_figure_includes_the_prompt_overhead(isolated_env):
    """A manual rotation of a session in a normal window: the new session's figure is its seed plus the prompt
    overhead learned from OpenClaw's last check of the old one — not the seed alone (`~385 (1%)`)."""
    from tests.test_budget_jobs import _state as normal_state

    state, path = normal_state(isolated_env, 12)
    r = CliRunner().invoke(cli, ["rotate", KEY, "--force", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    seed = res["seed"]["tokens"]
    rows = json.loads(CliRunner().invoke(cli, ["list", "--json"]).stdout)["sessions"]
    row = next(x for x in rows if x["id"] == res["newSessionId"])
    assert row["tokensSource"] == "estimate"
    assert row["tokens"] >= seed + 5_000, (row, seed)       # the learned overhead (about 9,500) is in it
    info = json.loads(CliRunner().invoke(cli, ["info", res["newSessionId"], "--json"]).stdout)
    assert info["context"]["tokens"] == row["tokens"]
