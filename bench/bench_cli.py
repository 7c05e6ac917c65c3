"""Benchmark: `occd list` over 500 sessions (about 2 GB) and `occd --help` (issue 3 targets: < 0.5 s and < 0.3 s).

Both are timed as whole commands in fresh processes (what a person waits for), median of several runs, next to
a baseline measured in the same run: a bare `python -c pass` start-up on the same interpreter. The state (one
agent, 500 real synth transcripts of ~4 MB each) is generated once into ~/.cache/occd-bench-list and reused.

    .venv/bin/python bench/bench_cli.py [--sessions 500] [--mb 4] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(root: Path, sessions: int, mb: float) -> int:
    from occd.transcript import synth

    sdir = root / ".openclaw" / "agents" / "main" / "sessions"
    marker = root / "bench-list.json"
    if marker.exists() and json.loads(marker.read_text()) == {"sessions": sessions, "mb": mb}:
        return sum(p.stat().st_size for p in sdir.glob("*.jsonl"))
    sdir.mkdir(parents=True, exist_ok=True)
    for p in sdir.glob("*.jsonl"):
        p.unlink()
    index = {}
    t0 = time.time()
    for i in range(sessions):
        sid = f"{i:08x}-0000-7000-8000-{i:012x}"
        info = synth.generate_transcript(sdir, session_id=sid, turns=40, seed=i + 1, target_bytes=int(mb * 1024 * 1024))
        index[f"agent:main:s{i}"] = {"sessionId": sid, "sessionFile": str(info.path), "updatedAt": int((t0 - i * 60) * 1000),
                                     "compactionCount": i % 4, "model": "claude-opus-4-6"}
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    marker.write_text(json.dumps({"sessions": sessions, "mb": mb}))
    return sum(p.stat().st_size for p in sdir.glob("*.jsonl"))


def timed(cmd: list[str], env: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"{cmd} failed: {p.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", default=str(Path.home() / ".cache" / "occd-bench-list"))
    a = ap.parse_args()
    root = Path(a.root)
    total = build(root, a.sessions, a.mb)
    env = {**os.environ, "OPENCLAW_STATE_DIR": str(root / ".openclaw"), "OCCD_HOME": tempfile.mkdtemp(), "NO_COLOR": "1"}
    occd = [sys.executable, "-m", "occd"]
    base = timed([sys.executable, "-c", "pass"], env, a.runs)
    help_t = timed(occd + ["--help"], env, a.runs)
    list_t = timed(occd + ["list", "--json"], env, a.runs)
    list_h = timed(occd + ["list"], env, a.runs)
    print(f"state: {a.sessions} sessions, {total / 1e9:.2f} GB")
    print(f"python start-up (baseline): {base * 1000:.0f} ms")
    print(f"occd --help:      {help_t * 1000:.0f} ms  ({help_t / base:.1f}x baseline; target < 300 ms)")
    print(f"occd list --json: {list_t * 1000:.0f} ms  ({list_t / base:.1f}x baseline; target < 500 ms)")
    print(f"occd list:        {list_h * 1000:.0f} ms  ({list_h / base:.1f}x baseline; target < 500 ms)")


if __name__ == "__main__":
    main()
