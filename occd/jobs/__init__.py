"""The daemon's jobs and their registry: thin functions built from the domain modules, called by the scheduler
(occd.runtime.daemon) and by `occd run --once` / `occd demo` through the same `run_cycle`.

The contract for a job module (occd/jobs/<name>.py):

    def run(ctx: JobContext) -> dict

- `ctx.settings` (occd.config.Settings), `ctx.ledger` (an open occd.ledger.Ledger), `ctx.state_dir` (OpenClaw's
  state dir), `ctx.now()` (epoch seconds; tests inject a clock), `ctx.stop` (a threading.Event: set on
  SIGTERM/SIGINT; check it between sessions and return early, so a stop never leaves a half-written file),
  `ctx.cache` (a dict that lives as long as the daemon process: incremental state between cycles),
  `ctx.last_scan` (what the scan job left for the jobs chained after it), `ctx.urgent` (a wake waits: a long
  job stops between agents, keeps its place in `ctx.cache`, returns {"yielded": True, ...}; it runs on next).
- The returned dict is a small summary of scalars (counts, bytes, seconds) for the log line and `--once` output.
- Raise on failure: the runtime logs one line (traceback at debug), records it in the ledger and carries on.
- Jobs never import litellm or other heavy libraries into the daemon process (scoring runs in a worker
  subprocess): the daemon must stay small for months.

Triggers: a job runs either every N seconds (an interval read from the settings, so SIGHUP can change it) or
right after each scan, in the same scheduler run (`AFTER_SCAN`): apply never races the scan it depends on.
`in_cycle` says whether `occd run --once` runs it. A job whose module is not part of this installation is
simply not registered (logged once at debug level); a job whose interval is 0 or less is disabled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Union

log = logging.getLogger("occd.jobs")

AFTER_SCAN = "after scan"

JobFn = Callable[["JobContext"], dict]
Trigger = Union[str, Callable[[Any], float]]  # AFTER_SCAN, or settings -> interval seconds


@dataclass
class JobContext:
    settings: Any                          # occd.config.Settings
    ledger: Any                            # occd.ledger.Ledger (open)
    state_dir: Path
    clock: Callable[[], float] = time.time
    stop: threading.Event = field(default_factory=threading.Event)
    cache: dict = field(default_factory=dict)   # survives between cycles inside one daemon process
    last_scan: Any = None                  # the latest scan.ScanResult, for the jobs chained after the scan
    # set while a wake waits for a long periodic job (scoring...): the job stops between agents or sessions,
    # keeps where it was in `cache` and returns {"yielded": True, ...}; the daemon runs it again right after
    urgent: threading.Event = field(default_factory=threading.Event)
    # the agents whose folders changed since the last cycle, as the daemon's watcher saw them (a wake on events):
    # the scan looks again only at these and reuses what it saw of the others; None: look at every agent
    changed: frozenset | None = None

    def now(self) -> float:
        return self.clock()


@dataclass(frozen=True)
class JobSpec:
    name: str
    module: str                            # dotted module path exposing run(ctx) -> dict
    trigger: Trigger                       # AFTER_SCAN or settings -> seconds
    in_cycle: bool = True                  # part of `occd run --once`
    func: JobFn | None = None              # given directly instead of imported (embedding, tests)
    # False: the daemon runs it beside the wakes (its own ledger connection, not under the cycle lock), for a
    # long job that only reads OpenClaw's files and records in the ledger (the checks read every backup)
    locked: bool = True

    @property
    def after_scan(self) -> bool:
        return self.trigger == AFTER_SCAN

    def interval(self, settings) -> float | None:
        """Seconds between runs, None for a job chained after the scan."""
        return None if self.after_scan else float(self.trigger(settings))  # type: ignore[operator]

    def enabled(self, settings) -> bool:
        return self.after_scan or self.interval(settings) > 0


JOBS: tuple[JobSpec, ...] = (
    JobSpec("scan", "occd.jobs.scan", lambda s: s.daemon.scan_interval_seconds),
    # did the strips and the lean view take effect? Before apply: a strip's next turn is judged before the
    # next strip of that session replaces its file (occd.policy.savings counts only verified avoided compactions)
    JobSpec("verify", "occd.jobs.verify", AFTER_SCAN),
    JobSpec("lean", "occd.jobs.lean", AFTER_SCAN),
    JobSpec("apply", "occd.jobs.apply", AFTER_SCAN),
    JobSpec("rotate", "occd.jobs.rotate", AFTER_SCAN),
    JobSpec("prune", "occd.jobs.prune", lambda s: s.daemon.prune_interval_hours * 3600),
    JobSpec("maintain", "occd.jobs.maintain", lambda s: s.daemon.maintenance_interval_hours * 3600),
    JobSpec("score", "occd.jobs.score", lambda s: s.daemon.score_interval_seconds),
    # `occd check` on a schedule (not part of `run --once`: the --read-data form reads every backup)
    JobSpec("check", "occd.jobs.check", lambda s: s.check.interval_days * 86400, in_cycle=False, locked=False),
    JobSpec("check-data", "occd.jobs.check_data", lambda s: s.check.read_data_interval_days * 86400, in_cycle=False,
            locked=False),
)

_absent: set[str] = set()
_lock = threading.Lock()


def job_function(spec: JobSpec) -> JobFn | None:
    """The job's run(ctx), imported on first use; None when its module is not part of this installation.

    A module that exists but fails to import (a bug, a missing dependency of its own) raises: that is a
    failure of the job, which the caller logs and records, not a silently missing feature."""
    if spec.func is not None:
        return spec.func
    if spec.module in _absent:
        return None
    try:
        mod = importlib.import_module(spec.module)
    except ModuleNotFoundError as e:
        if e.name != spec.module:
            raise
        with _lock:
            if spec.module not in _absent:
                _absent.add(spec.module)
                log.debug("job %s not registered: %s is not installed", spec.name, spec.module)
        return None
    fn = getattr(mod, "run", None)
    if not callable(fn):
        raise TypeError(f"{spec.module} has no run(ctx) function")
    return fn


def available_jobs(jobs: Iterable[JobSpec] | None = None, settings=None) -> list[tuple[JobSpec, JobFn]]:
    """The registered jobs (module present, and enabled under `settings` when given), in registry order.
    A module that fails to import is left out here and logged as an error."""
    out = []
    for spec in JOBS if jobs is None else jobs:
        try:
            fn = job_function(spec)
        except Exception as e:  # noqa: BLE001 - one broken job must not take the others down
            log.error("job %s cannot be loaded: %s", spec.name, _first_line(e))
            log.debug("job %s import traceback", spec.name, exc_info=True)
            continue
        if fn is not None and (settings is None or spec.enabled(settings)):
            out.append((spec, fn))
    return out


def record_failure(ctx: JobContext, name: str, exc: BaseException, duration_s: float) -> None:
    """Put a failed job in the ledger (the one place that knows how); a failing ledger only gets a debug line."""
    try:
        ctx.ledger.record_action(f"job:{name}", None, None, trigger="auto", outcome="failed",
                                 error=f"{type(exc).__name__}: {exc}", duration_ms=round(duration_s * 1000, 1),
                                 now=ctx.now())
    except Exception:  # noqa: BLE001 - the ledger itself may be the problem (locked, read-only, full disk)
        log.debug("could not record the failure of %s", name, exc_info=True)


@contextlib.contextmanager
def apart(ctx: JobContext):
    """A context for a job that runs beside the wakes (JobSpec.locked False): its own ledger connection (SQLite
    WAL: the wakes' writes and its own wait for each other a moment, never for the whole job)."""
    from occd.ledger import Ledger

    with Ledger.open(ctx.ledger.path) as led:
        yield dataclasses.replace(ctx, ledger=led)


def run_job(ctx: JobContext, spec: JobSpec, fn: JobFn | None = None) -> tuple[bool, dict]:
    """Run one job; a failure is logged, recorded and returned, never raised (the daemon keeps running)."""
    t0 = time.monotonic()
    try:
        fn = fn or job_function(spec)
        if fn is None:
            return True, {"skipped": "not installed"}
        summary = fn(ctx) or {}
    except Exception as e:  # noqa: BLE001
        dt = time.monotonic() - t0
        log.error("%s failed after %.1fs: %s", spec.name, dt, _first_line(e))
        log.debug("%s traceback", spec.name, exc_info=True)
        record_failure(ctx, spec.name, e, dt)
        from occd.errors import BusyError

        return False, {"error": _first_line(e), **({"busy": True} if isinstance(e, BusyError) else {})}
    if not isinstance(summary, dict):
        summary = {"result": summary}
    line = short(summary)
    # a daemon wakes often (every run's end): a job's line that says the same as last time goes to debug, so
    # the log holds what changed, not thousands of identical "nothing to do" lines a day
    level = logging.DEBUG if _LAST_LINE.get(spec.name) == line else logging.INFO
    _LAST_LINE[spec.name] = line
    log.log(level, "%s: %s (%.2fs)", spec.name, line, time.monotonic() - t0)
    return True, summary


_LAST_LINE: dict[str, str] = {}  # per job, its last summary line (this process)


def run_cycle(ctx: JobContext, names: list[str] | None = None,
              jobs: Iterable[JobSpec] | None = None) -> dict[str, tuple[bool, dict]]:
    """One full cycle in registry order (scan → apply → rotate → prune → maintain → score), as `occd run --once`
    does. Jobs chained after the scan are skipped when the scan failed (they would act on stale figures); a set
    stop flag ends the cycle before the next job. Returns {name: (ok, summary)} for the jobs that ran."""
    results: dict[str, tuple[bool, dict]] = {}
    scan_failed = False
    for spec, fn in available_jobs(jobs, ctx.settings):
        if not spec.in_cycle or (names is not None and spec.name not in names):
            continue
        if ctx.stop.is_set():
            log.info("stop requested: %s and later jobs not run", spec.name)
            break
        if spec.after_scan and scan_failed:
            log.warning("%s skipped: the scan failed", spec.name)
            continue
        results[spec.name] = run_job(ctx, spec, fn)
        if spec.name == "scan" and not results[spec.name][0]:
            scan_failed = True
    return results


def short(summary: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict)))[:300]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
