"""Benchmark: occd on a workstation (issue 29): many agents, each with a month of sessions.

Builds (once, cached in --root) a file-era state of --agents x --sessions with tests/statefactory.py's
build_workstation (transcript sizes spread log-normally around --mean-kb, last used from a minute to 30 days
ago), and a small baseline state (1 agent x 10 sessions) next to it. Then, in this process as the daemon runs
its jobs (one JobContext kept across cycles):

- quiet-wake CPU: the wake jobs (scan, lean, apply, rotate, verify) when nothing changed, and after one
  transcript grew (one changed session), each as CPU seconds and as a ratio to the same wake on the baseline
  state measured in the same run. A wake is what the daemon runs on its watcher's events: the scan looks again
  at the agents the watcher named (ctx.changed). The scheduled scan (every scan_interval_seconds, and every
  cycle in polling mode) looks at every agent: measured too, after each one-changed-session wake;
- `occd status`, `occd status --json`, `occd sessions`, `occd sessions --json` as whole processes (median of
  --runs, wall and CPU of the child), and their ratio to a bare `python -c pass` measured in the same run.

    .venv/bin/python bench/bench_workstation.py                        # 50 agents x 100 sessions (~400 MB)
    .venv/bin/python bench/bench_workstation.py --agents 2000 --sessions 5

Targets (issue 29): a quiet wake < 0.1 s CPU, one changed session < 0.3 s, on 2,000 agents within 2x; status
< 1 s and sessions < 2 s (2,000 agents: < 2 s and < 4 s); the text forms within 1.5x of --json.
Not measured here yet: run-end -> strip latency with a busy neighbour (see bench_closed_loop.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WAKE = ["scan", "lean", "apply", "rotate", "verify"]
LINE = (b'{"type":"custom","customType":"bench","data":{},"id":"%08x","parentId":null,'
        b'"timestamp":"2026-11-27T10:00:00.000Z"}\n')


def ensure_state(root: Path, agents: int, sessions: int, mean_kb: float) -> Path:
    from tests.statefactory import build_workstation

    state = root / f"ws-{agents}x{sessions}-{mean_kb:g}kb" / ".openclaw"
    marker = state.parent / "built.json"
    if not marker.exists():
        import shutil

        shutil.rmtree(state.parent, ignore_errors=True)
        t0 = time.perf_counter()
        print(f"building {agents} x {sessions} sessions in {state} ...", flush=True)
        info = build_workstation(state, agents, sessions, mean_bytes=int(mean_kb * 1000))
        info["seconds"] = round(time.perf_counter() - t0, 1)
        marker.write_text(json.dumps(info))
    return state


def wake_cpu(state: Path, home: Path, rounds: int) -> dict:
    """CPU seconds of the wake jobs: the first (cold) wake, quiet wakes (median), one-changed-session wakes."""
    os.environ["OCCD_HOME"] = str(home)
    os.environ["OPENCLAW_STATE_DIR"] = str(state)
    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.ledger import Ledger

    files = sorted(state.glob("agents/*/sessions/*.jsonl"))
    out = {}
    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(state)}), ledger=led, state_dir=state)
        t = time.process_time()
        run_cycle(ctx, WAKE)
        out["first"] = time.process_time() - t
        quiet, one, full = [], [], []
        for i in range(rounds):
            # the daemon's wake names the agents its watcher saw change (ctx.changed); the scheduled scan does not
            ctx.changed = frozenset()
            t = time.process_time()
            run_cycle(ctx, WAKE)
            quiet.append(time.process_time() - t)
            p = files[(i * 7919) % len(files)]
            with open(p, "ab") as fh:
                fh.write(LINE % i)
            ctx.changed = frozenset({p.parent.parent.name})
            t = time.process_time()
            run_cycle(ctx, WAKE)
            one.append(time.process_time() - t)
            ctx.changed = None
            t = time.process_time()
            run_cycle(ctx, WAKE)
            full.append(time.process_time() - t)
        out["full"] = statistics.median(full)
        out["quiet"], out["one"] = statistics.median(quiet), statistics.median(one)
    return out


def timed(cmd: list[str], env: dict, runs: int) -> tuple[float, float]:
    wall, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(wall), statistics.median(cpu)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path.home() / ".cache" / "occd-bench-workstation")
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--mean-kb", type=float, default=68)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    root = a.root.expanduser()
    big = ensure_state(root, a.agents, a.sessions, a.mean_kb)
    small = ensure_state(root, 1, 10, a.mean_kb)
    n = len(list(big.glob("agents/*/sessions/*.jsonl")))
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}  state {big}: {a.agents} agents, {n} sessions, "
          f"{sum(p.stat().st_size for p in big.glob('agents/*/sessions/*.jsonl')) / 1e6:.0f} MB; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    home = Path(tempfile.mkdtemp(prefix="occd-bench-ws-"))
    base = wake_cpu(small, home / "small", a.rounds)
    w = wake_cpu(big, home / "big", a.rounds)
    print(f"wake CPU (s)        first    quiet    one changed   scheduled scan (every agent)")
    print(f"  baseline 1x10     {base['first']:7.3f}  {base['quiet']:7.3f}  {base['one']:7.3f}       {base['full']:7.3f}")
    print(f"  {a.agents}x{a.sessions:<12}{w['first']:7.3f}  {w['quiet']:7.3f}  {w['one']:7.3f}       {w['full']:7.3f}")
    print(f"  ratio             {'':7}  {w['quiet'] / max(base['quiet'], 1e-6):6.1f}x  {w['one'] / max(base['one'], 1e-6):6.1f}x"
          f"        {w['full'] / max(base['full'], 1e-6):6.1f}x   (targets: quiet < 0.1 s, one < 0.3 s)")
    env = dict(os.environ, OCCD_HOME=str(home / "big"), OPENCLAW_STATE_DIR=str(big), NO_COLOR="1", COLUMNS="120")
    py = [sys.executable]
    bw, bc = timed(py + ["-c", "pass"], env, a.runs)
    print(f"commands (median of {a.runs}; baseline `python -c pass` {bw:.3f} s wall, {bc:.3f} s CPU)")
    rows = {}
    for args in (["status"], ["status", "--json"], ["sessions"], ["sessions", "--json"]):
        subprocess.run(py + ["-m", "occd", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall, cpu = timed(py + ["-m", "occd", *args], env, a.runs)
        rows[" ".join(args)] = wall
        print(f"  occd {' '.join(args):<16} {wall:6.2f} s wall  {cpu:6.2f} s CPU  ({wall / bw:5.1f}x python start)")
    print(f"  text / --json: status {rows['status'] / rows['status --json']:.2f}x, "
          f"sessions {rows['sessions'] / rows['sessions --json']:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
