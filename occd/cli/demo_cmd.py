"""`occd demo`."""

from __future__ import annotations

import click

from occd.cli.common import emit_json, handle_errors, json_option


@click.command("demo")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Build the demo state in this directory and keep it (default: a temporary directory, removed "
                   "at the end).")
@click.option("--cycles", type=click.IntRange(1, 20), default=3, show_default=True, help="Daemon cycles to run.")
@json_option
@handle_errors
def demo_cmd(keep, cycles, as_json):
    """Run occd on a built-in demo OpenClaw state: builds it, runs daemon cycles in act mode, shows status.

    Uses a temporary directory for everything (OpenClaw state, ledger, logs), removed at the end unless
    --keep: no network, no API key, and nothing of yours is read or written.

    \b
    Examples:
      occd demo
      occd demo --keep /tmp/occd-demo     keep it, then explore with the line it prints
    """
    import shutil

    from occd.demo import run as demo

    if as_json:  # the cycles' summaries and `occd status --json`'s data, in one envelope
        report: list = []
        root = demo.run(keep=keep, cycles=cycles, echo=lambda *a, **k: None, report=report)
        try:
            from occd.report import status as st
            from occd.config import load_settings

            data = st.status(load_settings(), now=None)
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
        emit_json({"root": str(root), "kept": bool(keep), "explore": demo.explore_line(root) if keep else None,
                   "cycles": report, "status": data})
        return
    root = demo.run(keep=keep, cycles=cycles, echo=click.echo)
    try:
        from occd.cli.history_cmd import history_cmd
        from occd.cli.status_cmd import status_cmd

        ctx = click.get_current_context()
        ctx.invoke(status_cmd, session=None, rotations=False, days=30, as_json=False)
        click.echo("\nActions taken (`occd history`):")
        ctx.invoke(history_cmd, agent=None, session=None, kind=None, since=None, limit=15, as_json=False)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    if keep:
        click.echo(f"\nExplore it:\n  {demo.explore_line(root)}")
    else:
        click.echo("\nThe demo state was removed. To explore one: occd demo --keep DIR (it prints the line to use).")
