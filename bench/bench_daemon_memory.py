"""Benchmark: the daemon's resident memory over 100 cycles (issue 4: under 100 MB, and not growing).

Runs the real runtime in this process, as `occd run` would: occd.runtime.daemon.Daemon with the registered jobs
(whatever of scan/apply/rotate/prune/maintain/score this installation has), one ledger and one JobContext kept
for the whole run (so the scan's incremental cache lives as long as in the daemon), and a started APScheduler
BackgroundScheduler so its threads and imports are counted. Every cycle is a full `--once` cycle (every job,
not only the scan: the worst case for growth). Between cycles a few transcripts get a new assistant reply, so
each scan has real work (tail reads, new observations).

The synthetic state is built once with occd.transcript.synth (the generator of bench_scan.py) into a cache
directory outside the repository (default ~/.cache/occd-bench-daemon) and reused; the ledger and occd's own
files live in a fresh temporary OCCD_HOME each run.

    .venv/bin/python bench/bench_daemon_memory.py                 # 10 agents x 30 sessions, ~150 MB, 100 cycles
    .venv/bin/python bench/bench_daemon_memory.py --act           # act mode: policies strip sessions too

Prints RSS (VmRSS) at cycles 1, 50 and 100 (plus peak), the cycle times, and whether any heavy module
(litellm, openai, tiktoken) was imported. Exit status 1 when RSS passes 100 MB, grows by more than
--max-growth-mb between cycle 50 and 100, or litellm got imported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

LIMIT_MB = 100.0
HEAVY = ("litellm", "openai", "tiktoken")
MARKER = "bench-scan.json"


def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # peak only: KB on Linux, bytes on macOS
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


def peak_mb() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


def ensure_state(root: Path, agents: int, sessions: int, mb: float, workers: int, rebuild: bool) -> dict:
    from bench_scan import build

    want = {"agents": agents, "sessions": sessions, "target": int(mb * 1e6)}
    if (root / MARKER).exists() and not rebuild:
        meta = json.loads((root / MARKER).read_text())
        if {k: meta.get(k) for k in want} == want:
            return meta
    print(f"building {agents} x {sessions} transcripts (~{mb:g} MB) in {root} ...", flush=True)
    return build(root, agents, sessions, want["target"], workers)


def reply_line(tokens: int, n: int) -> bytes:
    return (json.dumps({"type": "message", "id": f"bench{n:012x}", "parentId": None,
                        "timestamp": "2026-11-22T10:00:00.000Z",
                        "message": {"role": "assistant", "content": [{"type": "text", "text": "ok " * 20}],
                                    "usage": {"input": tokens - 50, "output": 50, "cacheRead": 0, "cacheWrite": 0,
                                              "totalTokens": tokens}, "stopReason": "stop", "timestamp": n}})
            + "\n").encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path.home() / ".cache" / "occd-bench-daemon")
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--mb", type=float, default=150.0, help="total transcript bytes to generate (MB)")
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--touch", type=int, default=5, help="transcripts that get a new reply between cycles")
    ap.add_argument("--act", action="store_true", help="policy mode act (default: observe)")
    ap.add_argument("--max-growth-mb", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()

    root = args.root.expanduser()
    meta = ensure_state(root, args.agents, args.sessions, args.mb, args.workers, args.rebuild)
    files = sorted(root.glob("agents/*/sessions/*.jsonl"))
    print(f"state: {root}: {len(files)} transcripts, {sum(p.stat().st_size for p in files) / 1e6:.0f} MB", flush=True)

    home = Path(tempfile.mkdtemp(prefix="occd-bench-daemon-home-"))
    os.environ["OCCD_HOME"] = str(home)
    os.environ["OPENCLAW_STATE_DIR"] = str(root)
    os.environ.pop("OCCD_CONFIG", None)

    from occd.runtime import logging_setup
    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    mode = "act" if args.act else "observe"

    def loader():
        return load_settings({"state_dir": str(root), "policy": {"mode": mode, "min_idle_minutes": 0}})

    logging_setup.setup("WARNING", quiet_stderr=True)
    rnd = random.Random(11)
    marks: dict[int, float] = {}
    times: list[float] = []
    failed: dict[str, int] = {}
    with Ledger.open() as ledger:
        d = Daemon(loader)
        d.ctx = d.make_context(ledger)
        d.scheduler = d.build_scheduler()
        d.sync_jobs(initial=True)
        d.scheduler.start(paused=True)  # started (threads, imports) but the bench drives the cycles itself
        print(f"jobs: {', '.join(d._registered) or 'none'}; mode {mode}; RSS before cycle 1: {rss_mb():.1f} MB",
              flush=True)
        for i in range(1, args.cycles + 1):
            if i > 1:
                for p in rnd.sample(files, min(args.touch, len(files))):
                    with open(p, "ab") as fh:
                        fh.write(reply_line(rnd.randint(5_000, 180_000), i))
            t0 = time.perf_counter()
            results = d.run_once(ledger)
            times.append(time.perf_counter() - t0)
            for name, (ok, _) in results.items():
                if not ok:
                    failed[name] = failed.get(name, 0) + 1
            if i in (1, 50, args.cycles) or i % 10 == 0:
                marks[i] = rss_mb()
                print(f"  cycle {i:>3}: RSS {marks[i]:6.1f} MB   cycle {times[-1] * 1000:7.1f} ms   "
                      f"jobs {', '.join(results)}", flush=True)
        d.scheduler.shutdown(wait=True)

    heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    first, mid, last = marks.get(1), marks.get(50), marks.get(args.cycles)
    growth = (last - mid) if (last is not None and mid is not None) else 0.0
    print()
    print(f"RSS cycle 1: {first:.1f} MB, cycle 50: {mid if mid is None else round(mid, 1)} MB, "
          f"cycle {args.cycles}: {last:.1f} MB, peak {peak_mb():.1f} MB (limit {LIMIT_MB:.0f} MB)")
    print(f"growth cycle 50 -> {args.cycles}: {growth:+.1f} MB; cycle time median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms")
    print(f"heavy modules imported: {heavy or 'none'}; failed jobs: {failed or 'none'}")
    problems = []
    if max(marks.values()) > LIMIT_MB:
        problems.append(f"RSS above {LIMIT_MB:.0f} MB")
    if growth > args.max_growth_mb:
        problems.append(f"RSS grew {growth:.1f} MB over the last {args.cycles - 50} cycles")
    if "litellm" in heavy:
        problems.append("litellm imported in the daemon process")
    print("FAIL: " + "; ".join(problems) if problems else "OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
