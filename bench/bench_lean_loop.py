"""The closed loop (../shared/closed-loop/run.sh) with occd's lean view: a real OpenClaw agent doing tool-heavy turns
through its gateway (the gateway loads context-engine plugins; `agent --local` does not), with or without occd.

    .venv/bin/python bench/bench_lean_loop.py lean /tmp/loop-lean     # occd lean enable + `occd run --act`
    .venv/bin/python bench/bench_lean_loop.py none /tmp/loop-none     # OpenClaw alone, same gateway path

Prints one JSON line with run.sh's figures (compactions in the agent's SQLite store, read-only; the user's
questions the model still sees at the end; recent_results_intact: how many of the newest 5 tool results in the
last request still hold the file's text) plus, for the lean arm, the plugin's counts and occd's lean actions.
Environment as run.sh: RELEASE [2026.9.6] TURNS [24] DOC_WORDS [3000] WINDOW [96000] GAP_S [7]; PORT [18720]
(the model server; the gateway uses PORT+1). occd runs with its defaults except the knobs that let the daemon
act within a short gap (OCCD_IDLE_SECONDS=1, OCCD_POLICY__MIN_IDLE_MINUTES=0, scan every 5 s).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"  # the tests' own kit: installer, scripted model server, OpenClaw config
sys.path.insert(0, str(E2E))
import install  # noqa: E402

OCCD = [sys.executable, "-m", "occd"]


def setup(release: str, home: Path, port: int) -> tuple[dict, int]:
    """An isolated OpenClaw home talking to the scripted model (usage by size), as tests/e2e_harness.py makes it."""
    try:
        oc, node_bin = install.openclaw(release)
    except install.InstallError as e:
        sys.exit(f"setup failed: {e}")
    state, workspace = home / ".openclaw", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FAKE_USAGE": "size", "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(home), "OPENCLAW_STATE_DIR": str(state), "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json"),
           "NO_COLOR": "1", "OPENCLAW_NO_UPDATE_CHECK": "1", "FAKE_LOG": str(home / "model-requests.jsonl"),
           "OC": str(oc)}
    (state / "openclaw.json").write_text((E2E / "openclaw.json").read_text()
                                         .replace("WORKSPACE", str(workspace)).replace("MODEL_PORT", str(port)))
    server = subprocess.Popen([sys.executable, str(E2E / "fake_model_server.py"), str(port), env["FAKE_LOG"]],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return env, server.pid


def descendants(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [x for c in map(int, kids) for x in (c, *descendants(c))]


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    for pid in [proc.pid, *descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> None:
    arm, work = sys.argv[1], Path(sys.argv[2])
    assert arm in ("lean", "none"), "arm: lean | none"
    release = os.environ.get("RELEASE", "2026.9.6")
    turns, words = int(os.environ.get("TURNS", 24)), int(os.environ.get("DOC_WORDS", 3000))
    window, gap = int(os.environ.get("WINDOW", 96000)), float(os.environ.get("GAP_S", 7))
    port = int(os.environ.get("PORT", 18720))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env, fake_pid = setup(release, work / "home", port)
    env.update({"OCCD_HOME": str(work / "occd"), "OCCD_OPENCLAW_BIN": env["OC"], "OCCD_IDLE_SECONDS": "1",
                "OCCD_POLICY__MIN_IDLE_MINUTES": "0", "OCCD_DAEMON__SCAN_INTERVAL_SECONDS": "5",
                "OCCD_POLICY__MODE": "act", "PYTHONPATH": str(ROOT)})
    cfg_path = Path(env["OPENCLAW_CONFIG_PATH"])
    cfg = json.loads(cfg_path.read_text())
    cfg["models"]["providers"]["fake"]["models"][0]["contextWindow"] = window
    cfg["gateway"]["port"] = port + 1
    cfg_path.write_text(json.dumps(cfg, indent=2))
    ws = Path(env["HOME"]) / "workspace"
    rnd = random.Random(7)
    vocab = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud ember".split()
    for i in range(1, turns + 1):
        (ws / f"doc{i}.txt").write_text(" ".join(rnd.choice(vocab) for _ in range(words)) + "\n")
    oc = env["OC"]

    def run(*args, timeout=600):
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)

    gw = daemon = None
    try:
        if arm == "lean":
            p = run(*OCCD, "lean", "enable", "--yes", "--json")
            if p.returncode:
                sys.exit(f"occd lean enable failed: {p.stderr[-500:]}")
        run(oc, "doctor", "--fix", "--non-interactive", timeout=600)  # state migrations before the gateway's start-up clock
        for attempt in range(3):  # a loaded machine can time OpenClaw's start-up out: try again
            gw = subprocess.Popen([oc, "gateway", "run", "--port", str(port + 1)], env=env, stdin=subprocess.DEVNULL,
                                  stdout=open(work / "gateway.log", "ab"), stderr=subprocess.STDOUT)
            up = False
            for _ in range(120):
                if gw.poll() is not None:
                    break
                if run(oc, "gateway", "call", "health", "--json", timeout=60).returncode == 0:
                    up = True
                    break
                time.sleep(2)
            if up:
                break
            stop(gw)
            # a start-up that timed out can leave "run openclaw doctor --fix" behind
            run(oc, "doctor", "--fix", "--non-interactive", timeout=600)
        else:
            sys.exit("the gateway did not start (see gateway.log)")
        if arm == "lean":
            daemon = subprocess.Popen([*OCCD, "run", "--act"], env=env, stdin=subprocess.DEVNULL,
                                      stdout=open(work / "daemon.log", "ab"), stderr=subprocess.STDOUT)
        t0 = time.time()
        turn_s = []
        for i in range(1, turns + 1):
            t = time.time()
            p = run(oc, "agent", "--agent", "main", "--message", f"Q{i}: READ {ws}/doc{i}.txt and tell me what is in it", "--json")
            turn_s.append(time.time() - t)
            (work / f"turn{i}.json").write_text(p.stdout)
            if p.returncode:
                (work / "turns.err").open("a").write(f"turn {i} failed: {p.stderr[-300:]}\n")
            time.sleep(gap)
        run(oc, "agent", "--agent", "main", "--message", "FINAL: list my questions", "--json")
        wall = time.time() - t0
    finally:
        stop(daemon)
        stop(gw)
        try:
            os.kill(fake_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    state = Path(env["OPENCLAW_STATE_DIR"])
    db = state / "agents/main/agent/openclaw-agent.sqlite"
    if db.exists():
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        compactions = c.execute("""select count(*) from transcript_events where event_json like '%"type":"compaction"%'""").fetchone()[0]
        c.close()
    else:
        e = json.loads((state / "agents/main/sessions/sessions.json").read_text()).get("agent:main:main", {})
        compactions = max(e.get("compactionCount") or 0, len(e.get("compactionCheckpoints") or []))
    reqs = [json.loads(line)["body"] for line in Path(env["FAKE_LOG"]).read_text().splitlines() if line.strip()]
    final = next((r for r in reversed(reqs) if "FINAL:" in json.dumps(r.get("messages"))), None)
    text = json.dumps(final["messages"]) if final else ""
    seen = sum(1 for i in range(1, turns + 1) if re.search(rf"\bQ{i}:", text))
    results = [m for m in (final["messages"] if final else []) if m.get("role") == "tool"]

    def size(m):
        c = m.get("content")
        return len(c if isinstance(c, str) else json.dumps(c))

    intact = sum(1 for m in results[-5:] if size(m) > 2000)
    blocked = sum("Context overflow" in (work / f"turn{i}.json").read_text() for i in range(1, turns + 1))
    out = {"arm": arm, "release": release, "turns": turns, "window": window, "compactions": compactions,
           "questions_seen_at_end": seen, "turns_blocked_by_overflow": blocked,
           "recent_results_intact": f"{intact}/{min(5, len(results))}", "tool_results_in_final_request": len(results),
           "results_cut_by_openclaw": sum(1 for m in results if "more characters truncated" in json.dumps(m.get("content"))),
           "final_request_tokens": len(text) // 4, "median_turn_s": round(sorted(turn_s)[len(turn_s) // 2], 1),
           "wall_s": round(wall)}
    if arm == "lean":
        stats = json.loads((work / "occd/lean/stats.json").read_text()) if (work / "occd/lean/stats.json").exists() else {}
        out["lean_counts"] = (stats.get("sessions") or {}).get("agent:main:main")
        p = run(*OCCD, "history", "--json")
        try:
            acts = json.loads(p.stdout)
            acts = acts if isinstance(acts, list) else acts.get("actions", [])
        except ValueError:
            acts = []
        kinds: dict = {}
        for a in acts:
            k = f"{a.get('kind')}:{a.get('outcome')}"
            kinds[k] = kinds.get(k, 0) + 1
        out["occd_actions"] = kinds
    print(json.dumps(out))


if __name__ == "__main__":
    main()
