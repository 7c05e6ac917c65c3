"""`occd demo`: a realistic OpenClaw state in a temporary directory, a few daemon cycles in act mode against it,
and `occd status` for it. No network, no API key, nothing outside the temporary directory (OCCD_HOME and the
OpenClaw state dir both point into it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DEMO_WINDOW = 200_000  # the demo model's context window (openclaw.json): demo_story's sessions are sized for it
DEMO_PRICES = {"input": 5.0, "output": 25.0, "cacheRead": 0.5, "cacheWrite": 6.25}  # USD / million tokens


def build_state(root: Path, now: float | None = None) -> dict:
    """Write a file-era OpenClaw state under root/.openclaw. Returns what was made (for tests)."""
    from occd.openclaw import new_session_id
    from occd.openclaw.locks import proc_starttime

    now = time.time() if now is None else now
    state = root / ".openclaw"
    (state / "workspace").mkdir(parents=True, exist_ok=True)
    (state / "workspace" / "MEMORY.md").write_text("# Memory\n- The user prefers short answers.\n- Project: app in ~/projects/app\n")
    (state / "openclaw.json").write_text(json.dumps({
        "agents": {"defaults": {"model": {"primary": "anthropic/claude-opus-4-6"}, "workspace": str(state / "workspace")}},
        # the demo's own prices (USD per million tokens, as OpenClaw's config states them): its dollars never
        # depend on whether litellm's price map happens to be installed
        "models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": DEMO_WINDOW,
                                                           "cost": DEMO_PRICES}]}}},
    }, indent=2))
    made: dict = {"state": state, "sessions": {}}
    # key, topic, channel, context tokens when last measured, compactions, minutes idle, running
    plan = {
        "main": [
            ("agent:main:main", "webhook", "main", 154_000, 1, 45, False),          # near its limit: stripped
            ("agent:main:telegram:dm:42", "calendar", "telegram", 83_000, 0, 300, False),
            ("agent:main:cron:nightly", "report", "cron", 60_000, 6, 90, False),     # keeps compacting: rotated
            ("agent:main:discord:dm:7", "billing", "discord", 138_000, 0, 1, True),  # a run in progress: deferred
        ],
        "research": [
            ("agent:research:main", "research", "main", 128_000, 2, 30, False),
            ("agent:research:slack:c:general", "deploys", "slack", 5_000, 0, 2000, False),
        ],
        "ops": [
            ("agent:ops:main", "ops", "main", 43_000, 0, 600, False),
        ],
    }
    from occd.demo.story import CHANNELS, write_story

    for agent, sessions in plan.items():
        sdir = state / "agents" / agent / "sessions"
        sdir.mkdir(parents=True, exist_ok=True)
        index = {}
        for n, (key, topic, channel, tokens, compactions, idle_min, running) in enumerate(sessions):
            sid = new_session_id()
            t = now - idle_min * 60
            started_ms = int((t - 86400) * 1000)
            info = write_story(sdir / f"{sid}.jsonl", sid, topic=topic, channel=channel, target_tokens=tokens,
                               compactions=compactions, start_ms=started_ms, end_ms=int(t * 1000),
                               seed=n + 10 * len(index) + len(agent),
                               open_call=running, tools=channel != "slack")
            os.chmod(info.path, 0o644)
            os.utime(info.path, (t, t))
            index[key] = {"sessionId": sid, "sessionFile": str(info.path), "updatedAt": int(t * 1000),
                          "sessionStartedAt": started_ms, "compactionCount": info.compactions,
                          "model": "claude-opus-4-6", "modelProvider": "anthropic", "chatType": CHANNELS[channel][1],
                          "lastChannel": channel if channel not in ("main", "cron") else "webchat"}
            if info.compactions:  # OpenClaw records each compaction (when: a rotation counts only recent ones)
                span = int(t * 1000) - started_ms
                index[key]["compactionCheckpoints"] = [
                    {"reason": "threshold", "createdAt": started_ms + span * (k + 1) // (info.compactions + 1)}
                    for k in range(info.compactions)]
            if running:  # a run in progress: OpenClaw's transcript lock, held by a live process (this one)
                lock = Path(str(info.path) + ".lock")
                lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": "2026-11-22T10:00:00.000Z",
                                            "maxHoldMs": 300000, "starttime": proc_starttime(os.getpid())}))
            made["sessions"][key] = {"agent": agent, "id": sid, "path": info.path, "running": running,
                                     "tokens": info.tokens, "compactions": info.compactions, "size": info.size}
        p = sdir / "sessions.json"
        p.write_text(json.dumps(index, indent=2))
        os.chmod(p, 0o600)
    return made


def run(keep: Path | None = None, cycles: int = 3, echo=print, root: Path | None = None,
        report: list | None = None) -> Path:
    """Build the state under `keep` (or `root`, or a new temporary directory) and run the cycles. Returns the
    directory; the caller removes it unless it was asked to keep it."""
    import tempfile

    root = Path(keep or root or tempfile.mkdtemp(prefix="occd-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.environ["OCCD_HOME"] = str(root / "occd-home")
    os.environ["OPENCLAW_STATE_DIR"] = str(root / ".openclaw")
    os.environ.pop("OCCD_CONFIG", None)
    os.environ["OCCD_POLICY__MODE"] = "act"  # the demo shows what act mode does (the default is observe)
    # and what occd does with sessions it saw run: the demo's were made a moment ago, before its first look
    os.environ["OCCD_POLICY__ACT_ON_UNSEEN"] = "true"
    t0 = time.monotonic()
    made = build_state(root)
    mark_demo(made)
    echo(f"Demo OpenClaw state: {made['state']}  ({len(made['sessions'])} sessions in 3 agents; "
         "one near its context limit, one that keeps compacting, one running)")
    echo(f"occd home (ledger, logs): {os.environ['OCCD_HOME']}\n")

    from occd.runtime import logging_setup
    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    def loader():
        return load_settings({"state_dir": str(made["state"]), "policy": {"mode": "act", "min_idle_minutes": 5,
                                                                      "act_on_unseen": True}})

    logging_setup.setup("WARNING", quiet_stderr=True)
    with Ledger.open() as ledger:
        d = Daemon(loader)
        for i in range(1, cycles + 1):
            results = d.run_once(ledger)
            if report is not None:  # `occd demo --json`: each cycle's job summaries
                report.append({"cycle": i, "jobs": {name: {"ok": ok, **(s or {})} for name, (ok, s) in results.items()}})
            parts = []
            for name, (ok, s) in results.items():
                if not ok:
                    parts.append(f"{name} FAILED ({s.get('error')})")
                elif name == "scan":
                    parts.append(f"scanned {s['sessions']} sessions ({s['changed']} changed, {s['bytesRead']} bytes read)")
                elif name == "apply":
                    parts.append(f"stripped {s['acted']}, deferred {s['deferred']}, blocked {s['blocked']}")
                elif name == "rotate" and s:
                    parts.append(f"rotated {s.get('rotated', 0)}" + (f" (deferred {s['deferred']})" if s.get("deferred") else ""))
            echo(f"cycle {i}: " + "; ".join(parts))
    echo(f"\n(the demo took {time.monotonic() - t0:.1f}s) `occd status` for the demo state:\n")
    return root


DEMO_MARK = "demo.json"


def mark_demo(made: dict) -> None:
    """occd's home says it belongs to a demo state (`occd doctor` on a kept demo: no service expected, the demo's
    own run lock is the demo's, not OpenClaw's)."""
    from occd import paths

    locks = [str(v["path"]) + ".lock" for v in made["sessions"].values() if v.get("running")]
    paths.write_private(paths.data_dir() / DEMO_MARK, json.dumps(
        {"demo": True, "state": str(made["state"]), "locks": locks}).encode())


def explore_line(root: Path) -> str:
    """A command line that works when pasted: the real paths, quoted for the shell."""
    import shlex

    return (f"OCCD_HOME={shlex.quote(str(root / 'occd-home'))} "
            f"OPENCLAW_STATE_DIR={shlex.quote(str(root / '.openclaw'))} occd list --agent main")
