"""`occd rotate SESSION [--dry-run] [--undo] [--json]`."""

from __future__ import annotations

import click

from occd.cli.common import (agent_option, complete_session, console, emit_json, handle_errors, json_option, load_settings_from_ctx,
                             ok_mark, require_session, state_option)


@click.command("rotate")
@click.argument("session", required=False, shell_complete=complete_session)
@agent_option
@state_option
@click.option("--dry-run", is_flag=True, help="Print the plan and the exact content the new session starts with.")
@click.option("--undo", is_flag=True, help="Put the archived session back (only before the new one's first turn).")
@click.option("--force", is_flag=True, help="Skip only the 'changed recently' idle check (never the lock check).")
@json_option
@handle_errors
def rotate_cmd(session, agent, state_dir, dry_run, undo, force, as_json):
    """Archive a session that keeps compacting and start a fresh one for the same session key, seeded with the
    workspace MEMORY.md, today's and yesterday's memory notes and the last exchanges.

    SESSION is an id, any unique part of one, or a session key (required). The old transcript stays in
    sessions/archive/ (`occd list --archived`).

    \b
    Examples:
      occd rotate agent:main:main --dry-run    the plan and the seed, nothing written
      occd rotate 3640                         rotate that session
      occd rotate --undo agent:main:main       put the old session back (before the new one's first turn)
    """
    from occd.rotation.rotate import rotate_session, undo_rotation

    session = require_session(session, "rotate", "occd rotate agent:main:main --dry-run")
    s = load_settings_from_ctx(agent=agent, state_dir=state_dir)
    c = console()
    if undo:
        res = undo_rotation(s, agent=agent, ref=session, force=force)
        if as_json:
            emit_json(res)
            return
        c.print(f"{ok_mark()} Rotation undone: {res['sessionKey']} is back on session {res['sessionId']}")
        c.print(f"  Transcript: {res['path']}")
        c.print(f"  The seeded session is kept in {res['seededSessionArchivedAt']}")
        return
    res = rotate_session(s, agent=agent, ref=session, dry_run=dry_run, force=force)
    if as_json:
        emit_json(res)
        return
    seed = res["seed"]
    if dry_run:
        c.print(f"Would rotate {res['sessionKey']} (session {res['sessionId']}, {res['compactions']} compaction{'s' if res['compactions'] != 1 else ''}):")
        for i, step in enumerate(res["steps"], 1):
            c.print(f"  {i}. {step}")
        c.print(f"  Seed: {seed['tokens']} tokens of a {seed['budgetTokens']}-token budget "
                f"({res['seedBudgetPercent']:g}% of {res['contextWindow']}); {seed['exchanges']} exchanges"
                + (f"; notes: {', '.join(seed['notes'])}" if seed["notes"] else "")
                + (f"; shrunk: {', '.join(seed['shrinkSteps'])}" if seed["shrinkSteps"] else ""))
        if res.get("modelCall"):
            c.print("  Cost: the seed is sent with chat.send — one model call.")
        c.print("\nThe new session would start with:" if res["era"] == "file" else "\nThe seed message:")
        for line in res["content"]:
            click.echo(line)
        c.print("(dry run: nothing was written)")
        return
    c.print(f"{ok_mark()} Session rotated: {res['sessionKey']}")
    c.print(f"  Old session: {res['oldSessionId']}" + (f" → archived at {res['archivePath']}" if res.get("archivePath") else ""))
    c.print(f"  New session: {res['newSessionId']}" + (f" ({res['newPath']})" if res.get("newPath") else ""))
    c.print(f"  Seed:        {seed['tokens']} tokens, {seed['exchanges']} exchanges"
            + (f", notes {', '.join(seed['notes'])}" if seed.get("notes") else ""))
    if res["era"] == "file":
        c.print(f"  Undo:        occd rotate --undo {res['sessionKey']} (before the first new turn)")
