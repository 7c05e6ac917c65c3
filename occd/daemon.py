"""`occd run`: the foreground daemon a service manager starts.

- APScheduler 3.11 BackgroundScheduler: scan every `daemon.scan_interval_seconds`, and right after each scan
  (chained in the same job, never racing it) apply and rotate; prune daily, maintain weekly, score hourly.
  coalesce=True, max_instances=1: a slow cycle is never run twice at once, missed runs collapse into one.
- Single instance: a non-blocking flock on `<runtime dir>/occd.lock`, holding our pid; a second `occd run`
  exits 75 naming the pid.
- Signals: SIGTERM/SIGINT set the stop flag (jobs check it between sessions, so the running step finishes and
  no file is left half-written), the scheduler shuts down waiting for it, exit 0. SIGHUP reloads the config.
- sd_notify (READY/STATUS/WATCHDOG/STOPPING) over NOTIFY_SOCKET when systemd started us; no dependency.
- The supervisor loop runs on time.monotonic, so a wall-clock jump neither stalls the watchdog nor the loop.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

from occd import paths
from occd.errors import BusyError

log = logging.getLogger("occd.daemon")


# ---------------------------------------------------------------------------------------------------- sd_notify
def sd_notify(message: str, env=None) -> bool:
    """Send one sd_notify datagram (e.g. "READY=1"). Returns False when not under systemd."""
    env = os.environ if env is None else env
    addr = env.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(message.encode())
        return True
    except OSError as e:
        log.debug("sd_notify failed: %s", e)
        return False


def watchdog_interval(env=None) -> float | None:
    """Half of WATCHDOG_USEC in seconds, when the watchdog is meant for this process."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return max(0.5, int(usec) / 1e6 / 2)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------- single instance
class InstanceLock:
    def __init__(self, path: Path | None = None):
        self.path = path or paths.runtime_dir() / "occd.lock"
        self.fd: int | None = None

    def acquire(self) -> "InstanceLock":
        paths.ensure_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 32).decode().strip() or "?"
            finally:
                os.close(fd)
            raise BusyError(f"occd is already running (pid {holder})",
                            "stop it first (occd service stop, or kill that pid), or use `occd status`",
                            code="ALREADY_RUNNING") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None

    @staticmethod
    def holder(path: Path | None = None) -> int | None:
        """The pid of a running daemon, or None (the lock is free or the file is absent)."""
        p = path or paths.runtime_dir() / "occd.lock"
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None  # we could lock it: nobody holds it
            except BlockingIOError:
                txt = os.read(fd, 32).decode().strip()
                return int(txt) if txt.isdigit() else -1
        finally:
            os.close(fd)


def status_file() -> Path:
    return paths.runtime_dir() / "status.json"


def write_status(data: dict) -> None:
    import orjson

    p = status_file()
    try:
        paths.ensure_dir(p.parent)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(orjson.dumps(data))
        os.replace(tmp, p)
    except OSError as e:
        log.debug("could not write %s: %s", p, e)


def read_status() -> dict | None:
    import orjson

    try:
        return orjson.loads(status_file().read_bytes())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------------- the daemon
class Daemon:
    def __init__(self, settings_loader, *, state_dir: Path | None = None, clock=time.time):
        self.load_settings = settings_loader
        self.settings = settings_loader()
        self._state_dir_override = state_dir
        self.clock = clock
        self.stop = threading.Event()
        self.reload_requested = threading.Event()
        self.scheduler = None
        self.ctx = None
        self.run_id = None
        self.started = clock()
        self.last_cycle: float | None = None
        self.cycle_lock = threading.Lock()

    # context -------------------------------------------------------------------------------------------------
    def state_dir(self) -> Path:
        from occd.openclaw import resolve_state_dir

        if self._state_dir_override:
            return Path(self._state_dir_override)
        return Path(self.settings.state_dir) if self.settings.state_dir else resolve_state_dir()

    def make_context(self, ledger):
        from occd.jobs import JobContext

        return JobContext(settings=self.settings, ledger=ledger, state_dir=self.state_dir(), clock=self.clock,
                          stop=self.stop)

    # jobs ----------------------------------------------------------------------------------------------------
    def scan_cycle(self) -> None:
        """scan → apply → rotate, in this order, never two at once."""
        from occd.jobs import JOBS, job_function, run_job

        if not self.cycle_lock.acquire(blocking=False):
            return
        try:
            for spec in JOBS:
                if spec.name == "scan" or spec.interval is None:
                    fn = job_function(spec)
                    if fn is not None and not self.stop.is_set():
                        run_job(self.ctx, spec, fn)
            self.last_cycle = self.clock()
            self.heartbeat()
        finally:
            self.cycle_lock.release()

    def periodic(self, spec) -> None:
        from occd.jobs import job_function, run_job

        fn = job_function(spec)
        if fn is not None and not self.stop.is_set():
            with self.cycle_lock:
                run_job(self.ctx, spec, fn)

    def next_scan(self) -> float | None:
        if self.scheduler is None:
            return None
        job = self.scheduler.get_job("scan")
        return job.next_run_time.timestamp() if job and job.next_run_time else None

    def heartbeat(self) -> None:
        nxt = self.next_scan()
        write_status({"pid": os.getpid(), "started": self.started, "lastCycle": self.last_cycle, "nextScan": nxt,
                      "mode": self.settings.policy.mode, "heartbeat": self.clock(), "stateDir": str(self.state_dir())})
        if self.run_id is not None:
            try:
                self.ctx.ledger.heartbeat(self.run_id, now=self.clock(), last_cycle=self.last_cycle, next_scan=nxt)
            except Exception as e:  # noqa: BLE001 - a busy ledger must not stop the daemon
                log.warning("heartbeat not recorded: %s", str(e).splitlines()[0])

    def schedule(self) -> None:
        from datetime import datetime, timedelta, timezone

        from apscheduler.schedulers.background import BackgroundScheduler

        from occd.jobs import JOBS, job_function

        sched = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1, "misfire_grace_time": 300})
        now = datetime.now(timezone.utc)
        sched.add_job(self.scan_cycle, "interval", seconds=self.settings.daemon.scan_interval_seconds, id="scan",
                      next_run_time=now)
        for spec in JOBS:
            if spec.name == "scan" or spec.interval is None or job_function(spec) is None:
                continue
            secs = spec.interval(self.settings)
            sched.add_job(self.periodic, "interval", args=[spec], seconds=secs, id=spec.name,
                          next_run_time=now + timedelta(seconds=min(secs, 60)))
        self.scheduler = sched

    # lifecycle -----------------------------------------------------------------------------------------------
    def _signal(self, signum, frame) -> None:
        if signum == signal.SIGHUP:
            self.reload_requested.set()
        else:
            log.info("signal %s: finishing the current step, then stopping", signal.Signals(signum).name)
            self.stop.set()

    def reload(self) -> None:
        try:
            self.settings = self.load_settings()
        except Exception as e:  # noqa: BLE001 - a broken config keeps the old one
            log.error("config reload failed, keeping the previous settings: %s", str(e).splitlines()[0])
            return
        self.ctx.settings = self.settings
        self.scheduler.reschedule_job("scan", trigger="interval", seconds=self.settings.daemon.scan_interval_seconds)
        log.info("config reloaded (mode %s, scan every %ss)", self.settings.policy.mode,
                 self.settings.daemon.scan_interval_seconds)
        sd_notify("RELOADING=0\nREADY=1")

    def run_forever(self, ledger, install_signals: bool = True) -> int:
        self.ctx = self.make_context(ledger)
        try:
            self.run_id = ledger.daemon_started(os.getpid(), mode=self.settings.policy.mode, now=self.clock())
        except Exception as e:  # noqa: BLE001
            log.warning("daemon start not recorded: %s", e)
        self.resume_unfinished()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, self._signal)
        self.schedule()
        self.scheduler.start()
        log.info("occd daemon started (pid %s, mode %s, scan every %ss, state %s)", os.getpid(),
                 self.settings.policy.mode, self.settings.daemon.scan_interval_seconds, self.ctx.state_dir)
        sd_notify(f"READY=1\nSTATUS=scanning every {self.settings.daemon.scan_interval_seconds}s\nMAINPID={os.getpid()}")
        wd = watchdog_interval()
        tick = min(wd or 5.0, 5.0)
        last_wd = time.monotonic()
        try:
            while not self.stop.wait(tick):
                if self.reload_requested.is_set():
                    self.reload_requested.clear()
                    sd_notify("RELOADING=1")
                    self.reload()
                if wd and time.monotonic() - last_wd >= wd:
                    sd_notify("WATCHDOG=1")
                    last_wd = time.monotonic()
        finally:
            sd_notify("STOPPING=1")
            log.info("stopping: waiting for the running step to finish")
            try:
                self.scheduler.shutdown(wait=True)
            except Exception:  # noqa: BLE001
                pass
            if self.run_id is not None:
                try:
                    ledger.daemon_stopped(self.run_id, now=self.clock())
                except Exception:  # noqa: BLE001
                    pass
            write_status({"pid": None, "stopped": self.clock(), "lastCycle": self.last_cycle})
            log.info("occd daemon stopped")
        return 0

    def resume_unfinished(self) -> None:
        """Rotations cut off by a crash are resumed or rolled back before anything else runs."""
        try:
            from occd.rotation.recovery import resume_all
        except ImportError:
            return
        try:
            resume_all(self.ctx)
        except Exception as e:  # noqa: BLE001
            log.error("resuming unfinished rotations failed: %s", e)

    def run_once(self, ledger, names=None) -> dict:
        from occd.jobs import run_cycle

        self.ctx = self.make_context(ledger)
        self.resume_unfinished()
        return run_cycle(self.ctx, names)
