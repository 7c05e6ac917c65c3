"""How fast the daemon acts when a run ends: from the moment a run releases its `.jsonl.lock` (having pushed the
session to where OpenClaw would compact within the next turn or two) to the strip done (the transcript replaced),
with the daemon's defaults (act mode, nothing else set), in events mode and, as the baseline measured in the same
run, in polling mode (`daemon.watch = false`: the scan every daemon.poll_interval_seconds).

    .venv/bin/python bench/bench_react.py             # 5 runs per mode
    .venv/bin/python bench/bench_react.py --runs 9 --json

Each run: a fresh simulated agent (tests/simrun.py: 10 turns of ~1.2k-token tool results in a 60k window), a
fresh daemon in a thread, then one run appending 9 turns under a live run lock, released. Target (issue 19):
events-mode median <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _isolate(base: Path) -> None:
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(HOME=str(home), OCCD_HOME=str(base / "occd-home"), XDG_RUNTIME_DIR=str(base / "run"),
                      XDG_STATE_HOME=str(home / ".local/state"), XDG_DATA_HOME=str(home / ".local/share"),
                      XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
                      OPENCLAW_STATE_DIR=str(home / ".openclaw"))
    for k in list(os.environ):
        if k.startswith("OCCD_") and k != "OCCD_HOME":
            del os.environ[k]


def one(base: Path, watch: bool, timeout: float = 60.0) -> float | None:
    from simrun import SimAgent

    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    _isolate(base)
    agent = SimAgent(base / "home", turns=10)
    over = {"state_dir": str(agent.state), "policy": {"mode": "act"}}
    if not watch:
        over["daemon"] = {"watch": False}
    d = Daemon(lambda: load_settings(over))
    with Ledger.open() as led:
        t = threading.Thread(target=d.run_forever, args=(led,), kwargs={"install_signals": False}, daemon=True)
        t.start()
        end = time.monotonic() + 30
        while d.last_cycle is None and time.monotonic() < end:
            time.sleep(0.05)
        assert d.watch_mode[0] == ("events" if watch else "polling"), d.watch_mode
        time.sleep(1.0)
        agent.start_run()
        for _ in range(9):
            agent.append_turn()
        ino = os.stat(agent.path).st_ino
        agent.end_run()
        ended = time.monotonic()
        took = None
        while time.monotonic() - ended < timeout:
            try:
                if os.stat(agent.path).st_ino != ino:
                    took = time.monotonic() - ended
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        d._on_signal(signal.SIGTERM, None)
        t.join(60)
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    res: dict[str, list[float | None]] = {"events": [], "polling": []}
    with tempfile.TemporaryDirectory(prefix="occd-react-") as tmp:
        for i in range(a.runs):  # interleaved, so both modes see the same load on the machine
            for mode in ("events", "polling"):
                res[mode].append(one(Path(tmp) / f"{mode}{i}", watch=mode == "events"))
    med = {m: statistics.median([x for x in v if x is not None]) if any(x is not None for x in v) else None
           for m, v in res.items()}
    missed = {m: sum(1 for x in v if x is None) for m, v in res.items()}
    out = {"runs": a.runs, "seconds": {m: [None if x is None else round(x, 2) for x in v] for m, v in res.items()},
           "median_s": {m: None if v is None else round(v, 2) for m, v in med.items()}, "missed": missed,
           "events_vs_polling": (round(med["events"] / med["polling"], 3) if med["events"] and med["polling"]
                                 else None)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"run end -> strip done, median of {a.runs} (defaults): events {out['median_s']['events']} s, "
              f"polling {out['median_s']['polling']} s (baseline); events/polling = {out['events_vs_polling']}; "
              f"missed (no strip within 60 s): {missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
