"""`occd run` (the daemon, or one cycle with --once) and `occd service install|uninstall|status|logs`."""

from __future__ import annotations

import click

from occd.cli.common import emit_json, handle_errors, json_option, state_option


def parse_duration(text: str) -> int:
    """'30s', '5m', '1h', '1d' or plain seconds → seconds (UsageError, exit 2, otherwise)."""
    from occd.runtime.service import parse_interval

    return parse_interval(text)


# ------------------------------------------------------------------------------------------------------ run
@click.command("run")
@click.option("--once", is_flag=True, help="Run one full cycle (scan, verify, lean, apply, rotate, prune, maintain, score) and exit.")
@click.option("--act", is_flag=True, help="Act (policy.mode = act) instead of only observing.")
@click.option("--interval", default=None, help="Scan interval, e.g. 30s, 5m (default: daemon.scan_interval_seconds).")
@state_option
@click.option("--log-level", default=None, help="DEBUG, INFO, WARNING (default: config log_level).")
@json_option
@handle_errors
def run_cmd(once, act, interval, state_dir, log_level, as_json):
    """Run the daemon in the foreground (what the service manager starts).

    SIGTERM/SIGINT finish the running step and exit 0; SIGHUP reloads the config; SIGUSR1 (or
    `occd scan-now`) starts a scan now. Logs go to the log file and to stderr. With --once: one cycle,
    exit 0, or 1 when a job failed. A second `occd run` exits 75 while one is running (`occd scan-now` asks
    that one to scan instead).

    \b
    Examples:
      occd run --once              one cycle in observe mode, a line per job
      occd run --once --act --json
      occd run --act --interval 2m
    """
    from occd.runtime import logging_setup
    from occd.cli.common import load_settings_from_ctx
    from occd.runtime.daemon import Daemon
    from occd.runtime.lock import InstanceLock
    from occd.ledger import Ledger

    overrides: dict = {"state_dir": state_dir, "log_level": log_level}
    if act:
        overrides["policy"] = {"mode": "act"}
    if interval:
        overrides["daemon"] = {"scan_interval_seconds": parse_duration(interval)}

    def loader():
        return load_settings_from_ctx(**overrides)

    settings = loader()
    logging_setup.setup(settings.log_level, quiet_stderr=as_json)
    with InstanceLock():
        if once:
            _require_state_dir(settings)
        with Ledger.open() as ledger:
            d = Daemon(loader)
            if not once:
                raise SystemExit(d.run_forever(ledger))
            code = _once(d, ledger, as_json)
    raise SystemExit(code)


def _require_state_dir(settings) -> None:
    """--once without an OpenClaw state: one clear line instead of every job logging the same error."""
    from occd.errors import OccdError
    from occd.openclaw.state import resolve_state_dir

    sd = resolve_state_dir(state_dir=settings.state_dir)
    if not sd.is_dir():
        raise OccdError(f"OpenClaw state directory {sd} does not exist",
                        "set OPENCLAW_STATE_DIR or occd's state_dir, or run OpenClaw once", code="STATE_NOT_FOUND")


def _once(d, ledger, as_json: bool) -> int:
    """One cycle; SIGTERM/SIGINT stop it between steps (like the daemon) instead of killing it mid-write."""
    import signal

    def on_signal(signum, frame):
        d.stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        results = d.run_once(ledger)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    failed = [n for n, (ok, _) in results.items() if not ok]
    interrupted = d.stop.is_set()
    if as_json:
        err = None
        if failed:  # the envelope's error, as for every failure: which jobs, and where the details are
            first = results[failed[0]][1] or {}
            err = {"code": "JOB_FAILED", "message": f"{len(failed)} job(s) failed: {', '.join(failed)}"
                   + (f" ({failed[0]}: {first.get('error')})" if first.get("error") else ""),
                   "hint": "details in `occd service logs` or the log file; the next cycle retries"}
        emit_json({"success": not failed, "interrupted": interrupted, "failed": failed,
                   "jobs": {n: {"ok": ok, **s} for n, (ok, s) in results.items()}}, success=not failed, error=err)
    else:
        from occd.cli.render import plain, terminal_width, wrap_text

        width = terminal_width()
        for n, (ok, s) in results.items():
            text = ", ".join(f"{k} {plain(v)}" for k, v in s.items() if not isinstance(v, (dict, list)))
            click.echo(wrap_text(f"{'ok    ' if ok else 'FAILED'} {n:<9} {text}", width, indent=17))
        if interrupted:
            click.echo("stopped by a signal before the cycle was complete")
        if failed:
            click.echo(f"Error: {len(failed)} job(s) failed: {', '.join(failed)} (hint: details in `occd service logs` "
                       "or the log file; the next cycle retries)", err=True)
    if failed and all(results[n][1].get("busy") for n in failed):
        return 75  # only busy (a locked ledger or store): the same cycle will work later
    return 1 if failed else 0


# -------------------------------------------------------------------------------------------------- service
_platform = click.option("--platform", type=click.Choice(["linux", "macos"]), default=None,
                         help="Target platform (default: this machine's).")


@click.group("service")
def service_group():
    """Install occd as a background service (systemd user unit / launchd agent)."""


def _show(plan, as_json: bool, dry_run: bool) -> None:
    if as_json:
        emit_json({"success": True, "dryRun": dry_run, **plan.to_json()})
        return
    if dry_run:
        for step in plan.steps:
            click.echo(step.describe())
            if step.kind == "write":
                click.echo(step.text.rstrip("\n"))
                click.echo(f"# end of {step.path}")
    else:
        for step in plan.steps:
            if step.kind in ("write", "remove"):
                click.echo(f"{'wrote' if step.kind == 'write' else 'removed'} {step.path}")
    if plan.openclaw_line():
        click.echo(plan.openclaw_line())
    for n in plan.notes:
        click.echo(f"note: {n}")


@service_group.command("install")
@click.option("--act", is_flag=True, help="Let the daemon act (default: observe and record only).")
@click.option("--interval", default=None, help="Scan interval, e.g. 30s, 5m, 1h.")
@click.option("--dry-run", is_flag=True, help="Print the files and commands instead of doing them.")
@_platform
@json_option
@handle_errors
def install(act, interval, dry_run, platform, as_json):
    """Write the unit/plist and start the service."""
    from occd.runtime import service

    plan = service.install_plan(platform, act=act, interval=interval)
    if not dry_run:
        service.execute(plan)
    _show(plan, as_json, dry_run)
    if not dry_run and not as_json:
        click.echo(f"started occd ({'act' if act else 'observe'} mode)")


@service_group.command("uninstall")
@click.option("--dry-run", is_flag=True, help="Print what would be done.")
@_platform
@json_option
@handle_errors
def uninstall(dry_run, platform, as_json):
    """Stop the service and remove its unit/plist (the ledger, logs and backups stay)."""
    from occd.runtime import service

    plan = service.uninstall_plan(platform)
    if not plan.installed:  # nothing under this HOME: say so, ask no service manager (exit 0: nothing to do)
        if as_json:
            emit_json({"success": True, "dryRun": dry_run, **plan.to_json()})
        else:
            click.echo(plan.notes[0])
        return
    if not dry_run:
        service.execute(plan)
    _show(plan, as_json, dry_run)
    if not dry_run and not as_json:
        click.echo("occd service removed")


@service_group.command("status")
@_platform
@json_option
@handle_errors
def status(platform, as_json):
    """The service manager's view of occd (see also `occd status`).

    --json: installed, unitPath, active, enabled and (Linux) lingering, without systemctl's own output."""
    from occd import paths
    from occd.errors import NotFoundError, OccdError
    from occd.runtime import service

    if as_json:
        emit_json(service.service_state(platform))
        return
    f = service.installed_path(platform)
    if not f.exists():
        raise NotFoundError(f"The occd service is not installed ({paths.display_path(f)} does not exist)",
                            "install it with `occd service install`")
    r = service.run_command(service.status_command(platform))
    no_bus = service.bus_error(r)
    if no_bus:  # not a bare "Failed to connect to bus": what it means and what to do
        raise OccdError(f"The occd service is installed ({paths.display_path(f)}), but your systemd user manager "
                        f"cannot be reached from this shell ({no_bus})", service.no_bus_hint(),
                        code="SERVICE_NO_BUS")
    if r.stdout:
        click.echo(r.stdout.rstrip("\n"))
    if r.stderr and r.returncode not in (0, 3):
        click.echo(r.stderr.rstrip("\n"), err=True)
    # systemctl status: 3 = installed but not running; that is an answer, not an error of ours
    raise SystemExit(0 if r.returncode in (0, 3) else r.returncode)


@service_group.command("logs")
@click.option("-n", "--lines", default=100, show_default=True, help="How many recent lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
@_platform
@json_option
@handle_errors
def logs(lines, follow, platform, as_json):
    """Recent log lines (journald on Linux, the occd log file elsewhere). --json: {"lines": [...]}."""
    from occd.runtime import service

    if not as_json:
        raise SystemExit(service.run_command(service.logs_command(platform, lines, follow), capture=False).returncode)
    from occd.errors import OccdError, UsageError

    if follow:
        raise UsageError("--json prints one document and cannot --follow", "drop -f, or follow without --json")
    cmd = service.logs_command(platform, lines, False)
    r = service.run_command(cmd)
    if r.returncode != 0:
        first = next((x for x in (r.stderr or "").splitlines() if x.strip()), f"exit code {r.returncode}")
        raise OccdError(f"{cmd[0]} failed: {first}", "`occd logs` reads occd's own log file")
    emit_json({"source": cmd[0], "lines": (r.stdout or "").splitlines()})


# --------------------------------------------------------------------------------------------------- scan-now
@click.command("scan-now")
@json_option
@handle_errors
def scan_now_cmd(as_json):
    """Ask the running daemon to scan now (SIGUSR1), instead of waiting for its next interval.

    Without a running daemon: `occd run --once` does one cycle in this process.

    \b
    Examples:
      occd scan-now && sleep 2 && occd status
    """
    import os
    import signal

    from occd.runtime.lock import InstanceLock
    from occd.errors import OccdError

    pid = InstanceLock.holder()
    if pid is None:
        raise OccdError("No occd daemon is running", "`occd run --once` runs one cycle here; `occd service install` "
                        "starts the daemon", code="DAEMON_NOT_RUNNING")
    if pid <= 0:
        raise OccdError("The daemon's lock file does not say its pid", "`occd status` shows what it is doing",
                        code="DAEMON_UNKNOWN")
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        raise OccdError(f"The daemon (pid {pid}) is gone", "`occd status`", code="DAEMON_NOT_RUNNING") from None
    except PermissionError:
        raise OccdError(f"Not allowed to signal the daemon (pid {pid})", "it runs as another user",
                        code="PERMISSION") from None
    if as_json:
        emit_json({"pid": pid, "requested": True})
        return
    click.echo(f"Asked the daemon (pid {pid}) to scan now; `occd status` shows the result.")
