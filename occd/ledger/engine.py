"""The SQLite engine: WAL, busy timeout, foreign keys, and real BEGIN IMMEDIATE for writes.

Python's sqlite3 driver normally opens transactions itself (lazily, with a plain deferred BEGIN right before
the first write), which defeats BEGIN IMMEDIATE. So the driver is put in autocommit mode (isolation_level None)
and SQLAlchemy's "begin" event emits the BEGIN we choose: DEFERRED for readers, IMMEDIATE for writers (the
write lock is taken up front and waited for up to the busy timeout, instead of a deadlock-prone upgrade later).
With WAL, readers (`occd status`) never block the daemon's writer and vice versa.

Read-only opens (`occd status`, `history`, `db info`, ...) use `ReadOnlyDB`: the stdlib sqlite3 driver behind
the same small interface (connect / exec_driver_sql / rows with `_mapping`), so they never import SQLAlchemy
(~0.15 s of a command that should take 0.2 s). The schema is fixed by the migrations; the queries are plain SQL.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import quote

from occd import paths
from occd.errors import BusyError, OccdError

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Connection, Engine

BUSY_TIMEOUT_S = 5.0


class _Row:
    """A result row: unpacks like a tuple, `_mapping` like SQLAlchemy's."""

    __slots__ = ("_t", "_mapping")

    def __init__(self, t: tuple, names: tuple[str, ...]):
        self._t = t
        self._mapping = dict(zip(names, t))

    def __iter__(self):
        return iter(self._t)

    def __getitem__(self, i):
        return self._t[i]

    def __len__(self):
        return len(self._t)


class _Result:
    def __init__(self, cur: sqlite3.Cursor):
        self._cur = cur
        self._names = tuple(d[0] for d in cur.description or ())
        self.rowcount = cur.rowcount

    def __iter__(self):
        for t in self._cur:
            yield _Row(t, self._names)

    def first(self) -> _Row | None:
        t = self._cur.fetchone()
        return _Row(t, self._names) if t is not None else None

    def scalar(self) -> Any:
        t = self._cur.fetchone()
        return t[0] if t is not None else None

    def scalar_one(self) -> Any:
        t = self._cur.fetchone()
        if t is None:
            raise sqlite3.OperationalError("no row where one was expected")
        return t[0]


class _RawConn:
    """What `conn.connection.dbapi_connection` gives under SQLAlchemy: the sqlite3 connection."""

    def __init__(self, raw: sqlite3.Connection):
        self.dbapi_connection = raw


class _ROConn:
    def __init__(self, raw: sqlite3.Connection):
        self._raw = raw
        self.connection = _RawConn(raw)
        self._begin = "DEFERRED"

    def execution_options(self, sqlite_begin: str = "DEFERRED", **_kw) -> "_ROConn":
        self._begin = sqlite_begin
        return self

    def exec_driver_sql(self, sql: str, params: Any = ()) -> _Result:
        return _Result(self._raw.execute(sql, params))

    @contextlib.contextmanager
    def begin(self) -> Iterator["_ROConn"]:
        self._raw.execute(f"BEGIN {self._begin}")
        try:
            yield self
        finally:
            self._raw.execute("ROLLBACK")  # nothing to keep: this connection only reads


class ReadOnlyDB:
    """The ledger opened read-only (`mode=ro`) through the stdlib driver: one connection, opened on first use."""

    def __init__(self, path: Path, busy_timeout: float = BUSY_TIMEOUT_S):
        self.path = path
        self.busy_timeout = busy_timeout
        self._raw: sqlite3.Connection | None = None

    @contextlib.contextmanager
    def connect(self) -> Iterator[_ROConn]:
        if self._raw is None:
            raw = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, timeout=self.busy_timeout,
                                  check_same_thread=False, isolation_level=None, factory=LedgerConnection)
            raw.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._raw = raw
        yield _ROConn(self._raw)

    def dispose(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None


def make_engine(path: Path, *, readonly: bool = False, busy_timeout: float = BUSY_TIMEOUT_S):
    """A SQLAlchemy engine for writers; a ReadOnlyDB (stdlib sqlite3, no SQLAlchemy import) when `readonly`."""
    if readonly:
        return ReadOnlyDB(path, busy_timeout)
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import QueuePool

    # The connection is made here rather than from a URL: a path with spaces, '#' or '?' survives intact.
    target = str(path)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(target, timeout=busy_timeout, check_same_thread=False, factory=LedgerConnection)

    eng = create_engine("sqlite+pysqlite://", creator=connect, poolclass=QueuePool, pool_size=5, max_overflow=10)

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            cur.execute("PRAGMA foreign_keys = ON")
            _set_wal(cur, busy_timeout)
            cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(eng, "begin")
    def _on_begin(conn: Connection):
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return eng


def _set_wal(cur: sqlite3.Cursor, busy_timeout: float) -> None:
    """Turn WAL on (it stays on in the file). Switching a journal mode takes the database's exclusive lock and
    SQLite answers "database is locked" at once, without its busy handler, while another connection holds a
    lock: two processes opening a new ledger together (the daemon and `occd status`) met that. So the switch is
    retried for up to the busy timeout, as any other lock is waited for."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.002
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            msg = str(e).lower()
            if ("locked" not in msg and "busy" not in msg) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class _Cursor(sqlite3.Cursor):
    """OpenClaw's data may carry lone surrogates (a JSON "\\ud83d", occd.transcript.jsontext); SQLite stores UTF-8, which
    cannot hold them: every parameter is written (and looked up) with them as the escape they were read from."""

    def execute(self, sql, parameters=(), /):
        return super().execute(sql, _clean_params(parameters))

    def executemany(self, sql, seq, /):
        return super().executemany(sql, (_clean_params(p) for p in seq))


class LedgerConnection(sqlite3.Connection):
    def cursor(self, factory=_Cursor):
        return super().cursor(factory)


def _clean_params(p):
    if isinstance(p, str):
        if p.isascii():
            return p
        from occd.transcript.jsontext import escape_surrogates, has_surrogates

        return escape_surrogates(p) if has_surrogates(p) else p
    if isinstance(p, tuple):
        return tuple(_clean_params(v) for v in p)
    if isinstance(p, list):
        return [_clean_params(v) for v in p]
    if isinstance(p, dict):
        return {k: _clean_params(v) for k, v in p.items()}
    return p


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
    except Exception as e:
        sa = sys.modules.get("sqlalchemy.exc")
        if not isinstance(e, sqlite3.Error) and not (sa is not None and isinstance(e, sa.DBAPIError)):
            raise
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
    if isinstance(engine, ReadOnlyDB):
        with guarded(path):
            with engine.connect() as conn:
                with conn.begin():
                    yield conn
        return
    with guarded(path):
        with engine.connect() as conn:
            with conn.begin():
                yield conn
