"""`occd run` (the daemon, or one cycle with --once)."""

from __future__ import annotations

import click

from occd.cli.common import emit_json, handle_errors, json_option, state_option


def parse_duration(text: str) -> int:
    """'30s', '5m', '1h', '2d' or plain seconds → seconds."""
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if t and t[-1] in mult:
            return int(float(t[:-1]) * mult[t[-1]])
        return int(float(t))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration like 30s, 5m, 1h") from None


@click.command("run")
@click.option("--once", is_flag=True, help="Run one full cycle (scan, apply, prune, maintain) and exit.")
@click.option("--act", is_flag=True, help="Act (policy.mode = act) instead of only observing.")
@click.option("--interval", default=None, help="Scan interval, e.g. 30s, 5m (default: daemon.scan_interval_seconds).")
@state_option
@click.option("--log-level", default=None, help="DEBUG, INFO, WARNING (default: config log_level).")
@json_option
@handle_errors
def run_cmd(once, act, interval, state_dir, log_level, as_json):
    """Run the daemon in the foreground (what the service manager starts)."""
    from occd import logging_setup
    from occd.cli.common import load_settings_from_ctx
    from occd.daemon import Daemon, InstanceLock
    from occd.ledger import Ledger

    overrides = {"state_dir": state_dir, "log_level": log_level}
    if act:
        overrides["policy"] = {"mode": "act"}
    if interval:
        overrides["daemon"] = {"scan_interval_seconds": parse_duration(interval)}

    def loader():
        return load_settings_from_ctx(**overrides)

    settings = loader()
    logging_setup.setup(settings.log_level, quiet_stderr=as_json)
    lock = InstanceLock().acquire()
    try:
        with Ledger.open() as ledger:
            d = Daemon(loader)
            if once:
                results = d.run_once(ledger)
                failed = [n for n, (ok, _) in results.items() if not ok]
                if as_json:
                    emit_json({"success": not failed, "jobs": {n: {"ok": ok, **s} for n, (ok, s) in results.items()}})
                else:
                    for n, (ok, s) in results.items():
                        text = ", ".join(f"{k} {v}" for k, v in s.items() if not isinstance(v, (dict, list)))
                        click.echo(f"{'ok    ' if ok else 'FAILED'} {n:<9} {text}")
                if failed:
                    raise SystemExit(1)
                return
            raise SystemExit(d.run_forever(ledger))
    finally:
        lock.release()
