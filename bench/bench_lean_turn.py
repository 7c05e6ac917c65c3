"""A gateway turn with occd's lean view vs without (OpenClaw 2026.9.6, offline), and the plugin's own cost.

    .venv/bin/python bench/bench_lean_turn.py [--turns 5] [--history 8] [--release 2026.9.6]

1. The filter alone (node, in process): leanView over a recorded-shape history of --history tool turns with
   ~18 KB results, as assemble() runs it once per turn (median and max of 200 runs, including the stats write).
2. Whole turns: --history READ turns build a session, then --turns plain turns are timed with the plugin
   enabled (mode drop), then after `occd lean disable` and a gateway restart the same number without it.
   The figure is OpenClaw's own `durationMs` of each turn (the gateway's run, no CLI start-up).
Prints one JSON line. Ports: 18790 (model server), 18791 (gateway).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lean_loop import OCCD, ROOT, setup, stop  # noqa: E402

NODE_BENCH = r"""
import * as m from %(index)s;
import fs from "node:fs";
const H = %(history)d, big = "word ".repeat(3600);
const msgs = [];
for (let t = 1; t <= H; t++) {
  msgs.push({role: "user", content: [{type: "text", text: `Q${t}: READ /w/doc${t}.txt`}], timestamp: t});
  msgs.push({role: "assistant", content: [{type: "toolCall", id: `c${t}`, name: "read", arguments: {path: `/w/doc${t}.txt`}}], stopReason: "toolUse"});
  msgs.push({role: "toolResult", toolCallId: `c${t}`, toolName: "read", content: [{type: "text", text: big}], isError: false});
  msgs.push({role: "assistant", content: [{type: "text", text: `doc${t} holds words`}], stopReason: "stop"});
}
const dir = fs.mkdtempSync("/tmp/lean-bench-");
fs.writeFileSync(dir + "/policy.json", JSON.stringify({default: {mode: "drop", keepTurns: 3, batchTurns: 4}}));
const reg = [];
m.default({pluginConfig: {policyPath: dir + "/policy.json", statsPath: dir + "/stats.json"}, registerContextEngine: (i, f) => reg.push(f)});
const e = reg[0]({});
const times = [];
let out;
for (let i = 0; i < 200; i++) {
  const t = process.hrtime.bigint();
  out = await e.assemble({sessionId: "s", sessionKey: "agent:main:main", messages: msgs});
  times.push(Number(process.hrtime.bigint() - t) / 1e6);
}
times.sort((a, b) => a - b);
fs.rmSync(dir, {recursive: true});
console.log(JSON.stringify({historyTurns: H, messagesIn: msgs.length, messagesOut: out.messages.length,
  medianMs: +times[100].toFixed(3), maxMs: +times[199].toFixed(3)}));
"""


def filter_cost(history: int) -> dict:
    code = NODE_BENCH % {"index": json.dumps(str(ROOT / "occd/lean/plugin/index.js")), "history": history}
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as fh:
        fh.write(code)
    try:
        p = subprocess.run(["node", fh.name], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(fh.name)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--history", type=int, default=8)
    ap.add_argument("--release", default="2026.9.6")
    ap.add_argument("--skip-gateway", action="store_true")
    a = ap.parse_args()
    out = {"filter": filter_cost(a.history), "filter200": filter_cost(200)}
    if a.skip_gateway:
        print(json.dumps(out))
        return
    work = Path(tempfile.mkdtemp(prefix="lean-turn-"))
    env, fake_pid = setup(a.release, work / "home", 18790)
    env.update({"OCCD_HOME": str(work / "occd"), "OCCD_OPENCLAW_BIN": env["OC"], "PYTHONPATH": str(ROOT)})
    cfg_path = Path(env["OPENCLAW_CONFIG_PATH"])
    cfg = json.loads(cfg_path.read_text())
    cfg["gateway"]["port"] = 18791
    cfg_path.write_text(json.dumps(cfg, indent=2))
    oc, ws = env["OC"], Path(env["HOME"]) / "workspace"

    def run(*args, timeout=600):
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)

    def start():
        for _ in range(3):
            gw = subprocess.Popen([oc, "gateway", "run", "--port", "18791"], env=env, stdin=subprocess.DEVNULL,
                                  stdout=open(work / "gateway.log", "ab"), stderr=subprocess.STDOUT)
            for _ in range(120):
                if gw.poll() is not None:
                    break
                if run(oc, "gateway", "call", "health", "--json", timeout=60).returncode == 0:
                    return gw
                time.sleep(2)
            stop(gw)
        sys.exit("the gateway did not start")

    def turn(msg: str) -> float:
        p = run(oc, "agent", "--agent", "main", "--message", msg, "--json")
        d = json.loads(p.stdout[p.stdout.find("{"):])
        return d["result"]["meta"]["durationMs"] / 1000.0

    gw = None
    try:
        p = run(*OCCD, "lean", "enable", "--yes", "--json")
        assert p.returncode == 0, p.stderr
        pol_path = Path(json.loads(p.stdout)["policy"])
        pol = json.loads(pol_path.read_text())
        pol["sessions"]["agent:main:main"] = {"mode": "drop", "keepTurns": 1, "batchTurns": 1}
        pol_path.write_text(json.dumps(pol))
        gw = start()
        for i in range(1, a.history + 1):
            (ws / f"doc{i}.txt").write_text("word " * 3600)
            turn(f"READ {ws}/doc{i}.txt please")
        with_plugin = [turn(f"plain question {i}") for i in range(a.turns)]
        stats = json.loads((work / "occd/lean/stats.json").read_text())["sessions"]["agent:main:main"]
        run(*OCCD, "lean", "disable", "--json")
        stop(gw)
        gw = start()
        without = [turn(f"plain question again {i}") for i in range(a.turns)]
    finally:
        stop(gw)
        try:
            os.kill(fake_pid, 15)
        except ProcessLookupError:
            pass
    shutil.rmtree(work, ignore_errors=True)

    def fig(xs):
        return {"median_s": round(statistics.median(xs), 2), "min_s": round(min(xs), 2), "max_s": round(max(xs), 2),
                "stdev_s": round(statistics.stdev(xs), 2) if len(xs) > 1 else 0.0}

    out.update({"release": a.release, "historyTurns": a.history, "withPlugin": fig(with_plugin), "without": fig(without),
                "pluginCounts": {k: stats.get(k) for k in ("callsHidden", "charsIn", "charsOut")},
                "loadavg": os.getloadavg()[0]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
