"""`occd demo`: a realistic OpenClaw state in a temporary directory, a few daemon cycles in act mode against it,
and `occd status` for it. No network, no API key, nothing outside the temporary directory (OCCD_HOME and the
OpenClaw state dir both point into it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DEMO_WINDOW = 200_000  # the demo model's context window (openclaw.json), so sessions reach it quickly


def build_state(root: Path, now: float | None = None) -> dict:
    """Write a file-era OpenClaw state under root/.openclaw. Returns what was made (for tests)."""
    from occd.openclaw import new_session_id
    from occd.openclaw.locks import proc_starttime
    from occd.transcript import synth

    now = time.time() if now is None else now
    state = root / ".openclaw"
    (state / "workspace").mkdir(parents=True, exist_ok=True)
    (state / "workspace" / "MEMORY.md").write_text("# Memory\n- The user prefers short answers.\n- Project: app in ~/projects/app\n")
    (state / "openclaw.json").write_text(json.dumps({
        "agents": {"defaults": {"model": {"primary": "anthropic/claude-opus-4-6"}, "workspace": str(state / "workspace")}},
        "models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": DEMO_WINDOW}]}}},
    }, indent=2))
    made: dict = {"state": state, "sessions": {}}
    plan = {
        "main": [
            # key, synth options, compactionCount, minutes idle, running
            ("agent:main:main", dict(turns=40, tools_per_turn=3, thinking=True, seed=11), 1, 45, False),
            ("agent:main:telegram:dm:42", dict(turns=24, seed=12, images=True), 0, 300, False),
            ("agent:main:cron:nightly", dict(turns=40, compactions=4, seed=13), 6, 90, False),
            ("agent:main:discord:dm:7", dict(turns=45, tools_per_turn=3, seed=14), 0, 1, True),
        ],
        "research": [
            ("agent:research:main", dict(turns=45, tools_per_turn=2, seed=21), 2, 30, False),
            ("agent:research:slack:c:general", dict(turns=6, tools_per_turn=0, seed=22), 0, 2000, False),
        ],
        "ops": [
            ("agent:ops:main", dict(turns=12, seed=31, custom=True, branch=True), 0, 600, False),
        ],
    }
    for agent, sessions in plan.items():
        sdir = state / "agents" / agent / "sessions"
        sdir.mkdir(parents=True, exist_ok=True)
        index = {}
        for key, opts, compactions, idle_min, running in sessions:
            info = synth.generate_transcript(sdir, session_id=new_session_id(), **opts)
            os.chmod(info.path, 0o644)
            t = now - idle_min * 60
            os.utime(info.path, (t, t))
            index[key] = {"sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(t * 1000),
                          "sessionStartedAt": int((t - 86400) * 1000), "compactionCount": compactions,
                          "model": "claude-opus-4-6", "modelProvider": "anthropic", "chatType": "direct",
                          "lastChannel": key.split(":")[2] if key.count(":") >= 3 else "main"}
            if running:  # a run in progress: OpenClaw's transcript lock, held by a live process (this one)
                lock = Path(str(info.path) + ".lock")
                lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": "2026-11-22T10:00:00.000Z",
                                            "maxHoldMs": 300000, "starttime": proc_starttime(os.getpid())}))
            made["sessions"][key] = {"agent": agent, "id": info.id, "path": info.path, "running": running}
        p = sdir / "sessions.json"
        p.write_text(json.dumps(index, indent=2))
        os.chmod(p, 0o600)
    return made


def run(keep: Path | None = None, cycles: int = 3, echo=print, root: Path | None = None) -> Path:
    """Build the state under `keep` (or `root`, or a new temporary directory) and run the cycles. Returns the
    directory; the caller removes it unless it was asked to keep it."""
    import tempfile

    root = Path(keep or root or tempfile.mkdtemp(prefix="occd-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.environ["OCCD_HOME"] = str(root / "occd-home")
    os.environ["OPENCLAW_STATE_DIR"] = str(root / ".openclaw")
    os.environ.pop("OCCD_CONFIG", None)
    os.environ["OCCD_POLICY__MODE"] = "act"  # the demo shows what act mode does (the default is observe)
    t0 = time.monotonic()
    made = build_state(root)
    echo(f"Demo OpenClaw state: {made['state']}  ({len(made['sessions'])} sessions in 3 agents; "
         "one near its context limit, one that keeps compacting, one running)")
    echo(f"occd home (ledger, logs): {os.environ['OCCD_HOME']}\n")

    from occd import logging_setup
    from occd.config import load_settings
    from occd.daemon import Daemon
    from occd.ledger import Ledger

    def loader():
        return load_settings({"state_dir": str(made["state"]), "policy": {"mode": "act", "min_idle_minutes": 5}})

    logging_setup.setup("WARNING", quiet_stderr=True)
    with Ledger.open() as ledger:
        d = Daemon(loader)
        for i in range(1, cycles + 1):
            results = d.run_once(ledger)
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
    echo(f"\n({time.monotonic() - t0:.1f}s) `occd status` for the demo state:\n")
    return root


def explore_line(root: Path) -> str:
    """A command line that works when pasted: the real paths, quoted for the shell."""
    import shlex

    return (f"OCCD_HOME={shlex.quote(str(root / 'occd-home'))} "
            f"OPENCLAW_STATE_DIR={shlex.quote(str(root / '.openclaw'))} occd list --agent main")
