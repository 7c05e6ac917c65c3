"""The check job (weekly, `check.interval_days`): `occd check` in its cheap form — every backup and archive the
ledger knows is present with its recorded size and sha256, the ledger passes its integrity checks. The result
and its problems are recorded in the ledger (`occd status --check` and `occd doctor` fail while one is open)."""

from __future__ import annotations

import logging

log = logging.getLogger("occd.jobs.check")


def run_form(ctx, read_data: bool) -> dict:
    from occd.ledger.check import run_check

    from occd.actions.backups import backup_files

    rep = run_check(ctx.ledger, read_data=read_data, trigger="auto", now=ctx.now(), stop=ctx.stop,
                    backup_files=backup_files(ctx.state_dir))
    for p in rep["problems"]:
        log.warning("check: %s (%s)", p["message"], p["hint"])
    return {"artifacts": rep["counts"]["artifacts"], "problems": len(rep["problems"]),
            "hashesRecorded": rep["counts"]["hashesRecordedNow"], "bytesRead": rep["bytesRead"]}


def run(ctx) -> dict:
    return run_form(ctx, read_data=False)
