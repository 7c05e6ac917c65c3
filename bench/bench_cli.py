"""Benchmark: `occd list` over 500 sessions (about 2 GB) and `occd --help` (issue 3 targets: < 0.5 s and < 0.3 s),
and every read-only command on the demo state (issue 16 target: each whole process < 0.25 s).

Both are timed as whole commands in fresh processes (what a person waits for), median of several runs, next to
a baseline measured in the same run: a bare `python -c pass` start-up on the same interpreter. The state (one
agent, 500 real synth transcripts of ~4 MB each) is generated once into ~/.cache/occd-bench-list and reused.

    .venv/bin/python bench/bench_cli.py [--sessions 500] [--mb 4] [--runs 7] [--readonly-only] [--baseline-src DIR]

The read-only set runs on a state made once by `occd demo --keep` (3 agents, 7 sessions, a ledger with three
daemon cycles). Each figure is the median wall time of --runs fresh processes, and its median CPU time
(user + sys of the child): on a shared machine the CPU time is the steadier of the two. --baseline-src DIR (an
older source tree, e.g. `git archive de1c8e8 | tar -x -C DIR`) times that code too, interleaved run by run on
the same state (PYTHONPATH=DIR, run outside the repo so `-m occd` finds it first), for a same-run ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def timed(cmd: list[str], env: dict, runs: int, with_cpu: bool = False, cwd=None):
    times, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, cwd=cwd)
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if p.returncode != 0 and not (cmd[-1] == "doctor" and p.returncode == 1):  # doctor: 1 = a check failed
            raise SystemExit(f"{cmd} failed: {p.stderr.decode()[-500:]}")
    if with_cpu:
        return statistics.median(times), statistics.median(cpu)
    return statistics.median(times)


BASELINE = [sys.executable, "-c", "import pydantic_settings"]

# The read-only commands of issue 16 (each must stay under 0.25 s whole-process).
READONLY = [
    ["status"], ["status", "--json"], ["status", "--rotations"], ["history"], ["history", "--json"],
    ["db", "info"], ["list"], ["list", "--json"], ["info"], ["info", "--json"], ["sessions"],
    ["select", "--task", "fix the webhook", "--no-llm"], ["breaker", "status"], ["config", "show"], ["stats"],
    ["backups"], ["lean", "status"], ["doctor"], ["db", "path"], ["config", "path"],
]


def readonly(runs: int, baseline_src: str | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="occd-bench-ro-"))
    try:
        env = {**os.environ, "NO_COLOR": "1"}
        env.pop("OCCD_CONFIG", None)
        env.pop("PYTHONPATH", None)
        # as installed: bytecode cached (PYTHONDONTWRITEBYTECODE would compile every module at every start)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "occd", "demo", "--keep", str(root)], env=env, capture_output=True,
                       check=True)
        env.update(OCCD_HOME=str(root / "occd-home"), OPENCLAW_STATE_DIR=str(root / ".openclaw"))
        occd = [sys.executable, "-m", "occd"]
        print(f"read-only commands on the demo state (median of {runs}; target < 250 ms each); load {os.getloadavg()[0]:.1f}")
        if baseline_src:
            print(f"  baseline: the code in {baseline_src}, run by run after this code; ratio = this / that (cpu)")
        else:
            print(f"  baseline: `python -c \"import pydantic_settings\"` (the one import that stays eager), timed "
                  f"right after each command; ratio = command / baseline (wall and cpu)")
        for args in READONLY:  # warm-up: the bytecode caches are written, the files are in the page cache
            timed(occd + args, env, 1, cwd=root)
        timed(BASELINE, env, 1, cwd=root)
        worst = 0.0
        old_env = {**env, "PYTHONPATH": str(Path(baseline_src).resolve())} if baseline_src else None
        for args in READONLY:
            if old_env is None:  # interleaved with the baseline: the same load for both
                pairs = [(timed(occd + args, env, 1, with_cpu=True, cwd=root),
                          timed(BASELINE, env, 1, with_cpu=True, cwd=root)) for _ in range(runs)]
                wall, cpu = statistics.median(p[0][0] for p in pairs), statistics.median(p[0][1] for p in pairs)
                bwall, bcpu = statistics.median(p[1][0] for p in pairs), statistics.median(p[1][1] for p in pairs)
                extra = (f"  | pydantic_settings wall {bwall * 1000:4.0f} ms cpu {bcpu * 1000:4.0f} ms "
                         f"(ratio wall {wall / bwall:.2f}x, cpu {cpu / bcpu:.2f}x)")
            else:  # interleaved: new, old, new, old ... from outside the repo
                pairs = [(timed(occd + args, env, 1, with_cpu=True, cwd=root),
                          timed(occd + args, old_env, 1, with_cpu=True, cwd=root)) for _ in range(runs)]
                wall, cpu = statistics.median(p[0][0] for p in pairs), statistics.median(p[0][1] for p in pairs)
                owall, ocpu = statistics.median(p[1][0] for p in pairs), statistics.median(p[1][1] for p in pairs)
                extra = f"  | baseline wall {owall * 1000:4.0f} ms cpu {ocpu * 1000:4.0f} ms (cpu {cpu / ocpu:.2f}x)"
            worst = max(worst, wall)
            mark = "" if wall < 0.25 else "  OVER"
            print(f"  occd {' '.join(args):<37} wall {wall * 1000:4.0f} ms  cpu {cpu * 1000:4.0f} ms{mark}{extra}")
        print(f"  slowest: {worst * 1000:.0f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", default=str(Path.home() / ".cache" / "occd-bench-list"))
    ap.add_argument("--readonly-only", action="store_true", help="only the read-only commands on the demo state")
    ap.add_argument("--baseline-src", default=None, help="an older source tree to time interleaved with this one")
    a = ap.parse_args()
    readonly(a.runs, a.baseline_src)
    if a.readonly_only:
        return
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
