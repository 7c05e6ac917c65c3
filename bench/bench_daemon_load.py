"""Benchmark: the daemon on a workstation for minutes (issue 29 point 8): its CPU per hour, its memory, and the
time from a run's end to its decision, alone and with a busy neighbour.

Starts `occd run` (its defaults, observe mode) on the workstation state of bench_workstation.py (built once and
cached in --root) and plays OpenClaw's writes from this process, as a gateway does:

- a turn: an agent takes its session's run lock, appends a few transcript lines over about a second, lets the
  lock go (the run's end) and rewrites its sessions.json (atomically, `updatedAt` moved on); --agents agents take
  turns round the clock, one turn every --every seconds;
- phase "turns": those turns only; phase "neighbour": the same, while one more agent writes a line every 0.2 s
  under its run lock the whole time (a long tool loop).

Per phase it prints the daemon's CPU seconds (from /proc, scaled to an hour and as a share of one core), its
resident memory (start, largest, end), and the run-end -> decision latency the daemon measured itself (its
histogram in status.json, one per run's settled transcript: how many within the settle time + 2 s, and the
mean); the neighbour's ratio to the turns-only phase says whether a neighbour starves the others.

    .venv/bin/python bench/bench_daemon_load.py                          # 50 x 100, 2 + 2 minutes
    .venv/bin/python bench/bench_daemon_load.py --minutes 30 --phases turns   # RSS over 30 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

LINE = ('{"type":"custom","customType":"bench","data":{"n":%d},"id":"%08x","parentId":null,'
        '"timestamp":"%s"}\n')
TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


class Agent:
    """One agent of the state whose newest session takes turns."""

    def __init__(self, sdir: Path):
        self.sdir = sdir
        self.index_path = sdir / "sessions.json"
        index = json.loads(self.index_path.read_text())
        self.key, entry = max(index.items(), key=lambda kv: kv[1].get("updatedAt") or 0)
        self.sid = entry["sessionId"]
        self.path = sdir / f"{self.sid}.jsonl"
        self.n = 0

    def _lock(self) -> Path:
        p = self.sdir / f"{self.sid}.jsonl.lock"
        p.write_text(json.dumps({"pid": os.getpid(), "createdAt": _iso(time.time())}))
        return p

    def _append(self) -> None:
        self.n += 1
        with open(self.path, "a") as fh:
            fh.write(LINE % (self.n, (id(self) + self.n) & 0xFFFFFFFF, _iso(time.time())))

    def _touch_index(self) -> None:
        index = json.loads(self.index_path.read_text())
        index[self.key]["updatedAt"] = int(time.time() * 1000)
        tmp = self.index_path.with_name(f"sessions.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, self.index_path)

    def turn(self, lines: int = 3, over_s: float = 1.0) -> float:
        """One run: lock, a few lines, unlock (returns when the run ended), then the index."""
        lock = self._lock()
        for _ in range(lines):
            self._append()
            time.sleep(over_s / lines)
        lock.unlink()
        ended = time.time()
        self._touch_index()
        return ended

    def busy(self, stop: threading.Event, every: float = 0.2) -> None:
        lock = self._lock()
        try:
            while not stop.is_set():
                self._append()
                stop.wait(every)
        finally:
            lock.unlink(missing_ok=True)


def latency(status_path: Path) -> dict | None:
    try:
        return json.loads(status_path.read_text())["metrics"]["runEndToDecision"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cycled(status_path: Path, job: str | None = None) -> bool:
    """The daemon's first cycle is done (and, with `job`, that job's first run)."""
    try:
        doc = json.loads(status_path.read_text())
    except (OSError, ValueError):
        return False
    done = (doc.get("jobs") or {}).get(job) if job else {}
    return bool(doc.get("lastCycle")) and done is not None and not done.get("yielded")


def hist_delta(a: dict | None, b: dict | None) -> tuple[list[float], list[int], float]:
    if b is None:
        return [], [], 0.0
    counts = [y - (a["counts"][i] if a else 0) for i, y in enumerate(b["counts"])]
    return b["buckets"], counts, b["sum"] - (a["sum"] if a else 0.0)


def phase(name: str, pid: int, agents: list[Agent], neighbour: Agent | None, seconds: float, every: float,
          status_path: Path) -> dict:
    stop = threading.Event()
    t = None
    if neighbour is not None:
        t = threading.Thread(target=neighbour.busy, args=(stop,), daemon=True)
        t.start()
    h0, c0, rss = latency(status_path), proc_cpu(pid), [proc_rss_mb(pid)]
    t0 = time.monotonic()
    turns, i = 0, 0
    while time.monotonic() - t0 < seconds:
        start = time.monotonic()
        agents[i % len(agents)].turn()
        turns, i = turns + 1, i + 1
        rss.append(proc_rss_mb(pid))
        time.sleep(max(0.0, every - (time.monotonic() - start)))
    stop.set()
    if t is not None:
        t.join(5)
    time.sleep(8)  # the last run's decision
    took = time.monotonic() - t0
    cpu = proc_cpu(pid) - c0
    bounds, counts, total = hist_delta(h0, latency(status_path))
    return {"phase": name, "seconds": took, "turns": turns, "cpu": cpu, "rss": rss + [proc_rss_mb(pid)],
            "bounds": bounds, "counts": counts, "sum": total}


def main(argv=None) -> int:
    from bench_workstation import ensure_state

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path.home() / ".cache" / "occd-bench-workstation")
    ap.add_argument("--state-agents", type=int, default=50)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--mean-kb", type=float, default=68)
    ap.add_argument("--agents", type=int, default=20, help="agents taking turns")
    ap.add_argument("--every", type=float, default=3.0, help="seconds between turns (any agent)")
    ap.add_argument("--minutes", type=float, default=2.0, help="per phase")
    ap.add_argument("--phases", default="turns,neighbour")
    ap.add_argument("--spy", help="the py-spy command: sample the daemon's threads during the phases")
    ap.add_argument("--spy-out", type=Path, default=Path("daemon-profile.txt"), help="py-spy's collapsed stacks")
    a = ap.parse_args(argv)
    state = ensure_state(a.root.expanduser(), a.state_agents, a.sessions, a.mean_kb)
    work = Path(tempfile.mkdtemp(prefix="occd-bench-load-"))
    print(f"working copy and the daemon's OCCD_HOME: {work}", flush=True)
    copy = work / ".openclaw"  # the turns change the state: a copy, so the cached one stays as built
    subprocess.run(["cp", "-a", str(state), str(copy)], check=True)
    for index in copy.glob("agents/*/sessions/sessions.json"):  # its absolute sessionFiles name the copy's files
        index.write_text(index.read_text().replace(str(state), str(copy)))
    home = work / "home"
    env = dict(os.environ, OCCD_HOME=str(home), OPENCLAW_STATE_DIR=str(copy), NO_COLOR="1")
    env.pop("XDG_RUNTIME_DIR", None)
    dirs = sorted((copy / "agents").iterdir())
    agents = [Agent(d / "sessions") for d in dirs[:a.agents]]
    neighbour = Agent(dirs[a.agents] / "sessions")
    os.environ.update(OCCD_HOME=str(home))
    from occd.runtime.statusfile import status_file

    status_path = status_file()
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}  state: {len(dirs)} agents, "
          f"{len(list(copy.glob('agents/*/sessions/*.jsonl')))} sessions; {a.agents} agents take turns, one every "
          f"{a.every:g} s, {a.minutes:g} min per phase; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
          flush=True)
    proc = subprocess.Popen([sys.executable, "-m", "occd", "run"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not _cycled(status_path) and time.monotonic() < deadline:  # its first cycle (the whole history)
            if proc.poll() is not None:
                print(proc.stderr.read().decode()[-2000:])
                return 1
            time.sleep(0.5)
        first_cpu = proc_cpu(proc.pid)
        print(f"started: first cycle done, {first_cpu:.1f} s CPU, {proc_rss_mb(proc.pid):.0f} MB resident", flush=True)
        while not _cycled(status_path, "score") and time.monotonic() < deadline + 300:
            time.sleep(1)  # the score job's first run (a minute after the start, in pieces) rates the whole history: once
        print(f"warmed up: the first score run done, {proc_cpu(proc.pid):.1f} s CPU in all", flush=True)
        time.sleep(5)
        if a.spy:  # py-spy (pip install py-spy) samples every thread of the daemon while the phases run
            subprocess.Popen([a.spy, "record", "-p", str(proc.pid), "-o", str(a.spy_out), "--format", "raw",
                              "-d", str(int(a.minutes * 60 * len(a.phases.split(",")))), "-r", "50"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = []
        for name in a.phases.split(","):
            rows.append(phase(name, proc.pid, agents, neighbour if name == "neighbour" else None,
                              a.minutes * 60, a.every, status_path))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    settle = 3.0  # max(daemon.settle_seconds 2, idle_seconds 3): what the daemon waits after a run's last write
    print(f"{'phase':<10} {'turns':>5}  {'CPU s':>6}  {'CPU s/h':>7}  {'core %':>6}  {'RSS MB start/max/end':>20}  "
          f"{'decided':>7}  {'<= settle+2 s':>13}  {'mean s':>6}")
    means = {}
    for r in rows:
        n = sum(r["counts"])
        within = sum(c for b, c in zip(r["bounds"] + [float("inf")], r["counts"]) if b <= settle + 2.0)
        mean = r["sum"] / n if n else float("nan")
        means[r["phase"]] = mean
        per_h = r["cpu"] * 3600 / r["seconds"]
        print(f"{r['phase']:<10} {r['turns']:>5}  {r['cpu']:6.2f}  {per_h:7.0f}  {100 * r['cpu'] / r['seconds']:5.1f}%  "
              f"{r['rss'][0]:6.0f}/{max(r['rss']):5.0f}/{r['rss'][-1]:5.0f}  {n:>7}  {within:>6} ({100 * within / max(n, 1):3.0f}%)"
              f"  {mean:6.2f}")
    if "turns" in means and "neighbour" in means:
        print(f"run end -> decision with the neighbour / without: {means['neighbour'] / means['turns']:.2f}x (mean)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
