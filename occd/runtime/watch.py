"""Events mode: the daemon wakes on what OpenClaw writes, and looks at a session when its run has ended.

What is watched (watchdog: inotify on Linux, FSEvents/kqueue elsewhere), non-recursively (occd.runtime.folders):
- each agent's `sessions/` folder (file era): transcripts (`*.jsonl`), run locks (`*.jsonl.lock`), `sessions.json`;
- each agent's `agent/` folder holding the agent database (database era): its `-wal` (and the database itself);
- the state folder and its `agents/` folder (a new agent, agents/ recreated) and the lean view's stats file.

The watcher thread never does cycle work: it notes each event under its session's key and a debounce thread waits
until that session has been quiet for `settle` seconds (occd.runtime.debounce: per session, so a busy neighbour or
a storm of events elsewhere never holds it back) with its own run lock released (a run holds
`<transcript>.lock`; the lock's release is itself an event), then calls `wake()` — the daemon runs its scan and
the jobs chained after it on its wake thread, as every other cycle does.

It heals and tells: a folder removed and recreated (another inode) is watched again within TICK_S seconds; a folder
that cannot be watched (inotify limits: ENOSPC, EMFILE; a filesystem without change notification) is polled every
TICK_S seconds instead, and retried every FULL_SYNC_S; events the kernel dropped (inotify's queue overflowed) make
a wake that looks at every agent. `describe()` says per agent whether it is watched or polled
and since when (the status file's `watch`). When nothing can be watched at all (no watchdog, no folder) the mode is
"polling" with the reason, and the daemon scans every `daemon.poll_interval_seconds` instead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from occd.runtime.debounce import Debouncer, key_of
from occd.runtime.folders import (POLLED, WATCHED, Folder, LostEvents, agent_of, ident, mounts, poll, remote_fs, summary,
                                  live_run_lock, lock_alive, wanted, why)
from occd.runtime.wake import WakeRunner

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


TICK_S = 2.0        # how often the roots are checked (removed, recreated) and polled folders compared
FULL_SYNC_S = 30.0  # how often every folder is checked and polled ones are tried again
WAKE_GAP_S = 1.0   # the daemon's wake cycles: at least this apart (and as far apart as the last one took)
BATCH_S = 0.2      # keys settling this close together wake once
RESYNC_MIN_S = 0.5  # at most this often a re-sync for sub-folder events (a storm of mkdirs)


class Watcher:
    """Watches `state_dir` and calls `wake(reason)` after each settled burst of OpenClaw writes, per session: a
    session is looked at when it has been quiet `settle` seconds and its run lock is released, whatever other
    sessions and agents do (occd.runtime.debounce). `run_ends(times)` (optional) gets the wall times of the
    runs' ends a wake is for; `on_change()` (optional) is called when a folder becomes watched or polled;
    `changed(ids)` (optional) gets, before each wake, the ids of the agents whose files settled (None when that
    cannot be said: a folder watched anew, removed or recreated, a key dropped from a full debouncer).

    Each folder is watched or, when that fails (inotify limits: ENOSPC, EMFILE; a filesystem without change
    notification), polled every TICK_S seconds (occd.runtime.folders); a folder removed and recreated is
    watched again. `start()` returns (mode, reason): ("events", what is watched) or ("polling", why not)."""

    def __init__(self, state_dir: Path, wake: Callable[[str], None], *, settle: float = 2.0,
                 extra_files: tuple[Path, ...] = (), monotonic=time.monotonic, clock=time.time,
                 run_ends: Callable[[list[float]], None] | None = None, on_change: Callable[[], None] | None = None,
                 changed: Callable[[set[str] | None], None] | None = None):
        self.state_dir = Path(state_dir)
        self.wake_cb = wake
        self.changed_cb = changed
        self._dropped = 0
        self._lost: LostEvents | None = None
        self.run_ends = run_ends
        self.on_change = on_change
        self.settle = settle
        self.extra = frozenset(str(p) for p in extra_files)
        self.extra_dirs = sorted({str(Path(p).parent) for p in self.extra})
        self.mono = monotonic
        self.clock = clock
        self.deb = Debouncer(settle)
        self.cond = threading.Condition()
        self.observer = None
        self.folders: dict[str, Folder] = {}
        self.stopping = False
        self.thread: threading.Thread | None = None
        self.wakes = 0
        self.events = 0
        self._resync = False
        self._next_full = 0.0
        self.kind = "native"
        self.mode, self.reason = "polling", "not started"

    @property
    def watched(self) -> set[str]:
        return {p for p, f in self.folders.items() if f.mode == WATCHED}

    def _interesting(self, path: str) -> bool:
        return interesting(path, self.extra)

    # the observer's thread: note and signal only ------------------------------------------------------------
    def _on_event(self, event) -> None:
        paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
        paths = [p.decode() if isinstance(p, bytes) else p for p in paths if p]
        if getattr(event, "is_directory", False):
            agents = str(self.state_dir / "agents")
            if any(p.startswith(agents) or p in self.folders for p in paths):
                with self.cond:
                    self._resync = True  # a new agent or folder, or a watched one removed: re-sync the watches
                    self.cond.notify()
            return
        keys = [key_of(p) for p in paths if self._interesting(p) and os.path.dirname(p) != str(self.state_dir)]
        if not keys:
            return
        t = self.mono()
        with self.cond:
            self.events += 1
            first = False
            for k in keys:
                first = self.deb.note(t, k) or first
            if first:  # otherwise the debounce thread already waits for an earlier deadline
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

    # the folders: watched, polled, healed ------------------------------------------------------------------
    def _schedule(self, path: str):
        # only the events that mean a write or a folder change: the kernel then never sends the opens and closes
        # (three events per appended line otherwise), which halves the cost of a storm of writes
        from watchdog import events as ev

        kinds = [ev.FileCreatedEvent, ev.FileModifiedEvent, ev.FileDeletedEvent, ev.FileMovedEvent,
                 ev.DirCreatedEvent, ev.DirDeletedEvent, ev.DirMovedEvent]
        return self.observer.schedule(self.handler, path, recursive=False, event_filter=kinds)

    def _unschedule(self, f: Folder) -> None:
        if f.watch is not None and self.observer is not None:
            try:
                self.observer.unschedule(f.watch)
            except Exception:  # noqa: BLE001 - already gone (its emitter stopped when the folder was removed)
                pass
            f.watch = None

    def _sync(self, full: bool = False) -> list[str]:
        """Make the folders match what exists: drop those gone (or recreated: another inode), watch new ones, poll
        those that cannot be watched; `full`: also check every folder's identity and try the polled ones again.
        Returns the folders newly watched or polled."""
        want = wanted(self.state_dir, self.extra_dirs)
        wset = set(want)
        now = self.clock()
        changed = False
        for path, f in list(self.folders.items()):
            if path not in wset or ident(path) != f.ident:  # gone, or removed and recreated
                self._unschedule(f)
                del self.folders[path]
                changed = True
        new, retry, polled_now = [], full, 0
        table = None
        for path in want:
            f = self.folders.get(path)
            if f is not None and not (retry and f.mode == POLLED):
                continue
            table = mounts() if table is None else table
            try:
                fstype = remote_fs(path, table)
                if fstype:  # inotify would watch it, but writes from the other machines send no event
                    raise OSError(f"{fstype}: a network filesystem sends no change events for others' writes")
                w = self._schedule(path)
            except (OSError, RuntimeError) as e:  # inotify limits (ENOSPC, EMFILE), a filesystem that cannot
                if isinstance(e, (FileNotFoundError, NotADirectoryError)):
                    continue  # gone meanwhile (a folder being removed): nothing to watch or poll
                if f is None:
                    self.folders[path] = self._polled(path, now, why(e))
                    new.append(path)
                    (log.debug if polled_now else log.warning)("%s cannot be watched (%s): polled every %.0fs "
                                                              "instead", path, why(e), TICK_S)
                    polled_now += 1
                else:
                    retry = False  # the limit still holds: the other polled folders wait for the next full sync
                continue
            self.folders[path] = Folder(path, WATCHED, now, ident(path), watch=w)
            new.append(path)
        if polled_now > 1:
            log.warning("%d folders cannot be watched: polled instead (`occd doctor`)", polled_now)
        if new or changed:
            if self.thread is not None:  # (before, the daemon has not scanned yet: it looks at everything anyway)
                self._note_changed(None)  # a folder watched anew, gone or recreated: every agent is looked at
            self._describe()
            if self.on_change is not None and self.thread is not None:
                try:
                    self.on_change()
                except Exception as e:  # noqa: BLE001
                    log.debug("on_change: %s", e)
        return new

    def _polled(self, path: str, now: float, reason: str) -> Folder:
        f = Folder(path, POLLED, now, ident(path), reason=reason)
        poll(f, self._interesting)
        return f

    def _describe(self) -> None:
        s = summary(self.state_dir, self.folders)
        polled = f", {s['polled']} polled" if s["polled"] else ""
        why = next((f.reason for f in self.folders.values() if f.reason), None)
        self.mode = "events" if s["watched"] else "polling"
        self.reason = (f"{self.kind}: {s['watched']} folders watched{polled}" + (f" ({why})" if why else "")
                       if s["watched"] else f"no folder can be watched ({why or 'none exists'}): polled")

    def _tick(self) -> bool:
        """Check the roots (removed, recreated), poll the polled folders, and now and then check everything.
        Returns whether a re-sync is needed."""
        resync = False
        for root in (str(self.state_dir), str(self.state_dir / "agents")):
            f = self.folders.get(root)
            if (f is None) == os.path.isdir(root) or (f is not None and ident(root) != f.ident):
                resync = True
        t = self.mono()
        for f in [f for f in self.folders.values() if f.mode == POLLED]:
            files, dirs = poll(f, self._interesting)
            resync |= dirs
            if files:
                with self.cond:
                    for p in files:
                        if os.path.dirname(p) != str(self.state_dir):
                            self.deb.note(t, key_of(p))
        return resync

    def start(self) -> tuple[str, str]:
        try:
            from watchdog.observers import Observer
        except ImportError:
            self.mode, self.reason = "polling", "the watchdog package is not installed"
            return self.mode, self.reason
        if not self.state_dir.is_dir():
            self.mode, self.reason = "polling", f"{self.state_dir} does not exist yet"
            return self.mode, self.reason
        self._resync = False
        self.handler = self._handler()
        try:
            self.observer = Observer()
            self.observer.daemon = True
            self.kind = type(self.observer).__name__.replace("Observer", "").lower() or "native"
            self.observer.start()  # started first: each folder's watch then starts (or fails) on its own
            self._lost = LostEvents(self._events_lost).attach()
            self._sync()
        except (OSError, RuntimeError) as e:
            self._stop_observer()
            self.folders.clear()
            self.mode, self.reason = "polling", f"watching could not start: {e}".splitlines()[0]
            return self.mode, self.reason
        if not self.watched:  # nothing can be watched: the daemon polls (its scan every poll interval)
            why = next((f.reason for f in self.folders.values() if f.reason), "no folder")
            self._stop_observer()
            self.folders.clear()
            self.mode, self.reason = "polling", f"watching could not start: {why}"
            return self.mode, self.reason
        self._next_full = self.mono() + FULL_SYNC_S
        self.thread = threading.Thread(target=self._loop, name="occd-watch", daemon=True)
        self.thread.start()
        return self.mode, self.reason

    def _loop(self) -> None:
        """The debounce thread: waits for settled sessions, then signals the daemon (never does the work)."""
        next_tick = self.mono() + TICK_S
        last_sync = float("-inf")
        while True:
            with self.cond:
                batch_at = None
                while not self.stopping:
                    t = self.mono()
                    if t >= next_tick or (self._resync and t - last_sync >= RESYNC_MIN_S):
                        break
                    w = self.deb.wait_for(t)
                    if w == 0:  # one wake for what settles together (a transcript, its lock, the index)
                        batch_at = t + BATCH_S if batch_at is None else batch_at
                        if t >= batch_at:
                            break
                        w = batch_at - t
                    limit = next_tick - t if not self._resync else min(next_tick - t, last_sync + RESYNC_MIN_S - t)
                    self.cond.wait(max(0.01, limit if w is None else min(w, limit)))
                if self.stopping:
                    return
                t = self.mono()
                resync = self._resync and t - last_sync >= RESYNC_MIN_S
                if resync:
                    self._resync = False
                due = self.deb.take(t)
            try:
                if t >= next_tick:
                    next_tick = t + TICK_S
                    resync |= self._tick()
                full = t >= self._next_full
                if resync or full:
                    last_sync = t
                    if full:
                        self._next_full = t + FULL_SYNC_S
                    fresh = self._sync(full=full)
                    if fresh and not full:  # what was written before the watch began: one look
                        with self.cond:
                            for p in fresh:
                                self.deb.note(self.mono(), p + "/")
            except Exception as e:  # noqa: BLE001 - keep watching whatever one folder does
                log.warning("watching: %s", e)
            if due:
                self._wake(due)

    def _wake(self, due: list[tuple[str, float]]) -> None:
        """Wake for the due sessions whose run lock is released; a live lock vetoes only its own session (its
        release is itself an event) and an agent's index while a run of that agent holds a lock. Other keys (a
        new folder, the agent database's -wal, the lean view's stats) wake when they settle."""
        now_m, now_w = self.mono(), self.clock()
        self._note_changed(self._agents_of(k for k, _ in due))
        woke, ended, busy = False, [], {}
        for key, last in due:
            if key.endswith(".jsonl") and lock_alive(Path(key + ".lock")):
                continue
            if key.endswith("/sessions.json"):  # the index a running session of this agent keeps rewriting: the
                folder = Path(key).parent       # session that ended wakes by its own key (lock released)
                if busy.setdefault(folder, live_run_lock(folder)):
                    continue
                woke = True  # a wake, but not a run's end of its own: OpenClaw rewrites the index after each run,
                continue     # and the run's transcript already counts it (one latency observation per run)
            woke = True
            if not key.endswith("/"):  # (a folder's key: a folder watched anew, lost events; no run of its own)
                ended.append(now_w - (now_m - last))
        if not woke:
            return
        self.wakes += 1
        if self.run_ends is not None and ended:
            try:
                self.run_ends(ended)
            except Exception as e:  # noqa: BLE001
                log.debug("run_ends: %s", e)
        try:
            self.wake_cb("a run ended")
        except Exception as e:  # noqa: BLE001 - the daemon's wake must not kill the watcher
            log.warning("wake failed: %s", e)

    def _agents_of(self, keys) -> set[str] | None:
        """The agents the keys are files of (the lean view's counts are none); None for a key elsewhere."""
        ids = set()
        for k in keys:
            a = agent_of(self.state_dir, k)
            if a is not None:
                ids.add(a)
            elif k not in self.extra:
                return None
        return ids

    def _note_changed(self, ids: set[str] | None) -> None:
        if self.changed_cb is None:
            return
        if self.deb.dropped != self._dropped:  # some keys were dropped unseen: their agents are not known
            self._dropped, ids = self.deb.dropped, None
        try:
            self.changed_cb(ids)
        except Exception as e:  # noqa: BLE001
            log.debug("changed: %s", e)

    def _events_lost(self) -> None:
        """The kernel dropped events (inotify's queue overflowed): whatever they were, a wake that looks at every
        agent (its key is the agents folder's, which names none of them: _agents_of)."""
        log.warning("the kernel dropped file events (inotify queue overflow): the next wake looks at every agent")
        with self.cond:
            self.deb.note(self.mono(), str(self.state_dir / "agents") + "/")
            self.cond.notify()

    def _stop_observer(self, wait: bool = True) -> None:
        if self._lost is not None:
            self._lost.detach()
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
        """The heartbeat's `watch`: the mode, the reason, wakes, and per agent watched or polled since when."""
        out = {"mode": self.mode, "reason": self.reason, "wakes": self.wakes}
        if self.folders:
            out.update(summary(self.state_dir, dict(self.folders)))
            out["pending"] = len(self.deb)
        return out


def probe(state_dir: Path) -> tuple[str, str]:
    """What mode a daemon would run in here (doctor, when none runs): start a watcher and stop it at once."""
    w = Watcher(state_dir, lambda _r: None)
    try:
        return w.start()
    finally:
        w.stop(wait=False)


__all__ = ["Debouncer", "WakeRunner", "Watcher", "interesting", "live_run_lock", "probe"]


# ---- the daemon's side (occd.runtime.daemon.Daemon calls these; kept here so the daemon module stays small) ----------
def start(daemon) -> None:
    """Start the wake runner and, unless `daemon.watch` is off, the watcher; set `daemon.watch_mode`."""
    if daemon.waker is None:
        daemon.waker = WakeRunner(lambda: daemon._dispatch("scan", wake=True), clock=time.time,
                                  min_gap=WAKE_GAP_S).start()
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
                extra_files=extra, run_ends=daemon.metrics.note_run_ends, on_change=lambda: _tell(daemon),
                changed=daemon.changes.note)
    daemon.watch_mode = w.start()
    daemon.watcher = w if daemon.watch_mode[0] == "events" else None
    if daemon.watcher is None:
        log.warning("polling every %ss: %s", min(d.scan_interval_seconds, d.poll_interval_seconds), daemon.watch_mode[1])


def _tell(daemon) -> None:
    """A folder became watched or polled: the status file says so now, not at the next cycle."""
    from occd.runtime.statusfile import daemon_status, write_status

    if daemon.ctx is not None:
        write_status(daemon_status(daemon, daemon.clock(), daemon.next_run()))


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
