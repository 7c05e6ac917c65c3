"""occd's ledger: one SQLite database of what occd saw and did (never transcript text).

    from occd.ledger import Ledger
    with Ledger.open() as led:            # creates or upgrades the schema (alembic, shipped as occd.migrations)
        led.record_action("edit", "main", sid, outcome="ok", before={...}, after={...}, now=now)

SQLAlchemy and sqlmodel are imported on first use of these names, never by `import occd.ledger` alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from occd.ledger.core import BreakerRecord, Ledger

__all__ = ["Ledger", "BreakerRecord"]

# Every action kind occd records (Ledger.record_action refuses others): the one list `history --kind` accepts
# and its help names. A job's own failure is recorded as `job:<name>` (JOB_KIND_PREFIX).
ACTION_KINDS = ("edit", "strip", "clone", "restore", "rotate", "rotate-undo", "archive", "compact", "lean",
                "lean-check", "verify-strip")
JOB_KIND_PREFIX = "job:"


def is_action_kind(kind: str) -> bool:
    return kind in ACTION_KINDS or (kind.startswith(JOB_KIND_PREFIX) and len(kind) > len(JOB_KIND_PREFIX))


def __getattr__(name: str):
    if name in __all__:
        from occd.ledger import core

        return getattr(core, name)
    raise AttributeError(name)
