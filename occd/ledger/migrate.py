"""Schema migrations, run programmatically from the installed package (occd.migrations), no alembic.ini.

`upgrade(engine, path)` brings a ledger to head: a new database is created at head; an existing one behind
head is first copied with `VACUUM INTO` next to it (the last BACKUPS_KEPT copies are kept), then upgraded.
A file lock beside the ledger serialises concurrent upgrades (the daemon starting while `occd status` runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from occd.errors import OccdError

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Engine

BACKUPS_KEPT = 3
# The newest migration's revision, so the read-only path (`occd status`) needs no alembic import (~0.13 s).
# tests/test_migrations.py checks that it equals alembic's head: a new migration cannot forget it.
HEAD_REVISION = "0003"
BACKUP_GLOB = "{name}.pre-*.bak"


@dataclass
class UpgradeResult:
    from_revision: str | None
    to_revision: str | None
    backup: Path | None
    created: bool

    @property
    def changed(self) -> bool:
        return self.from_revision != self.to_revision


def script_location() -> str:
    from importlib import resources

    return str(resources.files("occd.migrations"))


def alembic_config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    return cfg


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The ledger's revision, read from alembic's own table with plain SQL (None for a new database)."""
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        try:
            rows = raw.execute("SELECT version_num FROM alembic_version").fetchall()
        except Exception as e:  # noqa: BLE001 - no table yet: a database alembic never touched
            if "no such table" in str(e):
                return None
            raise
    if len(rows) > 1:
        raise OccdError("The ledger has several schema heads", "run `occd db upgrade`", code="LEDGER_OUTDATED")
    return rows[0][0] if rows else None


@contextlib.contextmanager
def _upgrade_lock(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".migrate.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def backup_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(BACKUP_GLOB.format(name=path.name)), key=lambda p: (p.stat().st_mtime, p.name))


def vacuum_into_backup(engine: Engine, path: Path, rev: str | None, now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now if now is not None else time.time()))
    dest = path.with_name(f"{path.name}.pre-{rev or 'base'}-{stamp}.bak")
    n = 1
    while os.path.lexists(dest):  # a name taken by anything, a dangling symlink too: VACUUM INTO would follow it
        dest = path.with_name(f"{path.name}.pre-{rev or 'base'}-{stamp}-{n}.bak")
        n += 1
    with engine.connect() as conn:  # VACUUM cannot run in a transaction: use the autocommit driver directly
        conn.connection.dbapi_connection.execute("VACUUM INTO ?", (str(dest),))
    os.chmod(dest, 0o600)
    for old in backup_copies(path)[:-BACKUPS_KEPT]:
        with contextlib.suppress(OSError):
            old.unlink()
    return dest


def refuse_newer(rev: str | None, path: Path) -> None:
    """A ledger whose schema is newer than this occd knows (revisions are 4-digit, in order): say so, instead
    of calling it "behind" or failing inside alembic."""
    if rev is not None and rev.isdigit() and HEAD_REVISION.isdigit() and int(rev) > int(HEAD_REVISION):
        raise OccdError(f"The ledger {path} was made by a newer occd (schema {rev}, this occd knows up to "
                        f"{HEAD_REVISION})", "upgrade occd, or point OCCD_HOME at another folder", code="LEDGER_NEWER")


def upgrade(engine: Engine, path: Path, target: str = "head", *, backup: bool = True) -> UpgradeResult:
    with _upgrade_lock(path):
        before = current_revision(engine)
        refuse_newer(before, path)
        if target == "head" and before == HEAD_REVISION:  # the usual case: no alembic import at all
            return UpgradeResult(before, before, None, False)
        head = head_revision() if target == "head" else target
        if before == head:
            return UpgradeResult(before, before, None, False)
        from sqlalchemy import inspect

        has_tables = bool(inspect(engine).get_table_names())
        if before is None and has_tables:
            raise OccdError(f"{path} is not an occd ledger (it has tables but no schema revision)",
                            "move it aside or set OCCD_HOME to another folder", code="LEDGER_FOREIGN")
        copy = vacuum_into_backup(engine, path, before) if (backup and before is not None) else None
        _run_alembic(engine, "upgrade", target, copy)
        return UpgradeResult(before, current_revision(engine), copy, before is None)


def downgrade(engine: Engine, path: Path, target: str) -> None:
    """For development and tests: step the schema back (data in dropped tables/columns is lost)."""
    with _upgrade_lock(path):
        _run_alembic(engine, "downgrade", target, None)


def _run_alembic(engine: Engine, direction: str, target: str, copy: Path | None) -> None:
    from alembic import command

    cfg = alembic_config()
    with engine.connect() as conn:
        # A batch migration recreates a table (copy, drop, rename); with foreign keys on, the DROP would
        # cascade into child rows. The pragma only changes outside a transaction, so it is set first (on the
        # autocommit driver connection), and the references are checked before it is turned back on.
        raw = conn.connection.dbapi_connection
        raw.execute("PRAGMA foreign_keys = OFF")
        try:
            conn.execution_options(sqlite_begin="IMMEDIATE")
            cfg.attributes["connection"] = conn
            getattr(command, direction)(cfg, target)
            conn.commit()
            bad = raw.execute("PRAGMA foreign_key_check").fetchall()
        finally:
            raw.execute("PRAGMA foreign_keys = ON")
    if bad:
        raise OccdError(f"The ledger {direction} left {len(bad)} broken references",
                        f"the copy made before it is {copy}" if copy else None, code="LEDGER_MIGRATION")
