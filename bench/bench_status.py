"""Benchmark: the ledger queries behind `occd status` on a ledger holding a year of 5-minute observations for
500 sessions (issue 4 target: under 0.5 s).

Taken literally, that is 500 x 105,120 = 52.6 million observation rows: far more than a real year (occd writes
an observation only when a session changed), so it is the worst case, and the default here. The ledger is
built once with the real schema (migrations) and bulk inserts (executemany), then reused: pass --rebuild to
make it again, or --days/--sessions for a smaller one. Besides the rows, the year has one scan run per
interval, a few actions per session per week, backups, breakers and rotations.

    .venv/bin/python bench/bench_status.py                 # full size (first build: a few minutes, ~4 GB)
    .venv/bin/python bench/bench_status.py --days 30       # quicker

Prints the build figures and, for each status query, the best and median of several runs (warm cache) and
the first run after opening (cold-ish: the OS page cache may still hold the file).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from occd.ledger import Ledger  # noqa: E402

AGENTS = 10


def build(path: Path, sessions: int, days: float, interval: int, end: float) -> dict:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    Ledger.open(path).close()  # the real schema, through the migrations
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")  # a bulk load: nothing to protect yet
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA cache_size = -400000")
    start = end - days * 86400
    steps = int(days * 86400 // interval)
    t0 = time.perf_counter()
    con.execute("BEGIN")
    for a in range(AGENTS):
        con.execute("INSERT INTO agents VALUES (?, 'file', ?, ?)", (f"agent{a}", start, end))
    con.executemany(
        "INSERT INTO sessions (id, agent_id, session_key, session_id, path, first_seen, last_seen) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        ((i + 1, f"agent{i % AGENTS}", f"agent:agent{i % AGENTS}:chan{i}", f"{i:08x}-0000-7000-8000-000000000000",
          f"/home/u/.openclaw/agents/agent{i % AGENTS}/sessions/{i:08x}.jsonl", start, end)
         for i in range(sessions)))
    con.execute("COMMIT")

    rnd = random.Random(42)

    def rows(pk: int):
        tokens, comp, size, entries = rnd.randint(2_000, 20_000), 0, 10_000, 10
        for k in range(steps):
            t = start + k * interval
            tokens += rnd.randint(0, 900)
            size += rnd.randint(0, 4_000)
            entries += rnd.randint(0, 3)
            if tokens > 180_000:  # compaction
                tokens, comp = rnd.randint(8_000, 20_000), comp + 1
            yield (pk, t, comp, tokens, "usage", 200_000, size, entries, t - rnd.randint(0, interval))

    n = 0
    for pk in range(1, sessions + 1):  # one session's year per transaction: the index is filled in order
        con.execute("BEGIN")
        con.executemany("INSERT INTO observations (session_pk, ts, compaction_count, context_tokens, tokens_source, "
                        "context_window, size, entry_count, last_activity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        rows(pk))
        con.execute("COMMIT")
        n += steps
        if pk % 50 == 0:
            el = time.perf_counter() - t0
            print(f"  {n:,} observations in {el:.0f} s ({n / el:,.0f}/s)", flush=True)
    con.execute("BEGIN")
    con.executemany("INSERT INTO scan_runs (started, duration_s, agents, sessions_seen, sessions_changed, bytes_read, "
                    "errors) VALUES (?, ?, ?, ?, ?, ?, 0)",
                    ((start + k * interval, 0.05, AGENTS, sessions, rnd.randint(0, 40), rnd.randint(0, 10 ** 6))
                     for k in range(steps)))
    kinds = ["strip", "strip", "strip", "edit", "rotate", "archive", "restore"]
    acts = []
    for k in range(int(days * sessions * 3 / 7)):  # about three actions per session per week
        i = rnd.randrange(sessions)
        acts.append((start + rnd.random() * days * 86400, rnd.choice(kinds), f"agent{i % AGENTS}",
                     f"{i:08x}-0000-7000-8000-000000000000", f"agent:agent{i % AGENTS}:chan{i}",
                     rnd.choice(["auto", "manual"]), "strip_at_context_percent", int(rnd.random() < 0.3),
                     '{"messages":45,"size":128000}', '{"messages":38,"size":100352}',
                     rnd.choice(["ok"] * 8 + ["failed", "deferred"])))
    acts.sort()
    con.executemany("INSERT INTO actions (ts, kind, agent_id, session_id, session_key, trigger, policy, dry_run, "
                    "before_json, after_json, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", acts)
    con.executemany("INSERT INTO backups (agent_id, session_id, path, size, created, pruned_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    ((a[2], a[3], f"/b/{j}.backup.jsonl", 100_000, a[0], a[0] + 86400 * 7 if a[0] < end - 86400 * 7
                      else None) for j, a in enumerate(acts) if a[1] in ("strip", "edit")))
    for a in range(AGENTS):
        for kind in ("strip", "rotate"):
            con.execute("INSERT INTO breakers (agent_id, kind, state, failures, updated_at) VALUES (?, ?, 'closed', 0, ?)",
                        (f"agent{a}", kind, end))
    for j in range(int(days * 4)):
        i = rnd.randrange(sessions)
        t = start + rnd.random() * days * 86400
        con.execute("INSERT INTO rotations (agent_id, session_key, old_session_id, new_session_id, state, trigger, "
                    "seed_budget_percent, started, updated, finished) VALUES (?, ?, ?, ?, 'IDLE', 'auto', 15, ?, ?, ?)",
                    (f"agent{i % AGENTS}", f"agent:agent{i % AGENTS}:chan{i}", "old", "new", t, t + 5, t + 5))
    con.execute("INSERT INTO daemon_runs (pid, host, started, heartbeat, last_cycle, next_scan) VALUES "
                "(1, 'bench', ?, ?, ?, ?)", (start, end, end, end + interval))
    con.execute("COMMIT")
    con.execute("ANALYZE")
    con.execute("PRAGMA journal_mode = WAL")
    con.close()
    return {"observations": n, "actions": len(acts), "seconds": time.perf_counter() - t0,
            "bytes": path.stat().st_size}


def status_queries(led: Ledger, now: float) -> dict:
    """What `occd status` asks the ledger (the whole-overview form, plus one session's history)."""
    out = {}
    out["daemon"] = led.latest_daemon_run()
    out["lastScan"] = led.last_scan()
    out["agents"] = led.agents()
    out["sessions"] = led.latest_observations()
    out["actions24h"] = led.action_counts_since(now - 86400)
    out["recentActions"] = led.history(since=now - 86400, limit=50)
    out["breakers"] = led.breakers()
    out["rotations"] = led.rotations(since=now - 7 * 86400, limit=20)
    out["spend"] = led.spend_today(now)
    return out


def session_queries(led: Ledger, agent: str, sid: str, now: float) -> dict:
    """`occd status SESSION`: a year squeezed into a sparkline, its actions and backups."""
    return {"spark": led.series_buckets(agent, sid, since=now - 365 * 86400, until=now, buckets=60),
            "actions": led.history(session=sid, limit=50), "backups": led.backups(agent, sid)}


def timed(fn, runs: int) -> tuple[float, float, float]:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts[0], min(ts), statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--days", type=float, default=365)
    ap.add_argument("--interval", type=int, default=300, help="seconds between observations")
    ap.add_argument("--path", type=Path, default=Path(__file__).resolve().parent / "out" / "bench-status.db")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    a.path.parent.mkdir(parents=True, exist_ok=True)
    end = 1_800_000_000.0
    marker = a.path.with_suffix(".params")
    params = f"{a.sessions} {a.days} {a.interval} {end}"
    if a.rebuild or not a.path.exists() or not marker.exists() or marker.read_text() != params:
        print(f"Building {a.path}: {a.sessions} sessions x {a.days:g} days every {a.interval} s "
              f"= {a.sessions * int(a.days * 86400 // a.interval):,} observations", flush=True)
        info = build(a.path, a.sessions, a.days, a.interval, end)
        marker.write_text(params)
        print(f"Built in {info['seconds']:.0f} s: {info['observations']:,} observations, {info['actions']:,} actions, "
              f"{info['bytes'] / 2**30:.2f} GiB")
    t = time.perf_counter()
    led = Ledger.open(a.path)
    open_s = time.perf_counter() - t
    with led.engine.connect() as c:
        n_obs = c.exec_driver_sql("SELECT MAX(id) FROM observations").scalar()
    print(f"Ledger: {a.path} ({a.path.stat().st_size / 2**30:.2f} GiB, ~{n_obs:,} observations)")
    print(f"Open + schema check (imports included): {open_s * 1000:.0f} ms")
    first, best, med = timed(lambda: status_queries(led, end), a.runs)
    res = status_queries(led, end)
    print(f"occd status queries ({len(res['sessions'])} sessions, {sum(sum(sum(o.values()) for o in k.values()) for k in res['actions24h'].values())} actions in 24 h): "
          f"first {first * 1000:.0f} ms, best {best * 1000:.0f} ms, median {med * 1000:.0f} ms")
    s0 = res["sessions"][0]
    first2, best2, med2 = timed(lambda: session_queries(led, s0["agent"], s0["session_id"], end), a.runs)
    sq = session_queries(led, s0["agent"], s0["session_id"], end)
    print(f"occd status SESSION queries ({sum(b['n'] for b in sq['spark']):,} observations into {len(sq['spark'])} "
          f"buckets): first {first2 * 1000:.0f} ms, best {best2 * 1000:.0f} ms, median {med2 * 1000:.0f} ms")
    worst = max(open_s + first, open_s + first2)
    verdict = "PASS" if worst < 0.5 else "FAIL"
    print(f"{verdict}: worst open + first query set {worst * 1000:.0f} ms (target < 500 ms)")
    led.close()
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
