"""`occd doctor`: one line per check (occd.health.doctor's registry), exit 1 when any failed."""

from __future__ import annotations

import click

from occd.cli.common import console, emit_json, error_line, handle_errors, json_option, use_color


@click.command("doctor")
@click.option("--check", "only", multiple=True, metavar="NAME", help="Run only this check (repeatable).")
@click.option("--online", is_flag=True,
              help="Also call the relevance model once (one output token, no session text) to see it answers.")
@json_option
@handle_errors
def doctor_cmd(only, online, as_json):
    """Check that occd can do its job: config, OpenClaw state and eras, ledger, service, daemon heartbeat, last
    scan, breakers, stale locks, backups and disk, optional parts (llm, mcp), gh.

    ✓ fine, ! optional or informational, ✗ needs attention (exit 1).

    \b
    Examples:
      occd doctor
      occd doctor --check service --check heartbeat
      occd doctor --online --check llm
      occd doctor --json | jq '.checks[] | select(.status == "fail")'
    """
    from occd.health.doctor import diagnose

    results = diagnose(only=list(only) or None, online=online)
    failed = [r for r in results if r.status == "fail"]
    err = None
    if failed:  # one line on stderr, the same with and without --json
        err = {"code": "DOCTOR_FAILED", "message": f"{len(failed)} check(s) failed: "
               + ", ".join(r.name for r in failed), "hint": failed[0].hint or failed[0].detail}
    if as_json:
        emit_json({"checks": [r.to_json() for r in results], "failed": len(failed)}, success=not failed, error=err)
        raise SystemExit(1 if failed else 0)
    tty = use_color()
    marks = {"ok": "✓" if tty else "OK  ", "warn": "!" if tty else "WARN", "fail": "✗" if tty else "FAIL"}
    c = console()
    width = max((len(r.name) for r in results), default=0)
    for r in results:
        line = f"{marks[r.status]} {r.name:<{width}}  {r.detail}"
        if r.hint and r.status != "ok":
            line += f" — {r.hint}"
        c.print(line, wrap=True, indent=len(marks[r.status]) + width + 3)
    if failed:
        c.print(f"\n{len(failed)} check{'s need' if len(failed) != 1 else ' needs'} attention.")
        click.echo(error_line(err["message"], err["hint"]), err=True)
        raise SystemExit(1)
