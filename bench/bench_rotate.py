"""Benchmark: rotating a ~50 MB session end to end (issue 5), against copying the file once, in the same run.

    .venv/bin/python bench/bench_rotate.py [--size-mb 50] [--repeat 3]

Builds an isolated OpenClaw file-era state in a temp dir (a synthetic transcript of the given size with 3
compactions, sessions.json, a workspace with MEMORY.md), then measures, alternating, best of --repeat:
  copy:   shutil.copyfile of the transcript + fsync (what an archive must cost at least);
  rotate: occd.rotation.rotate.rotate_session — plan (tail read, seed), the archive (a hard link on the same
          filesystem), new transcript, index switch, removal of the original, every ledger transaction — on a
          fresh copy of the state;
  rotate (copy): the same where hard links are impossible, so the archive is a verified full copy.
Prints the times and the ratios (target < 2x).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

KEY = "agent:main:main"


def build(root: Path, size_mb: int) -> Path:
    from occd.transcript.synth import generate_transcript

    sessions = root / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    info = generate_transcript(sessions, target_bytes=size_mb * 1024 * 1024, compactions=3, plain_every=3)
    old = time.time() - 3600
    os.utime(info.path, (old, old))
    (sessions / "sessions.json").write_text(json.dumps({KEY: {
        "sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000), "compactionCount": 3,
        "model": "claude-opus-4-6", "modelProvider": "anthropic"}}, indent=2))
    ws = root / "workspace"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n" + "- a fact worth keeping\n" * 400)
    return info.path


def time_copy(src: Path, dst: Path) -> float:
    t0 = time.perf_counter()
    shutil.copyfile(src, dst)
    with open(dst, "rb+") as fh:
        os.fsync(fh.fileno())
    dt = time.perf_counter() - t0
    dst.unlink()
    return dt


def time_rotate(template: Path, work: Path, *, copy: bool = False) -> float:
    import occd.actions.archive as archive
    from occd.rotation.rotate import rotate_session
    from occd.config import load_settings
    from occd.ledger import Ledger

    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(template, work)
    idx_path = work / "agents" / "main" / "sessions" / "sessions.json"
    idx = json.loads(idx_path.read_text())
    idx[KEY]["sessionFile"] = str(idx_path.parent / Path(idx[KEY]["sessionFile"]).name)  # the copy's own file
    idx_path.write_text(json.dumps(idx, indent=2))
    old = time.time() - 3600
    os.utime(idx[KEY]["sessionFile"], (old, old))
    os.environ["OPENCLAW_STATE_DIR"] = str(work)
    os.environ["OCCD_HOME"] = str(work / "occd-home")
    s = load_settings({"state_dir": str(work)})
    led = Ledger.open()  # opened (and migrated) outside the timing, as in the daemon
    real_link = archive._link
    if copy:
        def no_link(a, b):
            raise OSError(18, "no hard links here")
        archive._link = no_link
    try:
        t0 = time.perf_counter()
        res = rotate_session(s, ref=KEY, ledger=led)
        dt = time.perf_counter() - t0
    finally:
        archive._link = real_link
        led.close()
    assert res["state"] == "COOLDOWN", res
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="occd-bench-rotate-") as d:
        d = Path(d)
        os.environ["HOME"] = str(d / "home")
        template = d / "template"
        src = build(template, a.size_mb)
        size = src.stat().st_size
        copies, rotations, copied = [], [], []
        for _ in range(a.repeat):
            copies.append(time_copy(src, d / "copy.jsonl"))
            rotations.append(time_rotate(template, d / "work"))
            copied.append(time_rotate(template, d / "work", copy=True))
        c, r, rc = min(copies), min(rotations), min(copied)
        print(f"transcript:     {size / 1e6:.1f} MB")
        print(f"copy once:      {c * 1000:8.1f} ms  (best of {a.repeat})")
        print(f"rotate:         {r * 1000:8.1f} ms  ratio {r / c:5.2f}x  (target < 2x; archive by hard link)")
        print(f"rotate (copy):  {rc * 1000:8.1f} ms  ratio {rc / c:5.2f}x  (no hard links: verified full copy)")


if __name__ == "__main__":
    main()
