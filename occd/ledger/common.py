"""What the ledger's writes (occd.ledger.core) and reads (occd.ledger.queries) share: time as epoch seconds,
the JSON columns, the breaker row and the rotation states."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ROTATION_STATES = ("IDLE", "PENDING", "ARCHIVING", "ARCHIVED", "INJECTED", "COOLDOWN", "UNDONE")  # UNDONE: rotate --undo
ROTATION_UNFINISHED = ("PENDING", "ARCHIVING", "ARCHIVED", "INJECTED")


def ts(now: float | datetime | None) -> float:
    if now is None:
        return time.time()
    if isinstance(now, datetime):
        return now.timestamp()
    return float(now)


def local_day_start(now: float) -> float:
    lt = time.localtime(now)
    return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))


@dataclass(frozen=True)
class BreakerRecord:
    """A breaker row. Same field names as occd.policy.breaker.BreakerState, so either converts with **asdict."""

    agent: str
    kind: str
    state: str = "closed"
    opened_at: float | None = None
    failures: int = 0
    cooloff_minutes: float | None = None
    trial_started_at: float | None = None
    reason: str | None = None
    updated_at: float | None = None


def _dumps(obj: Any) -> str | None:
    if obj is None:
        return None
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)


def _loads(s: str | None) -> Any:
    return json.loads(s) if s else None
