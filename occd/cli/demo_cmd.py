"""`occd demo`."""

from __future__ import annotations

import click

from occd.cli.common import handle_errors


@click.command("demo")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Build the demo state in this directory and keep it (default: a new temporary directory).")
@click.option("--cycles", type=click.IntRange(1, 20), default=3, show_default=True, help="Daemon cycles to run.")
@handle_errors
def demo_cmd(keep, cycles):
    """Run occd on a built-in demo OpenClaw state: builds it, runs daemon cycles in act mode, shows status.

    Uses a temporary directory for everything (OpenClaw state, ledger, logs): no network, no API key, and
    nothing of yours is read or written.
    """
    from occd import demo

    demo.run(keep=keep, cycles=cycles, echo=click.echo)
    from occd.cli.status_cmd import history_cmd, status_cmd

    ctx = click.get_current_context()
    ctx.invoke(status_cmd, session=None, rotations=False, days=30, as_json=False)
    click.echo("\nActions taken (`occd history`):")
    ctx.invoke(history_cmd, agent=None, session=None, kind=None, since=None, limit=15, as_json=False)
    click.echo("\nExplore it:  OCCD_HOME=... OPENCLAW_STATE_DIR=... occd list --agent main  (paths above)")
