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

