"""`occd check [--read-data] [--forget ID]`: are the backups, archives and the ledger occd keeps intact?"""

from __future__ import annotations

import click

from occd.cli.common import console, emit_json, handle_errors, json_option


@click.command("check")
@click.option("--read-data", is_flag=True, help="Also parse every backup and archive as its session's transcript "
              "(reads everything; slower).")
@click.option("--forget", "forget_id", default=None, metavar="ID",
              help="Accept the loss of a damaged or missing artifact (backup:N, archive:N, rotation:N): recorded, "
                   "and later checks skip it.")
@json_option
@handle_errors
def check_cmd(read_data, forget_id, as_json):
    """Check every backup and archive occd made (present, same size and sha256 as when made) and the ledger
    (PRAGMA integrity_check, foreign keys). Exit 1 naming each problem and what to do.

    \b
      occd check                     size and sha256 of every artifact, the ledger's integrity
      occd check --read-data         and each one loads as the transcript of its session
      occd check --forget backup:12  the loss of backup 12 is accepted (its problem closes)
    """
    from occd import paths
    from occd.ledger import check as chk
    from occd.ledger import Ledger

    if not paths.ledger_path().exists():  # nothing made yet: a check never creates the ledger
        if forget_id:
            from occd.errors import OccdError

            raise OccdError(f"No ledger yet: no artifact {forget_id!r} to forget", "`occd check` lists problems",
                            code="NOT_FOUND")
        note = "no ledger yet: occd has made no backup or archive to check"
        if as_json:
            emit_json({"success": True, "readData": read_data, "artifacts": [], "problems": [], "stillOpen": [],
                       "note": note})
        else:
            click.echo(f"OK: {note}.")
        return
    with Ledger.open() as led:
        if forget_id:
            res = chk.forget(led, forget_id)
            if as_json:
                emit_json(res)
            else:
                click.echo(f"Forgotten {res['forgotten']} ({res['path']}): {res['note']}.")
            return
        rep = chk.run_check(led, read_data=read_data, backup_files=_backup_files())
    problems = rep["problems"] + rep["stillOpen"]
    if as_json:
        err = None
        if problems:
            err = {"code": problems[0]["code"], "message": f"{len(problems)} problem(s): "
                   + "; ".join(p["message"] for p in problems[:5]), "hint": problems[0]["hint"]}
        emit_json(rep, success=not problems, error=err)
    else:
        _render(rep, problems)
    if problems:
        raise SystemExit(1)


def _backup_files():
    """The backup files in OpenClaw's state (None when it cannot be found: then no file is called unrecorded)."""
    from occd.actions.backups import backup_files
    from occd.cli.common import load_settings_from_ctx
    from occd.errors import OccdError
    from occd.openclaw.state import resolve_state_dir

    try:
        return backup_files(resolve_state_dir(state_dir=load_settings_from_ctx().state_dir))
    except OccdError:
        return None


def _render(rep: dict, problems: list[dict]) -> None:
    from occd.units import human_bytes

    c = console()
    n = rep["counts"]
    form = "size, sha256 and transcript load" if rep["readData"] else "size and sha256"
    c.print(f"{n['artifacts']} artifact(s) checked ({form}), {human_bytes(rep['bytesRead'])} read; "
            f"ledger integrity {'ok' if rep['ledger']['integrity'] == 'ok' else 'FAILED'}, "
            f"{rep['ledger']['foreignKeyViolations']} foreign-key violation(s).", highlight=False)
    if n["hashesRecordedNow"]:
        c.print(f"{n['hashesRecordedNow']} artifact(s) made before occd recorded hashes: their size and sha256 were "
                "recorded by this check (later checks compare against them).", highlight=False)
    for a in rep["artifacts"]:
        if a.get("note") and a["status"] != "recorded":
            c.print(f"  {a['id']}: {a['note']}", highlight=False)
    if not problems:
        c.print("OK: everything occd keeps is intact.", highlight=False)
        return
    for p in rep["problems"]:
        click.echo(f"PROBLEM {p['id']}: {p['message']}\n  what to do: {p['hint']}", err=True)
    for p in rep["stillOpen"]:
        click.echo(f"STILL OPEN {p['id']} (found by an earlier check): {p['message']}\n  what to do: {p['hint']}",
                   err=True)
