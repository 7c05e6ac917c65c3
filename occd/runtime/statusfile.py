"""The daemon's heartbeat for `occd status`: `<runtime dir>/status.json` (pid, start, last cycle, next scan, last
results), written atomically after every cycle; and when each periodic job last ran (`daemon-jobs.json` in the
state dir, kept across restarts). Split out of occd/runtime/daemon.py (issue 25), unchanged."""

from __future__ import annotations

import logging
from pathlib import Path

from occd import paths

log = logging.getLogger("occd.daemon")


def status_file() -> Path:
    return paths.runtime_dir() / "status.json"


def job_times_file() -> Path:
    """When each periodic job last ran (kept across restarts and reboots, unlike the runtime dir)."""
    return paths.state_dir() / "daemon-jobs.json"


def write_json(p: Path, data: dict) -> None:
    import orjson

    try:
        paths.write_private(p, orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))
    except (OSError, TypeError) as e:
        log.debug("could not write %s: %s", p, e)


def read_json(p: Path) -> dict | None:
    import orjson

    try:
        data = orjson.loads(p.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_status(data: dict) -> None:
    write_json(status_file(), data)


def read_status() -> dict | None:
    return read_json(status_file())



def agent_modes(daemon) -> dict:
    """The mode the daemon runs each agent in (its settings, `--act` and per-agent overrides included): what
    `occd status` shows while it runs, instead of the config file's."""
    scan = getattr(daemon.ctx, "last_scan", None) if daemon.ctx is not None else None
    agents = set(getattr(scan, "agents", None) or ()) | set(daemon.settings.agents)
    return {a: daemon.settings.policy_for(a).mode for a in sorted(agents)}


def watch_status(daemon) -> dict:
    """How the daemon wakes: the watcher's own account (per agent watched or polled, since when) while it
    watches, else polling with the reason and every agent polled since the daemon started."""
    w = daemon.watcher
    if w is not None:
        return w.describe()
    return {"mode": "polling", "reason": daemon.watch_mode[1], "wakes": 0,
            "agents": {a: {"mode": "polled", "since": daemon.started, "reason": daemon.watch_mode[1]}
                       for a in agent_modes(daemon)}}


def daemon_status(daemon, now: float, next_scan: float | None) -> dict:
    """The heartbeat's document (what `occd status`, `doctor` and `occd metrics` read)."""
    from occd.runtime import logging_setup

    import os

    return {"pid": os.getpid(), "started": daemon.started, "heartbeat": now, "lastCycle": daemon.last_cycle,
            "nextScan": next_scan, "mode": daemon.settings.policy.mode, "agentModes": agent_modes(daemon),
            "stateDir": str(daemon.ctx.state_dir), "scanIntervalSeconds": daemon.scan_interval(),
            "running": daemon.running, "watch": watch_status(daemon), "metrics": daemon.metrics.to_status(),
            "jobs": daemon.last_results, "logDegraded": logging_setup.degraded()}
