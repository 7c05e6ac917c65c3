"""Relevance scoring at scale: 500 synthetic sessions rated through the real path (worker process, litellm,
an OpenAI-compatible fake server on 127.0.0.1 in its own process that logs every request).

Checks: model calls ≤ ceil(500 / batch_size); prompt tokens per session < 300 (the server's count, tiktoken
when available, includes the system prompt); a second run with nothing changed makes zero calls; the
calling process (the daemon's side: the score job) stays small — its resident memory is printed, and litellm
is never imported into it.

    .venv/bin/python bench/bench_score.py [--sessions 500] [--batch 25]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("webhook handler retry queue billing invoice export login redirect cache eviction schema migration "
         "metrics dashboard flaky test deploy pipeline rate limiter search index payment refund email template "
         "upload resize thumbnail session token refresh audit log permissions report csv parser").split()


def rss_kb() -> tuple[int, int]:
    cur = peak = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return cur, peak


def make_state(home: Path, n: int, now: float) -> Path:
    import random

    rnd = random.Random(7)
    state = home / ".openclaw"
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    index = {}
    for i in range(n + 1):
        sid = f"bench-{i:04d}"
        mtime = now - (60 if i == 0 else 86400 * (1 + rnd.random() * 40))
        users = [" ".join(rnd.choice(WORDS) for _ in range(40)) + f" (ticket {i})" for _ in range(6)]
        lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-10-01T08:00:00.000Z", "cwd": str(home)}]
        parent = None
        for j, u in enumerate(users):
            for role, content in (("user", u), ("assistant", [{"type": "text", "text": "ok " * 200}])):
                eid = f"{len(lines):08x}"
                m = {"role": role, "content": content, "timestamp": 1790000000000 + j}
                if role == "assistant":
                    m["usage"] = {"input": 100, "output": 50, "totalTokens": 5000 + j}
                lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-10-01T08:00:01.000Z",
                              "message": m})
                parent = eid
        p = sdir / f"{sid}.jsonl"
        p.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in lines))
        os.utime(p, (mtime, mtime))
        index[f"agent:main:s{i}"] = {"sessionId": sid, "sessionFile": str(p), "updatedAt": int(mtime * 1000)}
    (sdir / "sessions.json").write_text(json.dumps(index))
    return state


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--batch", type=int, default=25)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="occd-bench-score-"))
    home = tmp / "home"
    home.mkdir()
    os.environ.update(HOME=str(home), OCCD_HOME=str(tmp / "occd"), OPENCLAW_STATE_DIR=str(home / ".openclaw"))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(k, None)
    now = time.time()
    t0 = time.monotonic()
    state = make_state(home, a.sessions, now)
    print(f"fixture: {a.sessions} idle sessions + 1 active in {time.monotonic() - t0:.1f} s")

    log = tmp / "requests.jsonl"
    srv = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_llm_server.py"), "--log", str(log),
                            "--rules", json.dumps([["webhook handler", 0.7], ["billing", 0.2]])],
                           stdout=subprocess.PIPE, text=True)
    try:
        base = srv.stdout.readline().strip()
        sys.path.insert(0, str(ROOT))
        from occd.config import LLMSettings, load_settings
        from occd.jobs.score import score_agents
        from occd.ledger import Ledger
        from occd.relevance.llm import run_worker

        worker_times: list[float] = []
        worker_rss: list[int] = []

        def timed_worker(req, limit):
            t = time.monotonic()
            try:
                ans = run_worker(req, limit)
                worker_rss.append(ans.get("rss_kb") or 0)
                return ans
            finally:
                worker_times.append(time.monotonic() - t)

        s = load_settings()
        s.llm = LLMSettings(model="openai/gpt-4o-mini", api_base=base, batch_size=a.batch, timeout_seconds=10)
        s.policy.min_idle_minutes = 10
        base_rss = rss_kb()
        results = []
        with Ledger.open() as led:
            for run in (1, 2, 3):
                t = time.monotonic()
                rep = score_agents(s, led, state, now, worker=timed_worker)
                secs = time.monotonic() - t
                sm = rep.summary()
                ag = rep.agents[0]
                results.append((run, sm, secs))
                print(f"run {run}: scored {sm['scored']} sessions, {sm['modelCalls']} model calls, {sm['cached']} cached, "
                      f"method {ag.method}{' (' + ag.reason + ')' if ag.reason else ''}, "
                      f"{sm['archiveCandidates']} archive candidates, {secs:.1f} s; parent RSS {rss_kb()[0] / 1024:.0f} MB")
            usage = led.llm_usage(0)
        reqs = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    cur, peak = rss_kb()
    calls1 = results[0][1]["modelCalls"]
    limit = math.ceil(a.sessions / a.batch)
    per_session = usage["prompt_tokens"] / a.sessions
    if worker_times:
        print(f"worker process: {len(worker_times)} run(s), {sum(worker_times):.1f} s (litellm import + all calls), "
              f"peak RSS {max(worker_rss) / 1024:.0f} MB (in the worker, gone when it exits)")
    print(f"requests at the server: {len(reqs)}; limit ceil({a.sessions}/{a.batch}) = {limit}")
    print(f"prompt tokens: {usage['prompt_tokens']} total, {per_session:.0f} per session (limit 300); "
          f"completion tokens {usage['completion_tokens']}; cost ${usage['cost_usd']:.5f} (bundled price map)")
    print(f"parent RSS: {base_rss[0] / 1024:.0f} MB before scoring, {cur / 1024:.0f} MB after, peak {peak / 1024:.0f} MB "
          f"(limit 100 MB); litellm imported in parent: {'litellm' in sys.modules}")
    ok = (calls1 <= limit and len(reqs) <= limit and per_session < 300 and results[1][1]["modelCalls"] == 0
          and results[2][1]["modelCalls"] == 0 and peak < 100 * 1024 and "litellm" not in sys.modules)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
