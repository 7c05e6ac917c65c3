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

from occd.ledger.kinds import ACTION_KINDS, JOB_KIND_PREFIX, is_action_kind  # noqa: E402,F401 (re-exported)


def __getattr__(name: str):
    if name in __all__:
        from occd.ledger import core

        return getattr(core, name)
    raise AttributeError(name)
