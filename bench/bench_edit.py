"""Benchmark: editing a ~100 MB transcript (issue 3).

    .venv/bin/python bench/bench_edit.py [--size-mb 100] [--path FILE] [--preset default] [--repeat 5]

Generates a transcript with occd.transcript.synth (in a temp dir unless --path names an existing file), then
measures in the same run, each in a fresh child process, alternating occd / baseline `--repeat` times:
  baseline: orjson-parse every line and write the file back;
  occd:     scan + plan_strip(preset) + rewrite to a temp file, done inside a function as the `occd edit`
            command does it (the transcript is released when the work is done, not kept until exit).
The wall time of each child is measured from the parent (interpreter start and exit included). Prints every
pair, the median wall times and the median of the per-pair ratios (target <= 2x), and the peak RSS of the
occd children from os.wait4 (target < 1.5 x file size + 80 MB).

--command also times the whole `occd edit SESSION --strip-tools=PRESET` command the same way, on a throw-away
OpenClaw state in the temp dir (a fresh copy of the transcript per run, not timed): settings, idle check, scan,
plan, rewrite, fsync, the scan and invariant check of the new file before the rename, the backup and the ledger
record. Reported next to the same-run baseline, for information (the target is on the edit itself).
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

def edit(src, dst, keep, pct):
    t1 = time.perf_counter()
    t = scan(src)
    t2 = time.perf_counter()
    plan = plan_strip(t, keep, pct)
    t3 = time.perf_counter()
    with open(dst, "wb") as out:
        n = rewrite(t, out, remove=plan.remove, edits=plan.transforms())
    t4 = time.perf_counter()
    return {"import": t1 - t0, "scan": t2 - t1, "plan": t3 - t2, "rewrite": t4 - t3, "entries": len(t.entries),
            "removed": len(plan.remove), "edited": len(plan.edits), "size_after": n}

res = edit(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
import json
print(json.dumps(res))
"""


def run_child(code: str, *args: str, env: dict | None = None) -> tuple[str, float, int]:
    """Run code in a fresh interpreter; returns (stdout, wall seconds, that child's peak RSS in bytes)."""
    with tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=errf, env=env)
        out = p.stdout.read()  # to EOF; the child is then reaped here with its own rusage (not Popen.wait)
        p.stdout.close()
        _pid, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            errf.seek(0)
            raise SystemExit(errf.read().decode(errors="replace"))
    scale = 1 if sys.platform == "darwin" else 1024
    return out.decode().strip(), wall, usage.ru_maxrss * scale


def time_command(src: Path, work: Path, preset: str, repeat: int) -> dict:
    """The whole `occd edit` command on a throw-away file-era state, alternating with the baseline child."""
    import shutil

    home = work / "home"
    sdir = home / ".openclaw" / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    with open(src, "rb") as fh:
        sid = json.loads(fh.readline())["id"]
    dst = sdir / f"{sid}.jsonl"
    (sdir / "sessions.json").write_text(json.dumps({"agent:main:main": {
        "sessionId": sid, "sessionFile": str(dst), "updatedAt": int((time.time() - 7200) * 1000)}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCCD_", "OPENCLAW_"))}
    env.update(HOME=str(home), OCCD_HOME=str(work / "occd-home"), OPENCLAW_STATE_DIR=str(home / ".openclaw"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"), NO_COLOR="1")
    code = "import sys; from occd.cli.main import main; sys.argv = ['occd'] + sys.argv[1:]; main()"
    times, bases, ratios, rss = [], [], [], 0
    for _ in range(repeat):
        for old in sdir.glob("*.backup.*"):
            old.unlink()
        shutil.copyfile(src, dst)
        os.utime(dst, (time.time() - 7200,) * 2)
        _out, wall, r = run_child(code, "edit", sid, f"--strip-tools={preset}", "--json", env=env)
        _o, bwall, _r = run_child(CHILD_BASELINE, str(src), str(work / "base.jsonl"))
        (work / "base.jsonl").unlink()
        times.append(wall)
        bases.append(bwall)
        ratios.append(wall / bwall)
        rss = max(rss, r)
    return {"seconds": round(statistics.median(times), 3), "baselineSeconds": round(statistics.median(bases), 3),
            "ratio": round(statistics.median(ratios), 2), "peakRssBytes": rss}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--path", type=Path, help="use (or create) this transcript instead of a temp file")
    ap.add_argument("--preset", choices=list(PRESETS), default="default")
    ap.add_argument("--repeat", type=int, default=5, help="occd/baseline pairs to run (the median is reported)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--command", action="store_true", help="also time the whole `occd edit` command")
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
    base_times: list[float] = []
    occd_times: list[float] = []
    ratios: list[float] = []
    runs: list[dict] = []
    occd_rss = base_rss = 0
    for i in range(a.repeat):  # alternate, so both sides see the same machine load
        out, wall, rss = run_child(CHILD_OCCD, str(src), str(work / "occd.jsonl"), str(keep), str(pct))
        (work / "occd.jsonl").unlink()
        _out, bwall, brss = run_child(CHILD_BASELINE, str(src), str(work / "base.jsonl"))
        (work / "base.jsonl").unlink()
        details = json.loads(out)
        occd_times.append(wall)
        base_times.append(bwall)
        ratios.append(wall / bwall)
        occd_rss, base_rss = max(occd_rss, rss), max(base_rss, brss)
        runs.append({"occdSeconds": round(wall, 3), "baselineSeconds": round(bwall, 3), "ratio": round(wall / bwall, 2),
                     "occd": details})
        if not a.json:
            print(f"run {i + 1}: occd {wall:.2f} s (import {details['import']:.2f} + scan {details['scan']:.2f} + "
                  f"plan {details['plan']:.2f} + rewrite {details['rewrite']:.2f}), baseline {bwall:.2f} s, "
                  f"ratio {wall / bwall:.2f}x", flush=True)
    command = time_command(src, work, a.preset, a.repeat) if a.command else None
    base, occd, ratio = statistics.median(base_times), statistics.median(occd_times), statistics.median(ratios)
    limit = 1.5 * size + 80 * 1024 * 1024
    res = {
        "fileBytes": size, "preset": a.preset, "repeat": a.repeat, "baselineSeconds": round(base, 3),
        "occdSeconds": round(occd, 3), "ratio": round(ratio, 2), "ratioTarget": 2.0, "occdPeakRssBytes": occd_rss,
        "baselinePeakRssBytes": base_rss, "rssLimitBytes": int(limit), "rssOk": occd_rss < limit,
        "ratioOk": ratio <= 2.0, "runs": runs, "command": command,
    }
    if a.json:
        print(json.dumps(res))
    else:
        mb = 1024 * 1024
        print(f"file:      {size / mb:.1f} MB, {details['entries']} entries, preset {a.preset}")
        print(f"baseline:  {base:.2f} s median (orjson parse + write every line)")
        print(f"occd:      {occd:.2f} s median ({details['removed']} removed, {details['edited']} rewritten; "
              f"{details['size_after'] / mb:.1f} MB after)")
        print(f"ratio:     {ratio:.2f}x median of {a.repeat} pairs (target <= 2x) {'OK' if res['ratioOk'] else 'OVER'}")
        print(f"peak RSS:  {occd_rss / mb:.0f} MB (limit {limit / mb:.0f} MB) {'OK' if res['rssOk'] else 'OVER'}")
        if command:
            print(f"command:   `occd edit` {command['seconds']:.2f} s median, {command['ratio']:.2f}x the same-run "
                  f"baseline ({command['baselineSeconds']:.2f} s), peak RSS {command['peakRssBytes'] / mb:.0f} MB")
    tmpdir.cleanup()
    return 0 if res["ratioOk"] and res["rssOk"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
