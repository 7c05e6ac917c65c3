"""When a wake is due, per session (issue 29, point 3): pure timing, no I/O, the caller's monotonic clock.

Each event is noted under its key: the session it belongs to (a transcript and its run lock share the key
`<folder>/<id>.jsonl`), else the file itself (`sessions.json`, the agent database's `-wal`, the lean view's stats
file). A key is due once *it* has been quiet for `settle` seconds: another key's events (a neighbour's tool loop,
a storm of writes elsewhere) never push its time back.

Bounded: one entry per key (later events only move the key's time), at most `max_keys` keys; past that a new key
folds into its folder's key (making room by dropping the oldest key if need be), so memory stays bounded whatever
the storm. The
pending keys are kept in the order of their last event (a noted key moves to the end), so the due ones are a prefix:
`take` and `wait_for` cost what is due, not what is pending.
"""

from __future__ import annotations

MAX_KEYS = 4096


def key_of(path: str) -> str:
    """The debounce key of a file: a transcript and its run lock share the session's key."""
    return path[:-5] if path.endswith(".jsonl.lock") else path


def folder_of(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else key


class Debouncer:
    """`note(t, key)` for each event; `due(t)` lists the keys quiet for `settle` seconds, `take(t)` removes and
    returns them with their last event time; `wait_for(t)` says how long until the next one is due."""

    def __init__(self, settle: float, max_keys: int = MAX_KEYS):
        self.settle = float(settle)
        self.max_keys = max(1, int(max_keys))
        self.pending: dict[str, float] = {}  # key -> its last event's time, oldest first
        self.folded = 0                      # events whose key found no room (folded into a coarser key)
        self.dropped = 0                     # keys dropped to make room (their wake is not told which they were)

    def __len__(self) -> int:
        return len(self.pending)

    def note(self, t: float, key: str) -> bool:
        """Note an event; True when nothing was pending before (the caller wakes its waiting thread: a note
        never makes an already pending deadline earlier)."""
        pending = self.pending
        if key not in pending and len(pending) >= self.max_keys:
            self.folded += 1
            key = folder_of(key)
            if key not in pending and len(pending) >= self.max_keys:
                # no room even for the folder's key: the oldest key goes. Safe: this newer key wakes no earlier
                # than the one dropped would have, and the watcher makes that wake look at every agent (`dropped`)
                pending.pop(next(iter(pending)))
                self.dropped += 1
        was_empty = not pending
        pending.pop(key, None)
        pending[key] = t
        return was_empty

    def due(self, t: float) -> list[str]:
        out = []
        for k, last in self.pending.items():
            if t - last < self.settle:
                break
            out.append(k)
        return out

    def take(self, t: float) -> list[tuple[str, float]]:
        out = [(k, self.pending[k]) for k in self.due(t)]
        for k, _ in out:
            del self.pending[k]
        return out

    def wait_for(self, t: float) -> float | None:
        """Seconds until the next key is due (0: now), None when nothing is pending."""
        for last in self.pending.values():
            return max(0.0, last + self.settle - t)
        return None


__all__ = ["Debouncer", "MAX_KEYS", "folder_of", "key_of"]
