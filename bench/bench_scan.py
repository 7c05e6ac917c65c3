"""Benchmark: the daemon's scan job over 100 agents x 50 sessions (5,000 transcripts, about 2 GB).

Issue 4 targets: a cycle where nothing changed takes under 0.5 s and reads no transcript bytes; the first scan
of the same state reads under 5% of the transcript bytes.

The state is generated once with occd.transcript.synth (full, real transcripts: every byte written, sizes
spread log-normally from a few KB to several MB, some with thinking, compactions, branches, big tool results)
into a cache directory outside the repository (default ~/.cache/occd-bench-scan), then reused. The ledger and
occd's own cache live in a fresh temporary OCCD_HOME on every run.

    .venv/bin/python bench/bench_scan.py                  # 100 x 50, ~2 GB (first build: a few minutes)
    .venv/bin/python bench/bench_scan.py --agents 10      # smaller

Figures: wall time of each cycle, the bytes the scan code counted as read (`bytesRead`), and, as an
independent check, the bytes this process read through read(2) (Linux /proc/self/io `rchar`) minus the
sessions.json indexes and occd's own scan cache (which are not transcript bytes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WINDOW = 200_000
MARKER = "bench-scan.json"


def _sizes(agents: int, sessions: int, total: int, seed: int = 7) -> list[int]:
    rnd = random.Random(seed)
    raw = [math.exp(rnd.gauss(0, 1.1)) for _ in range(agents * sessions)]
    scale = total / sum(raw)
    return [max(6_000, min(12_000_000, int(r * scale))) for r in raw]


def _gen_agent(args) -> tuple[str, int, int]:
    root, a, sizes, seed0 = args
    from occd.openclaw import new_session_id
    from occd.transcript import synth

    sdir = Path(root) / "agents" / f"agent{a:03d}" / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    index = {}
    total = 0
    old = time.time() - 2 * 86400
    for i, size in enumerate(sizes):
        seed = seed0 + i
        rnd = random.Random(seed)
        info = synth.generate_transcript(
            sdir, session_id=new_session_id(), seed=seed, target_bytes=size, tools_per_turn=rnd.choice((1, 2, 3)),
            thinking=rnd.random() < 0.3, compactions=rnd.choice((0, 0, 0, 1, 2)) if size > 200_000 else 0,
            branch=rnd.random() < 0.1 and size > 100_000, big_results=rnd.random() < 0.2, images=rnd.random() < 0.05)
        os.utime(info.path, (old, old))
        total += info.size
        index[f"agent:agent{a:03d}:s{i}"] = {
            "sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000),
            "compactionCount": rnd.choice((0, 0, 1, 3)), "model": "claude-opus-4-6", "modelProvider": "anthropic",
            "chatType": "direct"}
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return f"agent{a:03d}", len(sizes), total


def build(root: Path, agents: int, sessions: int, total_bytes: int, workers: int) -> dict:
    import shutil

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "openclaw.json").write_text(json.dumps(
        {"models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": WINDOW}]}}}}))
    sizes = _sizes(agents, sessions, total_bytes)
    jobs = [(str(root), a, sizes[a * sessions:(a + 1) * sessions], 1000 + a * sessions) for a in range(agents)]
    t0 = time.perf_counter()
    total = 0
    with ProcessPoolExecutor(max_workers=workers) as ex:
        for name, n, b in ex.map(_gen_agent, jobs):
            total += b
            print(f"\r  generated {name} ({total / 1e9:.2f} GB)", end="", flush=True)
    print()
    meta = {"agents": agents, "sessions": sessions, "target": total_bytes, "bytes": total,
            "files": agents * sessions, "buildSeconds": round(time.perf_counter() - t0, 1)}
    (root / MARKER).write_text(json.dumps(meta))
    return meta


def rchar() -> int | None:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path.home() / ".cache" / "occd-bench-scan")
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--gb", type=float, default=2.0, help="total transcript bytes to generate (GB)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quiet-runs", type=int, default=5)
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()

    root = args.root.expanduser()
    want = {"agents": args.agents, "sessions": args.sessions, "target": int(args.gb * 1e9)}
    meta = None
    if (root / MARKER).exists() and not args.rebuild:
        meta = json.loads((root / MARKER).read_text())
        if {k: meta.get(k) for k in want} != want:
            meta = None
    if meta is None:
        print(f"building {args.agents} x {args.sessions} transcripts (~{args.gb:g} GB) in {root} ...")
        meta = build(root, args.agents, args.sessions, want["target"], args.workers)
    files = sorted(root.glob("agents/*/sessions/*.jsonl"))
    on_disk = sum(p.stat().st_size for p in files)
    index_bytes = sum(p.stat().st_size for p in root.glob("agents/*/sessions/sessions.json"))
    print(f"state: {root}: {len(files)} transcripts, {on_disk / 1e9:.2f} GB "
          f"(blocks on disk {sum(p.stat().st_blocks for p in files) * 512 / 1e9:.2f} GB), "
          f"indexes {index_bytes / 1e6:.1f} MB")

    home = Path(tempfile.mkdtemp(prefix="occd-bench-home-"))
    os.environ["OCCD_HOME"] = str(home)
    os.environ["OPENCLAW_STATE_DIR"] = str(root)

    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.jobs import scanstate
    from occd.ledger import Ledger

    settings = load_settings({"state_dir": str(root), "policy": {"mode": "observe"}})

    def cycle(ctx, names=("scan",)):
        r0 = rchar()
        t0 = time.perf_counter()
        res = run_cycle(ctx, list(names))
        wall = time.perf_counter() - t0
        r1 = rchar()
        for n, (ok, s) in res.items():
            if not ok:
                raise SystemExit(f"{n} failed: {s}")
        cache_bytes = scanstate._cache_path().stat().st_size if scanstate._cache_path().exists() else 0
        return wall, res, (r1 - r0) if r0 is not None and r1 is not None else None, cache_bytes

    def fmt_io(io, cache_bytes, loaded_cache):
        if io is None:
            return "rchar n/a"
        other = index_bytes + (cache_bytes if loaded_cache else 0)
        return f"read(2) {io / 1e6:.1f} MB, of which transcripts ~{max(0, io - other) / 1e6:.2f} MB"

    with Ledger.open() as led:
        ctx = JobContext(settings=settings, ledger=led, state_dir=root)
        wall, res, io, cb = cycle(ctx)
        s = res["scan"][1]
        print(f"first scan:   {wall:6.2f} s  sessions {s['sessions']}, errors {s['errors']}, bytesRead "
              f"{s['bytesRead'] / 1e6:.1f} MB = {100 * s['bytesRead'] / on_disk:.2f}% of the transcripts; "
              f"{fmt_io(io, cb, False)}; scan cache {cb / 1e6:.2f} MB")
        first_pct = 100 * s["bytesRead"] / on_disk

        quiet = []
        for _ in range(args.quiet_runs):
            wall, res, io, cb = cycle(ctx)
            s = res["scan"][1]
            quiet.append((wall, s["bytesRead"], io))
        walls = [q[0] for q in quiet]
        print(f"quiet scan (same process, x{len(quiet)}): median {statistics.median(walls):.3f} s, best "
              f"{min(walls):.3f} s; bytesRead {max(q[1] for q in quiet)}; read(2) "
              f"{max(q[2] or 0 for q in quiet) / 1e6:.1f} MB (indexes {index_bytes / 1e6:.1f} MB)")

        wall, res, io, cb = cycle(ctx, ("scan", "apply"))
        print(f"quiet cycle scan+apply (observe mode): {wall:.3f} s; apply {res['apply'][1]}")

        # a restarted daemon: the scan cache comes from disk
        ctx2 = JobContext(settings=settings, ledger=led, state_dir=root)
        wall, res, io, cb = cycle(ctx2)
        s = res["scan"][1]
        print(f"quiet scan after a restart (cache loaded from disk): {wall:.3f} s; bytesRead {s['bytesRead']}; "
              f"{fmt_io(io, cb, True)}")
        restart_wall, restart_bytes = wall, s["bytesRead"]

        # 50 sessions got a reply: only the appended bytes are read
        rnd = random.Random(3)
        appended = 0
        touched = rnd.sample(files, min(50, len(files)))
        for i, p in enumerate(touched):
            line = json.dumps({"type": "message", "id": f"bench{i:04x}", "parentId": None,
                               "timestamp": "2026-11-22T10:00:00.000Z",
                               "message": {"role": "assistant", "content": [{"type": "text", "text": "ok " * 200}],
                                           "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                                                     "totalTokens": 123_456}, "stopReason": "stop",
                                           "timestamp": 1}}) + "\n"
            st = p.stat()
            with open(p, "a") as fh:
                fh.write(line)
            appended += len(line)
            os.utime(p, (st.st_atime, st.st_mtime + 1))
        try:
            wall, res, io, cb = cycle(ctx)
            s = res["scan"][1]
            print(f"scan after 50 replies: {wall:.3f} s; changed {s['changed']}, bytesRead {s['bytesRead']} "
                  f"(appended {appended})")
        finally:  # put the state back as it was, so the next run starts from the same bytes
            for p in touched:
                data = p.read_bytes()
                cut = data.rstrip(b"\n").rfind(b"\n") + 1
                st = p.stat()
                with open(p, "r+b") as fh:
                    fh.truncate(cut)
                os.utime(p, (st.st_atime, st.st_mtime - 1))

    med = statistics.median(walls)
    ok_quiet = med < 0.5 and all(q[1] == 0 for q in quiet) and restart_bytes == 0
    print(f"\ntargets: quiet cycle < 0.5 s with no transcript bytes read: {'PASS' if ok_quiet else 'FAIL'} "
          f"({med:.3f} s in process, {restart_wall:.3f} s after a restart); first scan < 5% of the bytes: "
          f"{'PASS' if first_pct < 5 else 'FAIL'} ({first_pct:.2f}%)")
    import shutil

    shutil.rmtree(home, ignore_errors=True)
    return 0 if ok_quiet and first_pct < 5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
