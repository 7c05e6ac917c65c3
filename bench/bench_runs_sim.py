"""Benchmark: runs of every size on a simulated file-era agent, the daemon's real cycle between runs (issue 30.1).

A transcript's turns (a TRACE as bench/make_trace.py writes it, or the closed loop takes it) are replayed on disk:
each user turn is one run of its tool calls with their real result texts, and before each model request of the
run OpenClaw's check is computed with OpenClaw's own estimate rules (occd.policy.budget): a request whose estimate
reaches the budget is one where OpenClaw would compact. Between runs, the daemon's scan and apply (act mode,
defaults) as `occd run` does them, in one process. No OpenClaw, no model: seconds, not the closed loop's minutes.
It counts what the trigger decides, not what a compaction would do next (the simulated agent never compacts).

Two arms in the same run: occd as it is, and occd without the large-run rule (the strip trigger with the growth
of the last 3 turns only: the rule before 2026-11-28).

    python bench/make_trace.py /tmp/trace30.jsonl --turns 30
    .venv/bin/python bench/bench_runs_sim.py /tmp/trace30.jsonl [--window 128000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def runs_of(trace: Path) -> list[list[str]]:
    """Per user turn, the texts of its tool results."""
    turns: list[list[str]] = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        m = (json.loads(line) or {}).get("message") or {}
        if m.get("role") == "user":
            turns.append([])
        elif m.get("role") == "toolResult" and turns:
            c = m.get("content")
            turns[-1].append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c or [] if isinstance(b, dict)))
    return turns


def arm(turns: list[list[str]], window: int, overhead: int, large: bool) -> dict:
    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.jobs import budget as jb
    from occd.ledger import Ledger
    from occd.policy.budget import prompt_budget
    from tests.simrun import RunsAgent

    home = Path(tempfile.mkdtemp(prefix="occd-bench-runs-"))
    os.environ.update(OCCD_HOME=str(home / "occd"), OPENCLAW_STATE_DIR=str(home / ".openclaw"))
    agent = RunsAgent(home, window=window, budget=prompt_budget(window), overhead=overhead)
    settings = load_settings({"state_dir": str(agent.state), "idle_seconds": 0, "policy": {"mode": "act"}})
    real = jb._seen_growth
    seen = real if large else (lambda *a: (real(*a)[0], 0))
    over = []
    with mock.patch.object(jb, "_seen_growth", seen), Ledger.open() as led:
        ctx = JobContext(settings=settings, ledger=led, state_dir=agent.state)
        for n, texts in enumerate(turns, 1):
            if agent.run_texts(texts):
                over.append(n)
            run_cycle(ctx, ["scan", "apply"])
        strips = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
    return {"over": over, "strips": len(strips), "sent": sum(agent.checks), "requests": len(agent.checks)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--overhead", type=int, default=12_000, help="the prompt overhead (system prompt, tools)")
    a = ap.parse_args(argv)
    turns = runs_of(a.trace)
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}  {a.trace.name}: {len(turns)} turns, runs of "
          f"{min(map(len, turns))}-{max(map(len, turns))} calls; window {a.window}, overhead {a.overhead}")
    base = arm(turns, a.window, a.overhead, large=False)
    new = arm(turns, a.window, a.overhead, large=True)
    print("arm                     runs past the budget   strips   tokens sent (sum of checks)")
    for name, r in (("last 3 turns only", base), ("with the large-run rule", new)):
        print(f"{name:<24}{len(r['over']):>3} {str(r['over']):<18}{r['strips']:>7}   {r['sent']:>12,}"
              f"  ({r['sent'] / base['sent']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
