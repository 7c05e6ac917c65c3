"""Benchmark: editing a ~100 MB transcript (issue 3).

    .venv/bin/python bench/bench_edit.py [--size-mb 100] [--path FILE] [--preset default] [--repeat 1]

Generates a transcript with occd.transcript.synth (in a temp dir unless --path names an existing file), then
measures in the same run, each in a fresh child process:
  baseline: orjson-parse every line and write the file back;
  occd:     scan + plan_strip(preset) + rewrite to a temp file.
Prints the wall-time ratio (target <= 2x) and the peak RSS of the occd edit from
resource.getrusage(RUSAGE_CHILDREN).ru_maxrss (target < 1.5 x file size + 80 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRESETS = {"default": (20, 50), "aggressive": (10, 50), "extreme": (0, 0)}

CHILD_BASELINE = r"""
import sys, time, orjson
src, dst = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
with open(src, "rb") as f, open(dst, "wb") as out:
    for line in f:
        if line.strip():
            out.write(orjson.dumps(orjson.loads(line)) + b"\n")
print(time.perf_counter() - t0)
"""

CHILD_OCCD = r"""
import sys, time
t0 = time.perf_counter()
from occd.transcript import scan, rewrite
from occd.cleaner import plan_strip
src, dst, keep, pct = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
t = scan(src)
t1 = time.perf_counter()
plan = plan_strip(t, keep, pct)
t2 = time.perf_counter()
with open(dst, "wb") as out:
    n = rewrite(t, out, remove=plan.remove, edits=plan.transforms())
t3 = time.perf_counter()
import json
print(json.dumps({"total": t3 - t0, "scan": t1 - t0, "plan": t2 - t1, "rewrite": t3 - t2, "entries": len(t.entries),
                  "removed": len(plan.remove), "edited": len(plan.edits), "size_after": n}))
"""


def run_child(code: str, *args: str) -> tuple[str, float, int]:
    """Run code in a fresh interpreter; returns (stdout, wall seconds, RUSAGE_CHILDREN ru_maxrss in bytes).
    ru_maxrss of RUSAGE_CHILDREN is the maximum over all children waited for so far, so the occd children
    run first (nothing else is a child before them)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024
    return p.stdout.strip(), wall, peak * scale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--path", type=Path, help="use (or create) this transcript instead of a temp file")
    ap.add_argument("--preset", choices=list(PRESETS), default="default")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs for each side")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmpdir = tempfile.TemporaryDirectory(prefix="occd-bench-")
    work = Path(tmpdir.name)
    src = a.path or work / "big.jsonl"
    if not src.exists():
        # generated in this process (not a child), so RUSAGE_CHILDREN only ever sees the measured children
        from occd.transcript.synth import generate_transcript
        t0 = time.perf_counter()
        generate_transcript(src, target_bytes=int(a.size_mb * 1024 * 1024), thinking=True, compactions=3,
                            branch=True, custom=True, images=True, seed=42)
        print(f"generated {src} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    size = src.stat().st_size
    keep, pct = PRESETS[a.preset]
    base_times, occd_times, details = [], [], None
    # occd first: RUSAGE_CHILDREN is a running max, so measure the occd child before the baseline child
    occd_rss = 0
    for _ in range(a.repeat):
        out, wall, rss = run_child(CHILD_OCCD, str(src), str(work / "occd.jsonl"), str(keep), str(pct))
        occd_times.append(wall)
        occd_rss = max(occd_rss, rss)
        details = json.loads(out)
        (work / "occd.jsonl").unlink()
    for _ in range(a.repeat):
        _out, wall, _rss = run_child(CHILD_BASELINE, str(src), str(work / "base.jsonl"))
        base_times.append(wall)
        (work / "base.jsonl").unlink()
    base, occd = min(base_times), min(occd_times)
    limit = 1.5 * size + 80 * 1024 * 1024
    res = {
        "fileBytes": size, "preset": a.preset, "baselineSeconds": round(base, 3), "occdSeconds": round(occd, 3),
        "ratio": round(occd / base, 2), "ratioTarget": 2.0, "occdPeakRssBytes": occd_rss,
        "rssLimitBytes": int(limit), "rssOk": occd_rss < limit, "ratioOk": occd / base <= 2.0, "occd": details,
    }
    if a.json:
        print(json.dumps(res))
    else:
        mb = 1024 * 1024
        print(f"file:      {size / mb:.1f} MB, {details['entries']} entries, preset {a.preset}")
        print(f"baseline:  {base:.2f} s (orjson parse + write every line)")
        print(f"occd:      {occd:.2f} s (scan {details['scan']:.2f} + plan {details['plan']:.2f} + rewrite "
              f"{details['rewrite']:.2f}; {details['removed']} removed, {details['edited']} rewritten; "
              f"{details['size_after'] / mb:.1f} MB after)")
        print(f"ratio:     {occd / base:.2f}x (target <= 2x) {'OK' if res['ratioOk'] else 'OVER'}")
        print(f"peak RSS:  {occd_rss / mb:.0f} MB (limit {limit / mb:.0f} MB) {'OK' if res['rssOk'] else 'OVER'}")
    tmpdir.cleanup()
    return 0 if res["ratioOk"] and res["rssOk"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
