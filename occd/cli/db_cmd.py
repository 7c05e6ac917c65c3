"""`occd db upgrade|path|info`: where the ledger is, what is in it, and bringing its schema up to date."""

from __future__ import annotations

import click

from occd.cli.common import console, emit_json, handle_errors, json_option


@click.group("db")
def db_group():
    """The ledger: occd's SQLite database of observations, actions, backups and breakers."""


@db_group.command("path")
@json_option
@handle_errors
def path_cmd(as_json):
    """Print the ledger's path (OCCD_HOME moves it)."""
    from occd import paths

    p = paths.ledger_path()
    if as_json:
        emit_json({"path": str(p), "exists": p.exists()})
        return
    click.echo(str(p))


@db_group.command("upgrade")
@json_option
@handle_errors
def upgrade_cmd(as_json):
    """Create the ledger or bring its schema to the newest revision (a VACUUM INTO copy is made first)."""
    from occd import paths
    from occd.ledger import Ledger

    with Ledger.open(upgrade=False) as led:
        res = led.upgrade()
    out = {"success": True, "path": str(led.path), "fromRevision": res.from_revision, "toRevision": res.to_revision,
           "created": res.created, "backupPath": str(res.backup) if res.backup else None}
    if as_json:
        emit_json(out)
        return
    shown = paths.display_path(led.path)
    if not res.changed:
        click.echo(f"Ledger {shown} is up to date (revision {res.to_revision}).")
    elif res.created:
        click.echo(f"Ledger {shown} created at revision {res.to_revision}.")
    else:
        click.echo(f"Ledger {shown} upgraded: {res.from_revision} → {res.to_revision}.")
        click.echo(f"  Copy before the upgrade: {paths.display_path(res.backup)}")


@db_group.command("info")
@json_option
@handle_errors
def info_cmd(as_json):
    """Path, size, schema revision and row counts of the ledger (read-only)."""
    from occd import paths
    from occd.ledger import migrate

    p = paths.ledger_path()
    head = migrate.HEAD_REVISION
    out: dict = {"success": True, "path": str(p), "exists": p.exists(), "headRevision": head}
    if p.exists():
        from occd.ledger.engine import guarded, make_engine

        eng = make_engine(p, readonly=True)
        try:
            with guarded(p):
                rev = migrate.current_revision(eng)
                with eng.connect() as c:
                    tables = {r[0] for r in c.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")}
                    counts = {t: c.exec_driver_sql(f'SELECT COUNT(*) FROM "{t}"').scalar_one()
                              for t in sorted(tables) if t != "alembic_version" and not t.startswith("sqlite_")}
                    mode = c.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        finally:
            eng.dispose()
        size = sum(f.stat().st_size for f in [p, p.with_name(p.name + "-wal")] if f.exists())
        out.update(revision=rev, upToDate=rev == head, sizeBytes=size, journalMode=mode, tables=counts,
                   copies=[str(c) for c in migrate.backup_copies(p)])
    if as_json:
        emit_json(out)
        return
    c = console()
    c.print(f"Ledger:   {paths.display_path(p)}" + ("" if p.exists() else " (not created yet)"))
    if not p.exists():
        return
    state = "up to date" if out["upToDate"] else f"behind: run `occd db upgrade` to reach {head}"
    c.print(f"Revision: {out['revision']} ({state})")
    c.print(f"Size:     {out['sizeBytes'] / 1024:.0f} KB ({out['journalMode']})")
    for name, n in out["tables"].items():
        c.print(f"  {name:<22} {n:>10,}")
    for cp in out["copies"]:
        c.print(f"Copy:     {paths.display_path(cp)}")
