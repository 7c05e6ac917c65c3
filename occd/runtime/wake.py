"""The daemon's wake thread: the cycles asked for outside the schedule (split out of occd.runtime.watch)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger("occd.runtime.watch")


class WakeRunner:
    """The one thread that runs the cycles asked for outside the schedule: a settled burst of OpenClaw writes
    (the Watcher), a deferred decision becoming due (the apply job's wake_at). Requests coalesce: however many
    arrive, one cycle runs at the earliest time asked for, and one more if a request came while it ran. The
    daemon's cycle lock keeps these cycles and the scheduler's apart.

    `min_gap`: after a cycle, the next one waits at least max(min_gap, that cycle's duration) — a storm of
    sessions settling one after another (thousands of files written once) runs cycles at most half the time,
    not back to back; a run's end still waits at most one gap."""

    def __init__(self, run: Callable[[], None], *, clock=time.time, min_gap: float = 0.0):
        self.run_cycle = run
        self.clock = clock
        self.min_gap = float(min_gap)
        self.not_before = float("-inf")
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
                while not self.stopping and (self.due is None or max(self.due, self.not_before) > self.clock()):
                    wait = None if self.due is None else max(self.due, self.not_before) - self.clock()
                    self.cond.wait(None if wait is None else min(60.0, max(0.01, wait)))
                if self.stopping:
                    return
                self.due = None
            self.runs += 1
            t0 = time.monotonic()
            try:
                self.run_cycle()
            except Exception as e:  # noqa: BLE001 - keep the daemon's wake-ups alive
                log.error("cycle on wake failed: %s", e, exc_info=True)
            if self.min_gap > 0:
                self.not_before = self.clock() + max(self.min_gap, time.monotonic() - t0)

    def stop(self, timeout: float = 5.0) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self.thread.is_alive():
            self.thread.join(timeout)


class Changes:
    """The agents whose folders changed since a cycle last took them: the watcher notes them, and a cycle run on a
    wake looks again only at those (issue 29: a wake costs what changed). It starts as "every agent", and goes back
    to it whenever the watcher cannot name what changed (a folder watched anew, removed or recreated; a key dropped
    from a full debouncer): the next cycle then looks at every agent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[str] | None = None  # None: every agent

    def note(self, ids) -> None:
        """Agent ids that changed; None: something the watcher cannot name (every agent is looked at)."""
        with self._lock:
            if ids is None:
                self._ids = None
            elif self._ids is not None:
                self._ids.update(ids)

    def take(self) -> frozenset | None:
        """What changed since the last take (None: every agent), and start again from nothing."""
        with self._lock:
            out = None if self._ids is None else frozenset(self._ids)
            self._ids = set()
        return out


__all__ = ["Changes", "WakeRunner"]
