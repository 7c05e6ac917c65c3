"""The daemon's jobs: thin functions built from the domain modules, called by the scheduler (occd.daemon) and
by `occd run --once` / `occd demo` through the same `run_cycle`.

Each job module exposes `run(ctx: JobContext) -> dict` (a small summary for logs and the ledger). Jobs check
`ctx.stop` between sessions, so a SIGTERM finishes the current step and never leaves a half-written file.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("occd.jobs")


@dataclass
class JobContext:
    settings: Any                          # occd.config.Settings
    ledger: Any                            # occd.ledger.Ledger (open)
    state_dir: Path
    clock: Callable[[], float] = time.time
    stop: threading.Event = field(default_factory=threading.Event)
    cache: dict = field(default_factory=dict)   # survives between cycles inside one daemon process
    last_scan: Any = None                  # the latest scan.ScanResult, for apply

    def now(self) -> float:
        return self.clock()


@dataclass(frozen=True)
class JobSpec:
    name: str
    module: str
    interval: Callable[[Any], float] | None  # seconds, from settings; None: runs right after the scan
    in_cycle: bool = True                    # part of `occd run --once`


JOBS: tuple[JobSpec, ...] = (
    JobSpec("scan", "occd.jobs.scan", lambda s: float(s.daemon.scan_interval_seconds)),
    JobSpec("apply", "occd.jobs.apply", None),
    JobSpec("rotate", "occd.jobs.rotate", None),
    JobSpec("prune", "occd.jobs.prune", lambda s: float(s.daemon.prune_interval_hours) * 3600),
    JobSpec("maintain", "occd.jobs.maintain", lambda s: float(s.daemon.maintenance_interval_hours) * 3600),
    JobSpec("score", "occd.jobs.score", lambda s: float(s.daemon.score_interval_seconds)),
)


def job_function(spec: JobSpec) -> Callable[[JobContext], dict] | None:
    """The job's run(ctx), or None when its module is not part of this installation."""
    try:
        mod = importlib.import_module(spec.module)
    except ModuleNotFoundError as e:
        if e.name == spec.module:
            log.debug("job %s not available (%s)", spec.name, spec.module)
            return None
        raise
    return getattr(mod, "run", None)


def available_jobs() -> list[tuple[JobSpec, Callable]]:
    out = []
    for spec in JOBS:
        fn = job_function(spec)
        if fn is not None:
            out.append((spec, fn))
    return out


def run_job(ctx: JobContext, spec: JobSpec, fn: Callable) -> tuple[bool, dict]:
    """Run one job; a failure is logged and returned, never raised (the daemon keeps running)."""
    t0 = time.monotonic()
    try:
        summary = fn(ctx) or {}
        log.info("%s: %s (%.2fs)", spec.name, _short(summary), time.monotonic() - t0)
        return True, summary
    except Exception as e:  # noqa: BLE001
        log.error("%s failed: %s", spec.name, str(e).splitlines()[0] if str(e) else type(e).__name__)
        log.debug("%s traceback", spec.name, exc_info=True)
        try:
            ctx.ledger.record_action(f"job:{spec.name}", None, None, trigger="auto", outcome="failed",
                                     error=f"{type(e).__name__}: {e}")
        except Exception:  # noqa: BLE001 - the ledger itself may be the problem
            log.debug("could not record the failure", exc_info=True)
        return False, {"error": str(e)}


def run_cycle(ctx: JobContext, names: list[str] | None = None) -> dict[str, tuple[bool, dict]]:
    """One full cycle in order (scan → apply → rotate → prune → maintain → score), as `occd run --once` does."""
    results = {}
    for spec, fn in available_jobs():
        if not spec.in_cycle or (names is not None and spec.name not in names):
            continue
        if ctx.stop.is_set():
            break
        results[spec.name] = run_job(ctx, spec, fn)
    return results


def _short(summary: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict)))[:300]
