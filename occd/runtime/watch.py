"""Events mode: the daemon wakes on what OpenClaw writes, and looks at a session when its run has ended.

What is watched (watchdog: inotify on Linux, FSEvents/kqueue elsewhere), non-recursively:
- each agent's `sessions/` folder (file era): transcripts (`*.jsonl`), run locks (`*.jsonl.lock`), `sessions.json`;
- each agent's `agent/` folder (database era): the agent database's `-wal` (and the database file itself);
- the `agents/` folder (a new agent appears: its folders are added) and the lean view's stats file.

The watcher thread never does cycle work: it notes the event and a debounce thread waits until OpenClaw has been
quiet for `settle` seconds with no live run lock in the folders it touched (a run holds `<transcript>.lock`; the
lock's release is itself an event), then calls `wake()` — the daemon moves its scan job to now, so the scan and
the jobs chained after it run on the scheduler's one worker, as every other cycle does.

When watching cannot start (no watchdog, inotify limits, a filesystem without change notification) the mode is
"polling" with the reason, and the daemon scans every `daemon.poll_interval_seconds` instead.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("occd.runtime.watch")

WATCHED_SUFFIXES = (".jsonl", ".jsonl.lock", "sessions.json", "-wal", ".sqlite")


def interesting(path: str, extra: frozenset = frozenset()) -> bool:
    """An event on a file OpenClaw writes for a session (not occd's own temp files and backups)."""
    name = path.rsplit("/", 1)[-1]
    if path in extra:
        return True
    if name.startswith(".") or ".backup." in name or name.endswith(".tmp"):
        return False
    return name.endswith(WATCHED_SUFFIXES)


def watch_dirs(state_dir: Path) -> list[Path]:
    """The folders to watch under an OpenClaw state directory (those that exist)."""
    root = state_dir / "agents"
    out = [root] if root.is_dir() else []
    try:
        agents = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        agents = []
    for a in agents:
        out.append(a)  # its sessions/ and agent/ folders may appear later
        for sub in ("sessions", "agent"):
            if (a / sub).is_dir():
                out.append(a / sub)
    return out


def live_run_lock(folder: Path) -> bool:
    """A run holds one of the folder's transcripts right now (a `.jsonl.lock` whose pid lives)."""
    from occd.openclaw.locks import read_lock

    try:
        names = [n.name for n in folder.iterdir() if n.name.endswith(".jsonl.lock")]
    except OSError:
        return False
    for n in names:
        lock = read_lock(folder / n)
        if lock is not None and lock.alive:
            return True
    return False


class Debouncer:
    """Pure timing of the wake-ups (times from the caller's monotonic clock): `note(t, folder)` for each event,
    `due(t)` says whether to wake now (quiet for `settle` seconds since the last event)."""

    def __init__(self, settle: float):
        self.settle = settle
        self.last: float | None = None
        self.folders: set[Path] = set()

    def note(self, t: float, folder: Path | None) -> None:
        self.last = t
        if folder is not None:
            self.folders.add(folder)

    def due(self, t: float) -> bool:
        return self.last is not None and t - self.last >= self.settle

    def wait_for(self, t: float) -> float | None:
        """Seconds until due, None when nothing is pending."""
        return None if self.last is None else max(0.0, self.last + self.settle - t)

    def take(self) -> set[Path]:
        folders, self.folders, self.last = self.folders, set(), None
        return folders


class Watcher:
    """Watches `state_dir` and calls `wake(reason)` after each settled burst of OpenClaw writes. `start()`
    returns (mode, reason): ("events", what is watched) or ("polling", why not)."""

    def __init__(self, state_dir: Path, wake: Callable[[str], None], *, settle: float = 2.0,
                 extra_files: tuple[Path, ...] = (), monotonic=time.monotonic):
        self.state_dir = Path(state_dir)
        self.wake_cb = wake
        self.settle = settle
        self.extra = frozenset(str(p) for p in extra_files)
        self.mono = monotonic
        self.deb = Debouncer(settle)
        self.cond = threading.Condition()
        self.observer = None
        self.watched: set[str] = set()
        self.stopping = False
        self.thread: threading.Thread | None = None
        self.wakes = 0
        self._resync = False
        self.mode, self.reason = "polling", "not started"

    # the observer's thread: note and signal only ------------------------------------------------------------
    def _on_event(self, event) -> None:
        paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
        paths = [p.decode() if isinstance(p, bytes) else p for p in paths if p]
        if getattr(event, "is_directory", False):
            if any(p.startswith(str(self.state_dir / "agents")) for p in paths):
                with self.cond:
                    self.cond.notify()  # a new agent or folder: re-sync the watches
                    self._resync = True
            return
        if not any(interesting(p, self.extra) for p in paths):
            return
        with self.cond:
            self.deb.note(self.mono(), Path(paths[-1]).parent)
            self.cond.notify()

    def _handler(self):
        from watchdog.events import FileSystemEventHandler

        outer = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):  # noqa: D401 - watchdog's callback
                # opening, closing or touching the metadata of a file is not a write: a gateway reading the agent
                # database opens it read-write (a close-after-write with no change) and SQLite re-applies the
                # -wal's mode (an attribute event) every few seconds; a real write is a "modified", "created",
                # "moved" or "deleted" event
                if getattr(event, "event_type", "") in ("opened", "closed", "closed_no_write", "attrib"):
                    return
                outer._on_event(event)

        return Handler()

    def _sync(self) -> None:
        """Watch every folder that exists now (new agents, a sessions folder created after the start)."""
        want = [str(p) for p in watch_dirs(self.state_dir)]
        want += sorted({str(Path(p).parent) for p in self.extra if Path(p).parent.is_dir()})
        for d in want:
            if d not in self.watched:
                self.observer.schedule(self.handler, d, recursive=False)
                self.watched.add(d)

    def start(self) -> tuple[str, str]:
        try:
            from watchdog.observers import Observer
        except ImportError:
            self.mode, self.reason = "polling", "the watchdog package is not installed"
            return self.mode, self.reason
        if not (self.state_dir / "agents").is_dir() and not self.state_dir.is_dir():
            self.mode, self.reason = "polling", f"{self.state_dir} does not exist yet"
            return self.mode, self.reason
        self._resync = False
        self.handler = self._handler()
        try:
            self.observer = Observer()
            self.observer.daemon = True
            if (self.state_dir / "agents").is_dir():
                self._sync()
            else:
                self.observer.schedule(self.handler, str(self.state_dir), recursive=False)
                self.watched.add(str(self.state_dir))
            self.observer.start()
        except (OSError, RuntimeError) as e:  # inotify limits (ENOSPC/EMFILE), an unsupported filesystem
            self._stop_observer()
            self.mode, self.reason = "polling", f"watching could not start: {e}".splitlines()[0]
            return self.mode, self.reason
        self.thread = threading.Thread(target=self._loop, name="occd-watch", daemon=True)
        self.thread.start()
        kind = type(self.observer).__name__.replace("Observer", "").lower() or "native"
        self.mode, self.reason = "events", f"{kind}: {len(self.watched)} folders"
        return self.mode, self.reason

    def _loop(self) -> None:
        """The debounce thread: waits for a settled burst, then signals the daemon (never does the work)."""
        while True:
            with self.cond:
                while not self.stopping:
                    if self._resync:
                        break
                    w = self.deb.wait_for(self.mono())
                    if w == 0:
                        break
                    self.cond.wait(w if w is not None else None)
                if self.stopping:
                    return
                resync, self._resync = self._resync, False
                due = self.deb.due(self.mono())
                folders = self.deb.take() if due else set()
            if resync:
                try:
                    n = len(self.watched)
                    self._sync()
                except (OSError, RuntimeError) as e:
                    log.warning("could not watch a new folder: %s", e)
                else:
                    if len(self.watched) > n:  # what was written before the watch began: one look
                        with self.cond:
                            self.deb.note(self.mono(), None)
                            self.cond.notify()
                    self.reason = f"{self.reason.split(':')[0]}: {len(self.watched)} folders"
            if not due:
                continue
            if any(live_run_lock(f) for f in folders):
                continue  # a run is in progress: its lock's release wakes us
            self.wakes += 1
            try:
                self.wake_cb("a run ended")
            except Exception as e:  # noqa: BLE001 - the daemon's wake must not kill the watcher
                log.warning("wake failed: %s", e)

    def _stop_observer(self, wait: bool = True) -> None:
        obs, self.observer = self.observer, None
        if obs is None:
            return
        if not wait:  # watchdog's stop joins its emitter threads: let a daemon thread do it
            threading.Thread(target=self._quiet_stop, args=(obs, False), name="occd-watch-stop", daemon=True).start()
            return
        self._quiet_stop(obs, True)

    @staticmethod
    def _quiet_stop(obs, join: bool) -> None:
        try:
            obs.stop()
            if join and obs.is_alive():
                obs.join(5)
        except Exception:  # noqa: BLE001
            pass

    def stop(self, wait: bool = True) -> None:
        """Stop watching; `wait=False` does not wait for the threads to end (they are daemon threads: a probe in
        a short-lived command need not spend ~15 ms joining them)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self._stop_observer(wait)
        if wait and self.thread is not None:
            self.thread.join(5)

    def describe(self) -> dict:
        return {"mode": self.mode, "reason": self.reason, "wakes": self.wakes}


class WakeRunner:
    """The one thread that runs the cycles asked for outside the schedule: a settled burst of OpenClaw writes
    (the Watcher), a deferred decision becoming due (the apply job's wake_at). Requests coalesce: however many
    arrive, one cycle runs at the earliest time asked for, and one more if a request came while it ran. The
    daemon's cycle lock keeps these cycles and the scheduler's apart."""

    def __init__(self, run: Callable[[], None], *, clock=time.time):
        self.run_cycle = run
        self.clock = clock
        self.cond = threading.Condition()
        self.due: float | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name="occd-wake", daemon=True)
        self.runs = 0

    def start(self) -> "WakeRunner":
        self.thread.start()
        return self

    def request(self, at: float | None = None) -> None:
        """Run a cycle at `at` (epoch seconds; now when None), or sooner if already asked."""
        at = self.clock() if at is None else at
        with self.cond:
            if self.due is None or at < self.due:
                self.due = at
                self.cond.notify()

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.stopping and (self.due is None or self.due > self.clock()):
                    self.cond.wait(None if self.due is None else min(60.0, max(0.01, self.due - self.clock())))
                if self.stopping:
                    return
                self.due = None
            self.runs += 1
            try:
                self.run_cycle()
            except Exception as e:  # noqa: BLE001 - keep the daemon's wake-ups alive
                log.error("cycle on wake failed: %s", e, exc_info=True)

    def stop(self, timeout: float = 5.0) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self.thread.is_alive():
            self.thread.join(timeout)


def probe(state_dir: Path) -> tuple[str, str]:
    """What mode a daemon would run in here (doctor, when none runs): start a watcher and stop it at once."""
    w = Watcher(state_dir, lambda _r: None)
    try:
        return w.start()
    finally:
        w.stop(wait=False)


__all__ = ["Debouncer", "WakeRunner", "Watcher", "interesting", "live_run_lock", "probe", "watch_dirs"]


# ---- the daemon's side (occd.runtime.daemon.Daemon calls these; kept here so the daemon module stays small) ----------
def start(daemon) -> None:
    """Start the wake runner and, unless `daemon.watch` is off, the watcher; set `daemon.watch_mode`."""
    if daemon.waker is None:
        daemon.waker = WakeRunner(lambda: daemon._dispatch("scan"), clock=time.time).start()
    d = daemon.settings.daemon
    if not d.watch:
        daemon.watch_mode = ("polling", "daemon.watch is off")
        return
    extra: tuple[Path, ...] = ()
    try:
        from occd.lean import stats_path

        extra = (stats_path(),)
    except Exception:  # noqa: BLE001 - the lean view is optional
        pass
    # settle at least idle_seconds: the edit refuses a transcript written more recently than that
    settle = max(float(d.settle_seconds), float(daemon.settings.idle_seconds))
    w = Watcher(daemon.ctx.state_dir, lambda reason: daemon.waker.request(), settle=settle,
                extra_files=extra)
    daemon.watch_mode = w.start()
    daemon.watcher = w if daemon.watch_mode[0] == "events" else None
    if daemon.watcher is None:
        log.warning("polling every %ss: %s", min(d.scan_interval_seconds, d.poll_interval_seconds), daemon.watch_mode[1])


def stop(daemon) -> None:
    """Stop watching and the wake runner (shutdown: the runner's cycle in progress finishes its step)."""
    if daemon.watcher is not None:
        daemon.watcher.stop()
        daemon.watcher = None
    if daemon.waker is not None:
        daemon.waker.stop(timeout=30.0)
        daemon.waker = None


def restart(daemon) -> None:
    """SIGHUP: watch the (possibly new) state directory with the new settings."""
    if daemon.watcher is not None:
        daemon.watcher.stop()
        daemon.watcher = None
    start(daemon)
