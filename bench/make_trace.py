#!/usr/bin/env python3
"""Write a coding session's shape as an OpenClaw transcript, for the closed loop's TRACE (bench_closed_loop.py
--trace): user turns of 0 to 31 tool calls (the mix public coding transcripts show: many short runs, a few long
ones), each result a real text from this repository (source files, docs: code as an agent reads it, from a
200-character listing to a 20 KB file; the longest run ~110 KB, public ones reach ~140 KB). Deterministic (a
seed). It is a synthetic shape, not someone's session: figures from it are labelled so.

    python bench/make_trace.py OUT.jsonl [--turns 30] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# calls per turn, a coding session's rhythm: explore, edit, test, a long investigation now and then
CALLS = [2, 5, 0, 8, 3, 14, 1, 6, 22, 4, 0, 9, 31, 3, 7, 2, 12, 5, 0, 18, 4, 6, 10, 2, 27, 3, 8, 1, 5, 11]


def texts() -> list[str]:
    files = sorted(p for p in (ROOT / "occd").rglob("*.py")) + sorted((ROOT / "docs").glob("*.md"))
    return [p.read_text(encoding="utf-8") for p in files if p.stat().st_size > 400]


def result(rng: random.Random, pool: list[str]) -> str:
    t = rng.choice(pool)
    kind = rng.random()
    if kind < 0.45:                       # a listing, a grep, a short command's output
        n = rng.randint(200, 2_000)
    elif kind < 0.95:                     # a file read, part of one
        n = rng.randint(2_000, 8_000)
    else:                                 # a whole large file, a long log
        n = rng.randint(12_000, 20_000)
    start = rng.randint(0, max(0, len(t) - n))
    out = t[start:start + n]
    while len(out) < n:                   # a short file: the next one after it
        out += "\n" + rng.choice(pool)[: n - len(out)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    if a.turns < 1:
        print("Error: --turns must be at least 1", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    pool = texts()
    lines = [{"type": "session", "version": 3, "id": "trace", "timestamp": "2026-11-28T00:00:00.000Z", "cwd": "/w"}]
    parent = None

    def add(msg: dict) -> None:
        nonlocal parent
        e = {"type": "message", "id": f"m{len(lines):05d}", "parentId": parent,
             "timestamp": "2026-11-28T00:00:00.000Z", "message": msg}
        parent = e["id"]
        lines.append(e)

    for i in range(a.turns):
        n = CALLS[i % len(CALLS)]
        add({"role": "user", "content": f"turn {i + 1}"})
        for k in range(n):
            cid = f"c{i}_{k}"
            add({"role": "assistant", "content": [{"type": "toolCall", "id": cid, "name": "read", "arguments": {}}]})
            add({"role": "toolResult", "toolCallId": cid, "toolName": "read",
                 "content": [{"type": "text", "text": result(rng, pool)}]})
        add({"role": "assistant", "content": [{"type": "text", "text": f"done {i + 1}"}]})
    Path(a.out).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    total = sum(len(x["message"]["content"][0]["text"]) for x in lines[1:]
                if x["message"]["role"] == "toolResult")
    print(f"{a.out}: {a.turns} turns, {sum(CALLS[i % len(CALLS)] for i in range(a.turns))} tool calls, "
          f"{total / 1000:.0f} KB of results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
