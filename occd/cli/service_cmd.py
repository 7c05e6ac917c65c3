"""`occd service install|uninstall|status|logs`."""

from __future__ import annotations

import subprocess

import click

from occd.cli.common import emit_json, handle_errors, json_option

_platform = click.option("--platform", type=click.Choice(["linux", "macos"]), default=None,
                         help="Target platform (default: this machine's).")


@click.group("service")
def service_group():
    """Install occd as a background service (systemd user unit / launchd agent)."""


def _show(plan, as_json):
    if as_json:
        emit_json({"success": True, "dryRun": True, **plan.to_json()})
        return
    for path, text in plan.files.items():
        click.echo(f"# would write {path}\n{text}")
    for p in plan.remove:
        click.echo(f"# would remove {p}")
    for c in plan.to_json()["commands"]:
        click.echo(f"$ {c}")
    for n in plan.notes:
        click.echo(f"note: {n}")


@service_group.command("install")
@click.option("--act", is_flag=True, help="Let the daemon act (default: observe and record only).")
@click.option("--interval", default=None, help="Scan interval, e.g. 5m.")
@click.option("--dry-run", is_flag=True, help="Print the files and commands instead of doing them.")
@_platform
@json_option
@handle_errors
def install(act, interval, dry_run, platform, as_json):
    """Write the unit/plist and start the service."""
    from occd import service

    plan = service.install_plan(platform, act=act, interval=interval)
    if dry_run:
        _show(plan, as_json)
        return
    service.execute(plan)
    if as_json:
        emit_json({"success": True, **plan.to_json()})
        return
    for path in plan.files:
        click.echo(f"wrote {path}")
    click.echo(f"started occd ({'act' if act else 'observe'} mode)")
    for n in plan.notes:
        click.echo(f"note: {n}")


@service_group.command("uninstall")
@click.option("--dry-run", is_flag=True, help="Print what would be done.")
@_platform
@json_option
@handle_errors
def uninstall(dry_run, platform, as_json):
    """Stop the service and remove its unit/plist (the ledger and backups stay)."""
    from occd import service

    plan = service.uninstall_plan(platform)
    if dry_run:
        _show(plan, as_json)
        return
    service.execute(plan)
    click.echo("occd service removed" if not as_json else "")
    if as_json:
        emit_json({"success": True, **plan.to_json()})


@service_group.command("status")
@_platform
@handle_errors
def status(platform):
    """The service manager's view of occd (see also `occd status`)."""
    from occd import service

    cmd = service.status_command(platform)
    r = subprocess.run(cmd, text=True)
    raise SystemExit(0 if r.returncode in (0, 3) else r.returncode)


@service_group.command("logs")
@click.option("-n", "--lines", default=100, show_default=True)
@click.option("-f", "--follow", is_flag=True)
@_platform
@handle_errors
def logs(lines, follow, platform):
    """Recent log lines (journald on Linux, the occd log file elsewhere)."""
    from occd import service

    raise SystemExit(subprocess.run(service.logs_command(platform, lines, follow)).returncode)
