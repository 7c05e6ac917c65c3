"""The SQLite engine: WAL, busy timeout, foreign keys, and real BEGIN IMMEDIATE for writes.

Python's sqlite3 driver normally opens transactions itself (lazily, with a plain deferred BEGIN right before
the first write), which defeats BEGIN IMMEDIATE. So the driver is put in autocommit mode (isolation_level None)
and SQLAlchemy's "begin" event emits the BEGIN we choose: DEFERRED for readers, IMMEDIATE for writers (the
write lock is taken up front and waited for up to the busy timeout, instead of a deadlock-prone upgrade later).
With WAL, readers (`occd status`) never block the daemon's writer and vice versa.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

from occd import paths
from occd.errors import BusyError, OccdError

BUSY_TIMEOUT_S = 5.0


def make_engine(path: Path, *, readonly: bool = False, busy_timeout: float = BUSY_TIMEOUT_S) -> Engine:
    # The connection is made here rather than from a URL: a path with spaces, '#' or '?' survives intact.
    target = f"file:{quote(str(path))}?mode=ro" if readonly else str(path)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(target, uri=readonly, timeout=busy_timeout, check_same_thread=False)

    eng = create_engine("sqlite+pysqlite://", creator=connect, poolclass=QueuePool, pool_size=5, max_overflow=10)

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            cur.execute("PRAGMA foreign_keys = ON")
            if not readonly:
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(eng, "begin")
    def _on_begin(conn: Connection):
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return eng


def translate(e: BaseException, path: Path) -> OccdError | None:
    """Map SQLite's operational errors to errors a user can act on."""
    orig = getattr(e, "orig", e)
    msg = str(orig).lower()
    shown = paths.display_path(path)
    if "locked" in msg or "busy" in msg:
        return BusyError(f"The ledger {shown} is locked by another process",
                         "another occd is writing; try again in a moment", code="LEDGER_BUSY")
    if "readonly" in msg or "read-only" in msg:
        return OccdError(f"The ledger {shown} is read-only",
                         "check the file's permissions and owner, or point OCCD_HOME at a writable folder",
                         code="LEDGER_READONLY")
    if "unable to open" in msg:
        return OccdError(f"Cannot open the ledger {shown}",
                         "check that its folder exists and is writable, or set OCCD_HOME", code="LEDGER_UNAVAILABLE")
    if "disk is full" in msg or "disk i/o" in msg:
        return OccdError(f"Cannot write the ledger {shown}: {orig}", "free some disk space", code="LEDGER_WRITE")
    if "malformed" in msg or "not a database" in msg:
        return OccdError(f"The ledger {shown} is damaged: {orig}",
                         "move it aside (occd starts a new one); VACUUM INTO copies sit next to it", code="LEDGER_CORRUPT")
    return None


@contextlib.contextmanager
def guarded(path: Path) -> Iterator[None]:
    try:
        yield
    except (OperationalError, DBAPIError, sqlite3.OperationalError, sqlite3.DatabaseError) as e:
        err = translate(e, path)
        if err is None:
            raise
        raise err from e


@contextlib.contextmanager
def write_tx(engine: Engine, path: Path) -> Iterator[Connection]:
    """A short write transaction that starts with BEGIN IMMEDIATE."""
    with guarded(path):
        with engine.connect() as conn:
            conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn


@contextlib.contextmanager
def read_tx(engine: Engine, path: Path) -> Iterator[Connection]:
    """A read snapshot (deferred BEGIN: takes no write lock)."""
    with guarded(path):
        with engine.connect() as conn:
            with conn.begin():
                yield conn
