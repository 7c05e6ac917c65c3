"""`occd run`: the foreground daemon a service manager starts.

- Jobs come from the registry in occd.jobs. An APScheduler 3.11 BackgroundScheduler runs the scan every
  `daemon.scan_interval_seconds` and, right after it in the same run, the jobs chained after it (they never race
  the scan they depend on); prune, maintain, score and the checks on their own intervals. coalesce=True and
  max_instances=1. One lock (`cycle_lock`) serialises the jobs; a wake that finds a long job holding it sets
  ctx.urgent (it yields); the checks (JobSpec.locked False) run beside it on their own ledger connection.
- Single instance: a non-blocking flock on `<runtime dir>/occd.lock`, which holds our pid; a second `occd run`
  exits 75 naming that pid (occd.runtime.lock). The kernel drops the lock when the process dies.
- Signals: SIGTERM/SIGINT set the stop flag (jobs check `ctx.stop` between sessions, so the running step
  finishes and no file is left half-written), the scheduler shuts down waiting for it, and `occd run` exits 0.
  A step that does not finish within OCCD_STOP_GRACE_S (10 s; blocked in the kernel) is abandoned: exit 1.
  SIGHUP reloads the config (occd.config.load_settings), the log level, and reschedules. The handlers only set
  flags and wake the supervisor; all work happens in the main thread's loop.
- sd_notify (READY, STATUS, RELOADING, WATCHDOG, STOPPING) over NOTIFY_SOCKET when systemd started us
  (occd.runtime.notify). The watchdog ping is withheld while a job has been stuck longer than the
  stall limit, so systemd restarts a daemon that hangs (e.g. on a dead network mount) instead of trusting it.
- Heartbeat for `occd status`: `<runtime dir>/status.json` (pid, start, last cycle, next scan, last results),
  written atomically after every cycle (occd.runtime.statusfile), and the ledger's daemon_runs row.

Clock jumps. APScheduler 3 plans in wall-clock time (it sleeps on a monotonic timer, then compares run times with
`datetime.now()`). A forward jump or a resume from suspend makes the scan late: with coalesce it runs once
(misfire_grace_time = the job's interval, so it is not dropped). A backward jump of N seconds would delay the next
run by N. So the supervisor, on time.monotonic, watches the wall-vs-monotonic offset: when it moves by more than
CLOCK_JUMP_S the scan runs now and the periodic jobs are re-planned from their last runs (and it starts a scan
itself if none has started for two intervals).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from occd.runtime import logging_setup
from occd.runtime.notify import monotonic_usec, sd_notify, stop_grace_seconds, watchdog_interval
from occd.runtime.metrics import DaemonMetrics, write_daemon_textfile
from occd.runtime.statusfile import daemon_status, job_times_file, read_json, write_json, write_status
from occd.runtime.wake import Changes

log = logging.getLogger("occd.daemon")

TICK_S = 5.0                 # supervisor loop period (shorter when the watchdog asks for it)
CLOCK_JUMP_S = 30.0          # wall-vs-monotonic change that counts as a clock jump
FIRST_PERIODIC_DELAY_S = 60  # prune/maintain/score never run in the first minute after a start
MIN_STALL_S = 1800.0         # a job running longer than max(this, 4 scan intervals) is considered stuck


# ------------------------------------------------------------------------------------------------- the daemon
class Daemon:
    """The runtime around the jobs. `jobs` (default: occd.jobs.JOBS) and the clocks can be injected.

    `clock` is the wall time the jobs and the ledger see (ctx.now) and that clock-jump detection compares with
    `monotonic`; times handed to APScheduler are always time.time(), the clock APScheduler itself reads."""

    def __init__(self, settings_loader, *, state_dir: Path | None = None, clock=time.time,
                 monotonic=time.monotonic, jobs=None, env=None):
        from occd.jobs import JOBS

        self.load_settings = settings_loader
        self.settings = settings_loader()
        self._state_dir_override = state_dir
        self.clock = clock
        self.mono = monotonic
        self.jobs = tuple(JOBS if jobs is None else jobs)
        self.env = os.environ if env is None else env
        self.stop, self.wake, self.reload_requested = threading.Event(), threading.Event(), threading.Event()
        self.scan_requested = threading.Event()  # SIGUSR1 (`occd scan-now`)
        self.cycle_lock = threading.Lock()
        self.scheduler = None
        self.ctx = None
        self.run_id: int | None = None
        self.started = clock()
        self.last_cycle: float | None = None
        self.last_cycle_mono = monotonic()  # when the last scan cycle started (monotonic)
        self.running: str | None = None      # the job running now
        self.running_since: float | None = None  # monotonic
        self.last_results: dict[str, dict] = {}
        self.job_times: dict[str, float] = {}
        self._registered: dict[str, tuple[Any, Any]] = {}
        self._sched_jobs: dict[str, Any] = {}  # APScheduler Job objects by id
        self.dispatching: set[str] = set()   # scheduler runs in progress (job + heartbeat)
        self._stall_reported = self._hard_exit = False
        self.watcher = None      # occd.runtime.watch.Watcher (events mode) or None (polling)
        self.waker = None        # occd.runtime.watch.WakeRunner: cycles on events and on deferred decisions' due times
        self.changes = Changes()  # the agents the watcher saw change since the last cycle (a wake looks at those)
        self.watch_mode: tuple[str, str] = ("polling", "not started")
        self.metrics = DaemonMetrics()  # run end -> decision latency, cycle durations (occd.runtime.metrics)

    # context -------------------------------------------------------------------------------------------------
    def state_dir(self) -> Path:
        if self._state_dir_override:
            return Path(self._state_dir_override)
        if self.settings.state_dir:
            return Path(self.settings.state_dir)
        from occd.openclaw import resolve_state_dir

        return resolve_state_dir()

    def make_context(self, ledger):
        from occd.jobs import JobContext

        return JobContext(settings=self.settings, ledger=ledger, state_dir=self.state_dir(), clock=self.clock,
                          stop=self.stop)

    def scan_interval(self) -> float:
        """Events mode: the safety-net scan; polling mode: the (shorter) poll interval."""
        d = self.settings.daemon
        if self.watch_mode[0] == "events":
            return float(d.scan_interval_seconds)
        return float(min(d.scan_interval_seconds, d.poll_interval_seconds))

    def stall_limit(self) -> float:
        return max(MIN_STALL_S, 4 * self.scan_interval())

    # running jobs --------------------------------------------------------------------------------------------
    def _run(self, spec, fn, ctx=None) -> tuple[bool, dict]:
        from occd.jobs import run_job

        self.running, self.running_since = spec.name, self.mono()
        try:
            ok, summary = run_job(ctx or self.ctx, spec, fn)
        finally:
            self.running, self.running_since = None, None
        self.last_results[spec.name] = {"ok": ok, "at": self.clock(), **_scalars(summary)}
        if not spec.after_scan and spec.name != "scan":
            self.job_times[spec.name] = time.time()  # scheduling data: the scheduler's clock
            write_json(job_times_file(), self.job_times)
        return ok, summary

    def cycle(self, wake: bool = False) -> None:
        """One scan cycle: scan, then the jobs chained after it; never two at once. `wake`: a cycle the wake runner
        asked for while the watcher watches: the scan looks again only at the agents it saw change (the scheduled
        scan, every scan_interval_seconds, looks at all of them); a scan that fails leaves them for the next."""
        if self.cycle_lock.locked() and self.ctx is not None:
            self.ctx.urgent.set()  # a long job holds the lock: it yields between agents (occd.jobs JobContext)
        with self.cycle_lock:
            if self.stop.is_set():
                return
            self.last_cycle_mono = t0 = self.mono()
            ends = self.metrics.take_run_ends()  # the runs this cycle decides on (the watcher saw them end)
            if self.ctx is not None:
                self.ctx.urgent.clear()
            changed = self.changes.take()  # taken by every cycle: a whole scan covers what changed too
            scan = self._registered.get("scan")
            ok = True
            if scan is not None:
                self.ctx.changed = changed if wake and self.watcher is not None else None
                try:
                    ok, _ = self._run(*scan)
                finally:
                    self.ctx.changed = None
                if not ok:
                    self.changes.note(changed)
            for spec, fn in self._registered.values():
                if not spec.after_scan:
                    continue
                if self.stop.is_set():
                    log.info("stop requested: %s not run", spec.name)
                    break
                if not ok:
                    log.warning("%s skipped: the scan failed", spec.name)
                    continue
                self._run(spec, fn)
                if spec.name == "apply":
                    self.metrics.decided(ends, self.clock())
                    ends = []
            self.metrics.decided(ends, self.clock())  # no apply job ran: the cycle's end
            self.metrics.cycle_took(self.mono() - t0)
            self.last_cycle = self.clock()
            from occd.jobs.apply import WAKE_KEY
            due = self.ctx.cache.pop(WAKE_KEY, None) if self.ctx is not None else None
        if due is not None and self.waker is not None:
            self.waker.request(due)  # a deferred decision becomes due then
        write_daemon_textfile(self, self.heartbeat())
        sd_notify(f"STATUS={self.status_line()}", self.env)

    def periodic(self, name: str) -> None:
        entry = self._registered.get(name)
        if entry is None:
            return
        from occd.jobs import apart

        if not entry[0].locked:  # beside the wakes, on its own ledger connection (issue 29: never in their way)
            with apart(self.ctx) as ctx:
                summary = self._run(*entry, ctx=ctx)[1] if not self.stop.is_set() else {}
        else:
            with self.cycle_lock:
                summary = self._run(*entry)[1] if not self.stop.is_set() else {}
        if summary.get("yielded") and name in self._sched_jobs:  # it gave way to a wake: the rest right after
            self._sched_jobs[name].modify(next_run_time=_utc(time.time() + 1.0))
        self.heartbeat()

    def _dispatch(self, name: str, wake: bool = False) -> None:
        """What the scheduler (and the wake runner, `wake`) calls: never raises (APScheduler would only log it).
        While it runs, APScheduler (max_instances=1) drops a new run of the same job (a re-plan then): fine, it is
        running right now."""
        self.dispatching.add(name)
        try:
            self.cycle(wake=wake) if name == "scan" else self.periodic(name)
        except Exception as e:  # noqa: BLE001 - a bug in the runtime itself; keep the daemon alive
            log.error("%s: unexpected error in the daemon: %s", name, e, exc_info=True)
        finally:
            self.dispatching.discard(name)

    # heartbeat -----------------------------------------------------------------------------------------------
    def next_run(self, job_id: str = "scan") -> float | None:
        # Read from our own reference, never through the scheduler's API: scheduler.shutdown(wait=True) holds
        # the job-store lock while it waits for running jobs, so a job thread asking get_job() would deadlock.
        job = self._sched_jobs.get(job_id)
        nrt = getattr(job, "next_run_time", None)
        return nrt.timestamp() if nrt else None

    def status_line(self) -> str:
        scan = self.last_results.get("scan", {})
        parts = [f"mode {self.settings.policy.mode}"]
        if self.last_cycle:
            parts.append("last scan " + time.strftime("%H:%M", time.localtime(self.last_cycle)) +
                         (f": {scan['sessions']} sessions" if "sessions" in scan else "") +
                         ("" if scan.get("ok", True) else " (failed)"))
        nxt = self.next_run()
        if nxt:
            parts.append("next " + time.strftime("%H:%M", time.localtime(nxt)))
        return ", ".join(parts)

    def heartbeat(self) -> dict:
        """The status file (occd.runtime.statusfile.daemon_status) and the ledger's heartbeat; returns the former."""
        now, nxt = self.clock(), self.next_run()
        doc = daemon_status(self, now, nxt)
        write_status(doc)
        if self.run_id is not None:
            try:
                self.ctx.ledger.heartbeat(self.run_id, now=now, last_cycle=self.last_cycle, next_scan=nxt)
            except Exception as e:  # noqa: BLE001 - a busy or broken ledger must not stop the daemon
                log.warning("heartbeat not recorded in the ledger: %s", str(e).splitlines()[0] if str(e) else e)
        return doc

    # scheduling ----------------------------------------------------------------------------------------------
    def _due(self, name: str, secs: float, now: float, initial: bool) -> float:
        """When a periodic job should next run: an interval after its last run, never before now (plus the start
        delay). A last run 'in the future' (the clock went back) counts as now."""
        last = self.job_times.get(name)
        earliest = now + (FIRST_PERIODIC_DELAY_S if initial else 0)
        if last is None:
            return now + min(secs, FIRST_PERIODIC_DELAY_S) if initial else now + secs
        return max(earliest, min(last, now) + secs)

    def sync_jobs(self, initial: bool = False) -> None:
        """Make the scheduler match the registry and the current settings (start and SIGHUP)."""
        from occd.jobs import available_jobs

        self._registered = {spec.name: (spec, fn) for spec, fn in available_jobs(self.jobs, self.settings)}
        if initial and "scan" not in self._registered:
            log.warning("no scan job in this installation: only the periodic jobs run")
        now = time.time()
        wanted = {n: spec.interval(self.settings) for n, (spec, _) in self._registered.items() if not spec.after_scan}
        if "scan" in wanted and self.watch_mode[0] != "events":  # polling: the scan is how changes are seen
            wanted["scan"] = min(wanted["scan"], float(self.settings.daemon.poll_interval_seconds))
        for job in self.scheduler.get_jobs():
            if job.id not in wanted:
                self._sched_jobs.pop(job.id, None)
                job.remove()
        for name, secs in wanted.items():
            job = self.scheduler.get_job(name)
            if job is not None and job.trigger.interval_length == secs:
                continue
            if name == "scan":
                first = now if initial or job is None else now + secs
            else:
                first = self._due(name, secs, now, initial)
            self._sched_jobs[name] = self.scheduler.add_job(
                self._dispatch, "interval", args=[name], id=name, name=name, seconds=secs, replace_existing=True,
                misfire_grace_time=max(1, int(secs)), next_run_time=_utc(first))

    def replan(self, reason: str) -> None:
        """Run the scan now and re-plan the periodic jobs from their last runs (after a clock jump)."""
        now = time.time()
        for job in self.scheduler.get_jobs():
            if job.id == "scan":
                job.modify(next_run_time=_utc(now))
            else:
                job.modify(next_run_time=_utc(self._due(job.id, job.trigger.interval_length, now, False)))
        log.info("%s: scan now, other jobs re-planned", reason)

    def build_scheduler(self):
        from apscheduler.schedulers.background import BackgroundScheduler

        return BackgroundScheduler(timezone=timezone.utc, job_defaults={"coalesce": True, "max_instances": 1})

    # supervision ---------------------------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        # Only flags here; the supervisor loop does the work.
        if signum == signal.SIGHUP:
            self.reload_requested.set()
        elif signum == signal.SIGUSR1:
            self.scan_requested.set()
        elif self.stop.is_set():
            log.warning("already stopping: waiting for %s to finish (SIGKILL forces it)", self.running or "the scheduler")
        else:
            self.stop.set()
            self._stop_signal = signal.Signals(signum).name
        self.wake.set()

    def healthy(self) -> bool:
        """False when the scheduler died or a job has run past the stall limit: then no watchdog ping."""
        if self.scheduler is None or not self.scheduler.running:
            return False
        since = self.running_since
        if since is not None and self.mono() - since > self.stall_limit():
            if not self._stall_reported:
                self._stall_reported = True
                log.error("%s has run for %.0fs (stall limit %.0fs): withholding the watchdog ping", self.running,
                          self.mono() - since, self.stall_limit())
            return False
        self._stall_reported = False
        return True

    def check_clock(self, offset: float) -> float:
        """Detect a wall-clock jump (or a resume from suspend) and re-plan; returns the new offset."""
        new = self.clock() - self.mono()
        if abs(new - offset) > CLOCK_JUMP_S:
            self.replan(f"wall clock moved {new - offset:+.0f}s against the monotonic clock")
        return new

    def check_overdue(self) -> None:
        """Start a scan if none started for two intervals (the scheduler slept too long, for whatever reason)."""
        if "scan" not in self._registered or self.running or self.stop.is_set():
            return
        late = self.mono() - self.last_cycle_mono
        if late > 2 * self.scan_interval() + TICK_S * 2:
            log.warning("no scan for %.0fs (interval %.0fs): starting one now", late, self.scan_interval())
            self.last_cycle_mono = self.mono()
            job = self.scheduler.get_job("scan")
            if job is not None:
                job.modify(next_run_time=_utc(time.time()))

    def scan_now(self) -> None:
        """SIGUSR1: run the scan (and the jobs chained after it) now; a scan in progress is not started twice."""
        job = self.scheduler.get_job("scan") if self.scheduler is not None else None
        if job is None:
            return
        log.info("scan requested (SIGUSR1)%s", f"; {self.running} is running, the scan follows" if self.running else "")
        job.modify(next_run_time=_utc(time.time()))

    def reload(self) -> None:
        sd_notify(f"RELOADING=1\nMONOTONIC_USEC={monotonic_usec()}\nSTATUS=reloading the configuration", self.env)
        try:
            new = self.load_settings()
        except Exception as e:  # noqa: BLE001 - a broken config keeps the old one
            log.error("config reload failed, keeping the previous settings: %s", str(e).splitlines()[0] if str(e) else e)
            sd_notify(f"READY=1\nSTATUS={self.status_line()}", self.env)
            return
        old_state = self.ctx.state_dir
        self.settings = new
        self.ctx.settings = new
        self.ctx.state_dir = self.state_dir()
        if self.ctx.state_dir != old_state:
            self.ctx.cache.clear()  # incremental scan state belongs to the old state dir
            self.ctx.last_scan = None
        logging_setup.set_level(new.log_level)
        from occd.runtime import watch

        watch.restart(self)
        self.sync_jobs()
        log.info("config reloaded (mode %s, scan every %ss, state %s)", new.policy.mode, new.daemon.scan_interval_seconds,
                 self.ctx.state_dir)
        self.heartbeat()
        sd_notify(f"READY=1\nSTATUS={self.status_line()}", self.env)

    def supervise(self) -> None:
        """The main thread's loop until stop: signals, reloads, the watchdog, clock jumps, overdue scans."""
        wd = watchdog_interval(self.env)
        tick = min(TICK_S, wd) if wd else TICK_S
        last_ping = float("-inf")
        offset = self.clock() - self.mono()
        while True:
            if wd and self.mono() - last_ping >= wd * 0.9 and self.healthy():
                sd_notify("WATCHDOG=1", self.env)
                last_ping = self.mono()
            self.wake.wait(tick)
            self.wake.clear()
            if self.stop.is_set():
                return
            if self.reload_requested.is_set():
                self.reload_requested.clear()
                self.reload()
            if self.scan_requested.is_set():
                self.scan_requested.clear()
                self.scan_now()
            offset = self.check_clock(offset)
            self.check_overdue()

    # lifecycle -----------------------------------------------------------------------------------------------
    def run_forever(self, ledger, install_signals: bool = True) -> int:
        """Start the scheduler, supervise until SIGTERM/SIGINT, stop cleanly. Returns the exit code (0)."""
        self._stop_signal = None
        self._hard_exit = install_signals  # a real `occd run` process (not a test thread)
        self.ctx = self.make_context(ledger)
        self.job_times = {k: float(v) for k, v in (read_json(job_times_file()) or {}).items()
                          if isinstance(v, (int, float))}
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
                signal.signal(sig, self._on_signal)
        try:
            self.run_id = ledger.daemon_started(os.getpid(), mode=self.settings.policy.mode, now=self.clock())
        except Exception as e:  # noqa: BLE001
            log.warning("daemon start not recorded in the ledger: %s", e)
        self.resume_unfinished()
        self.scheduler = self.build_scheduler()
        from occd.runtime import watch

        watch.start(self)
        self.sync_jobs(initial=True)
        self.scheduler.start()
        log.info("occd daemon started (pid %s, mode %s, %s (%s), scan every %ss, state %s, jobs: %s)", os.getpid(),
                 self.settings.policy.mode, *self.watch_mode, self.scan_interval(), self.ctx.state_dir,
                 ", ".join(self._registered) or "none")
        self.heartbeat()
        sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS={self.status_line()}", self.env)
        try:
            self.supervise()
        finally:
            self.shutdown(ledger)
        return 0

    def shutdown(self, ledger) -> None:
        self.stop.set()
        what = self.running
        sd_notify("STOPPING=1\nSTATUS=stopping" + (f": finishing {what}" if what else ""), self.env)
        log.info("stopping (%s)%s", self._stop_signal or "shutdown",
                 f": waiting for {what} to finish its current step" if what else "")
        stopper = threading.Thread(target=self._stop_scheduler, name="occd-stop", daemon=True)
        stopper.start()
        grace = stop_grace_seconds(self.env)
        stopper.join(grace)
        forced = stopper.is_alive()
        if forced:
            # a step blocked in the kernel (a hung mount, a device) never checks the stop flag: exit anyway.
            # occd's writes are atomic (temp file + rename), so the file is the old one or the new one.
            log.error("%s did not finish within %.0fs of %s: exiting anyway (writes are atomic; nothing is "
                      "half-written)", self.running or "a job", grace, self._stop_signal or "the stop request")
        if self.run_id is not None:
            try:
                ledger.daemon_stopped(self.run_id, now=self.clock(), reason=self._stop_signal or "stopped")
            except Exception as e:  # noqa: BLE001
                log.warning("daemon stop not recorded in the ledger: %s", e)
        write_status({"pid": None, "started": self.started, "stopped": self.clock(), "lastCycle": self.last_cycle,
                      "jobs": self.last_results})
        log.info("occd daemon stopped")
        if forced and self._hard_exit:
            # the blocked worker thread would hold the interpreter's exit (its pool is joined at exit)
            logging.shutdown()
            os._exit(1)

    def _stop_scheduler(self) -> None:
        from occd.runtime import watch
        watch.stop(self)
        try:
            self.scheduler.shutdown(wait=True)
        except Exception as e:  # noqa: BLE001
            log.debug("scheduler shutdown: %s", e)

    def resume_unfinished(self) -> None:
        """Rotations cut off by a crash are resumed or rolled back before anything else runs."""
        from occd.rotation.recovery import resume_at_start

        resume_at_start(self.ctx, self.clock())

    def run_once(self, ledger, names=None) -> dict:
        """One full cycle, synchronously (`occd run --once`, the demo). Returns {job: (ok, summary)}."""
        from occd.jobs import run_cycle

        if self.ctx is None or self.ctx.ledger is not ledger:
            self.ctx = self.make_context(ledger)
        self.resume_unfinished()
        results = run_cycle(self.ctx, names, self.jobs)
        times = read_json(job_times_file()) or {}
        for spec in self.jobs:
            if spec.name in results and results[spec.name][0] and not spec.after_scan and spec.name != "scan":
                times[spec.name] = time.time()
        write_json(job_times_file(), times)
        return results


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


def _scalars(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if isinstance(v, (str, int, float, bool)) or v is None}


__all__ = ["Daemon"]

