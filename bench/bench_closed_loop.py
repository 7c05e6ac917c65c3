"""The closed loop, both arms side by side: a real OpenClaw agent doing tool-heavy turns alone, and with
`occd run --act` beside it (../shared/closed-loop/run.sh, or $OCCD_CLOSED_LOOP). The two arms run at the same
time on two ports. occd runs with its defaults: no OCCD_* setting (issue 19).

    .venv/bin/python bench/bench_closed_loop.py                      # 40 turns, OpenClaw 2026.7.1, 128k window
    .venv/bin/python bench/bench_closed_loop.py --turns 15 --window 64000 --release 2026.7.35 --json

    .venv/bin/python bench/bench_closed_loop.py --release 2026.9.6 --lean --gap 30   # the lean view, via the gateway

Shapes closer to real use (issue 30): --reads N makes each turn one agent run of N tool calls in a row (a coding
agent's turn); --trace FILE.jsonl replays a real transcript's shape, each turn making as many tool calls as it made
with its real result texts (--turns caps the turns):

    .venv/bin/python bench/bench_closed_loop.py --release 2026.7.35 --gateway --reads 4 --turns 12 --gap 20
    .venv/bin/python bench/bench_closed_loop.py --release 2026.7.35 --gateway --trace session.jsonl --turns 30 --gap 15

A workstation around the loop (issue 29): --workstation 50x100 fills both arms' states with 50 other agents of
100 sessions each (a month of history) and runs a busy agent beside the loop (bench/workstation_beside.py, the
harness's BEFORE and BESIDE):

    .venv/bin/python bench/bench_closed_loop.py --release 2026.7.35 --gateway --window 96000 --turns 16 --gap 30 \
        --workstation 50x100

Prints one row per arm (compactions, questions the model still sees at the end, turns blocked by overflow, turns
that failed (OpenClaw answered the turn with an error, e.g. "Preflight compaction required but failed", read from
the harness's turn<N>.json: such a turn did no work, so its arm's cost covers fewer turns), the newest results
whole, prefix breaks, the cost with a prompt cache under Anthropic-style and OpenAI-style prices and its ratio
to OpenClaw alone in the same run, occd's actions) and, with --json, the JSON lines the harness printed.
--gateway sends the turns through `openclaw gateway` (as users run it); --lean turns the lean view on (implies
--gateway).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KNOBS: dict[str, str] = {}  # the defaults


def harness() -> Path:
    p = os.environ.get("OCCD_CLOSED_LOOP")
    if p:
        return Path(p)
    shared = Path(os.environ.get("OCCD_SHARED_DIR") or ROOT.parent.parent / "shared")
    for cand in (shared / "closed-loop" / "run.sh", ROOT.parent / "shared" / "closed-loop" / "run.sh",
                 Path("/work/shared/closed-loop/run.sh")):
        if cand.is_file():
            return cand
    raise SystemExit("closed-loop harness not found: set OCCD_CLOSED_LOOP or OCCD_SHARED_DIR")


def start_arm(arm: str, workdir: Path, *, turns: int, window: int, release: str, port: int, doc_words: int | None,
              gap_s: int | None, occd: str, extra_env: dict | None = None, gateway: bool = False,
              lean: bool = False, reads: int | None = None, trace: str | None = None,
              workstation: str | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCCD_") or k in ("OCCD_SHARED_DIR",)}
    env.update(RELEASE=release, TURNS=str(turns), WINDOW=str(window), PORT=str(port), OCCD=occd)
    if doc_words:
        env["DOC_WORDS"] = str(doc_words)
    if gap_s is not None:
        env["GAP_S"] = str(gap_s)
    env.update(shape_env(reads, trace))
    env.update(workstation_env(workstation))
    if gateway or lean:
        env["GATEWAY"] = "1"
    if lean:
        env["LEAN"] = "1"
    if arm == "occd":
        env.update(KNOBS)
        env.update(extra_env or {})
    out = open(workdir.with_suffix(".out"), "w")
    return subprocess.Popen(["bash", str(harness()), arm, str(workdir)], env=env, stdout=out,
                            stderr=subprocess.STDOUT)


def shape_env(reads: int | None, trace: str | None) -> dict:
    """The harness's shape knobs: READS (tool calls per turn, one run) and TRACE (a transcript replayed)."""
    env = {}
    if reads is not None:
        if reads < 1:
            raise SystemExit("--reads must be at least 1")
        env["READS"] = str(reads)
    if trace:
        p = Path(trace).expanduser().resolve()
        if not p.is_file():
            raise SystemExit(f"--trace: no such file: {trace}")
        env["TRACE"] = str(p)
    return env


def workstation_env(spec: str | None) -> dict:
    """BEFORE and BESIDE for --workstation AGENTSxSESSIONS: other agents' history, and a busy agent beside."""
    if not spec:
        return {}
    try:
        agents, sessions = (int(x) for x in spec.lower().split("x"))
        if agents < 1 or sessions < 1:
            raise ValueError
    except ValueError:
        raise SystemExit(f"--workstation: expected AGENTSxSESSIONS such as 50x100, not {spec!r}") from None
    py, tool = sys.executable, ROOT / "bench" / "workstation_beside.py"
    return {"BEFORE": f'"{py}" "{tool}" fill "$OPENCLAW_STATE_DIR" --agents {agents} --sessions {sessions}',
            "BESIDE": f'exec "{py}" "{tool}" busy "$OPENCLAW_STATE_DIR"'}


def shape(reads: int | None, trace: str | None) -> str:
    if trace:
        return f"replaying {Path(trace).name}"
    return f"{reads} tool calls a turn" if reads and reads > 1 else "1 tool call a turn"


def result(workdir: Path) -> dict | None:
    try:
        lines = [ln for ln in workdir.with_suffix(".out").read_text().splitlines() if ln.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def failed_turns(loopdir: Path) -> tuple[int, str | None]:
    """(turns OpenClaw answered with an error, the most frequent error) from the harness's turn<N>.json: a reply
    with "ok": false or a status other than "ok" (a failed preflight compaction, a gateway error)."""
    n, msgs = 0, {}
    for f in sorted(loopdir.glob("turn*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or (d.get("ok") is not False and d.get("status", "ok") == "ok"):
            continue
        n += 1
        err = d.get("error") if isinstance(d.get("error"), dict) else {}
        m = str(err.get("message") or d.get("summary") or d.get("status") or "error")[:160]
        msgs[m] = msgs.get(m, 0) + 1
    return n, (max(msgs, key=msgs.get) if msgs else None)


def _cost(r: dict | None) -> tuple[float, float] | None:
    """(Anthropic-style, OpenAI-style) USD with a prompt cache, from the harness's `cost` (cost.py), or None."""
    c = ((r or {}).get("cost") or {}).get("usd_with_cache") or {}
    a, o = c.get("anthropic"), c.get("openai")
    return (float(a), float(o)) if isinstance(a, (int, float)) and isinstance(o, (int, float)) else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--window", type=int, default=128000)
    ap.add_argument("--release", default="2026.7.1")
    ap.add_argument("--doc-words", type=int, default=None)
    ap.add_argument("--gap", type=int, default=None, help="seconds between turns (harness default 7)")
    ap.add_argument("--port", type=int, default=18600, help="the 'none' arm; the occd arm uses port + 50")
    ap.add_argument("--arms", default="none,occd")
    ap.add_argument("--occd", default=str(ROOT / ".venv" / "bin" / "occd"))
    ap.add_argument("--workdir", default=None, help="keep the runs here (default: a temp dir, removed)")
    ap.add_argument("--gateway", action="store_true", help="turns through `openclaw gateway`")
    ap.add_argument("--lean", action="store_true", help="the occd arm turns the lean view on (implies --gateway)")
    ap.add_argument("--reads", type=int, default=None, help="tool calls per turn, one agent run (harness READS)")
    ap.add_argument("--trace", default=None, help="a transcript (.jsonl) whose shape the turns replay (harness TRACE)")
    ap.add_argument("--workstation", default=None, metavar="AGENTSxSESSIONS",
                    help="fill the state with other agents' history and run a busy agent beside (e.g. 50x100)")
    ap.add_argument("--set", action="append", default=[], metavar="OCCD_NAME=VALUE",
                    help="a setting for the occd arm (repeatable): a lab figure, not the defaults, and the header says so")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    lab = {}
    for kv in a.set:
        k, eq, v = kv.partition("=")
        if not eq or not k.startswith("OCCD_"):
            ap.error(f"--set takes OCCD_NAME=VALUE, not {kv!r}")
        lab[k] = v
    shape_env(a.reads, a.trace)  # bad shape arguments: one line, before anything starts
    workstation_env(a.workstation)
    base = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="occd-closed-loop-"))
    base.mkdir(parents=True, exist_ok=True)
    arms = [x.strip() for x in a.arms.split(",") if x.strip()]
    t0 = time.monotonic()
    procs = {}
    for i, arm in enumerate(arms):
        procs[arm] = start_arm(arm, base / f"loop-{arm}", turns=a.turns, window=a.window, release=a.release,
                               port=a.port + 50 * i, doc_words=a.doc_words, gap_s=a.gap, occd=a.occd,
                               gateway=a.gateway, lean=a.lean, reads=a.reads, trace=a.trace,
                               workstation=a.workstation, extra_env=lab)
    for p in procs.values():
        p.wait()
    rows = {arm: result(base / f"loop-{arm}") for arm in arms}
    failed = {arm: failed_turns(base / f"loop-{arm}") for arm in arms}
    for arm in arms:
        if rows[arm] is not None:
            rows[arm]["turns_failed"], rows[arm]["turn_error"] = failed[arm]
    wall = time.monotonic() - t0
    if a.json:
        for arm in arms:
            print(json.dumps(rows[arm]))
    else:
        print(f"OpenClaw {a.release}, {a.turns} turns, {shape(a.reads, a.trace)}, window {a.window}, "
              f"gaps {a.gap if a.gap is not None else 7} s, "
              f"{'lean view, ' if a.lean else ''}{'gateway' if a.gateway or a.lean else 'agent --local'}, "
              f"{f'workstation {a.workstation} + a busy agent, ' if a.workstation else ''}"
              f"arms at once ({wall / 60:.1f} min)"
              + (f"; occd arm with {' '.join(f'{k}={v}' for k, v in lab.items())}: a lab figure, not the defaults"
                 if lab else ""))
        print(f"{'arm':<6} {'compactions':>11} {'questions seen':>15} {'blocked':>7} {'failed':>6} {'newest whole':>12} "
              f"{'breaks':>6} {'$ cache A/O':>13} {'vs alone':>13} {'occd CPU':>9}  occd actions")
        base_cost = _cost(rows.get("none"))
        for arm in arms:
            r = rows[arm]
            if r is None:
                print(f"{arm:<6} (no result: see {base / f'loop-{arm}.out'})")
                continue
            acts = ", ".join(f"{k} {v}" for k, v in sorted((r.get("occd_actions") or {}).items())) or "-"
            c = _cost(r)
            money = f"{c[0]:.3f}/{c[1]:.3f}" if c else "-"
            ratio = f"{c[0] / base_cost[0]:.3f}/{c[1] / base_cost[1]:.3f}" if c and base_cost and all(base_cost) else "-"
            cpu = r.get("occd_cpu_s")
            share = (f"{cpu / r['wall_s'] * 100:.1f}%" if isinstance(cpu, (int, float))
                     and isinstance(r.get("wall_s"), (int, float)) and r["wall_s"] > 0 else "-")
            print(f"{arm:<6} {r['compactions']:>11} {str(r['questions_seen_at_end']) + '/' + str(r['turns']):>15} "
                  f"{r['turns_blocked_by_overflow']:>7} {r['turns_failed']:>6} {r['recent_results_intact']:>12} "
                  f"{(r.get('cost') or {}).get('prefix_breaks', '-'):>6} {money:>13} {ratio:>13} {share:>9}  {acts}")
        for arm in arms:
            n, err = failed[arm]
            if n:
                print(f"{arm}: {n} of {rows[arm]['turns'] if rows[arm] else '?'} turns failed, e.g. \"{err}\" "
                      "(no work done on those turns: its cost covers the others)")
    if not a.workdir:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if all(rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
