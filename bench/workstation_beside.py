"""The workstation around a closed loop (issue 29): other agents' history, and a busy agent beside the loop.

For ../shared/closed-loop/run.sh's BEFORE and BESIDE (the loop's own agent and openclaw.json are left alone):

    BEFORE='.venv/bin/python bench/workstation_beside.py fill "$OPENCLAW_STATE_DIR" --agents 50 --sessions 100'
    BESIDE='exec .venv/bin/python bench/workstation_beside.py busy "$OPENCLAW_STATE_DIR"'

- fill: agents agent0000... with a month of sessions each (tests/statefactory.py's build_workstation: sizes spread
  log-normally, last used from a minute to 30 days ago, a quarter compacted some time);
- busy: one more agent ("busy") whose session takes OpenClaw's run lock and appends a transcript line every
  --every seconds until it is stopped (a long tool loop, a chatty cron agent), rewriting its sessions.json every
  --index-every seconds as OpenClaw does after a run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LINE = ('{"type":"custom","customType":"busy","data":{"n":%d},"id":"%08x","parentId":null,'
        '"timestamp":"%s"}\n')


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def fill(state: Path, agents: int, sessions: int, mean_kb: float) -> None:
    from tests.statefactory import build_workstation

    t0 = time.perf_counter()
    info = build_workstation(state, agents, sessions, mean_bytes=int(mean_kb * 1000), write_config=False)
    info["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(info))


def busy(state: Path, every: float, index_every: float) -> None:
    from occd.openclaw import new_session_id

    sdir = state / "agents" / "busy" / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    sid = new_session_id()
    path = sdir / f"{sid}.jsonl"
    path.write_text(json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": _iso(time.time()),
                                "cwd": str(state)}) + "\n")
    index_path = sdir / "sessions.json"
    key = "agent:busy:main"

    def write_index() -> None:
        index = {key: {"sessionId": sid, "sessionFile": str(path), "updatedAt": int(time.time() * 1000)}}
        tmp = index_path.with_name(f"sessions.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, index_path)

    write_index()
    lock = sdir / f"{sid}.jsonl.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": _iso(time.time())}))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    n, last_index = 0, time.monotonic()
    try:
        while not stop:
            n += 1
            with open(path, "a") as fh:
                fh.write(LINE % (n, n, _iso(time.time())))
            if time.monotonic() - last_index >= index_every:
                write_index()
                last_index = time.monotonic()
            time.sleep(every)
    finally:
        lock.unlink(missing_ok=True)
        print(json.dumps({"lines": n}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fill")
    f.add_argument("state", type=Path)
    f.add_argument("--agents", type=int, default=50)
    f.add_argument("--sessions", type=int, default=100)
    f.add_argument("--mean-kb", type=float, default=68)
    b = sub.add_parser("busy")
    b.add_argument("state", type=Path)
    b.add_argument("--every", type=float, default=0.2)
    b.add_argument("--index-every", type=float, default=5.0)
    a = ap.parse_args()
    if a.cmd == "fill":
        fill(a.state, a.agents, a.sessions, a.mean_kb)
    else:
        busy(a.state, a.every, a.index_every)


if __name__ == "__main__":
    main()
