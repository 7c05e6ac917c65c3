"""`occd logs [-f] [-n N] [--since]`: occd's own log file (the daemon and every cycle write it, whatever the
service manager does with stderr)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from occd.cli.common import emit_json, handle_errors, json_option
from occd.config import redact  # credentials in URLs never printed

_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def log_files() -> list[Path]:
    """The log and its rotated copies, oldest first."""
    from occd import paths
    from occd.runtime import logging_setup

    base = paths.log_dir() / "occd.log"
    older = [base.with_name(f"occd.log.{i}") for i in range(logging_setup.BACKUPS, 0, -1)]
    return [p for p in older + [base] if p.exists()]


def entry_time(line: str) -> float | None:
    m = _TS.match(line)
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))


def log_entry(line: str) -> dict:
    """One entry for --json: its time, level, logger and message when it has the log file's format."""
    import re

    m = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?) (\w+) ([\w.]+): (.*)$", line, re.S)
    if not m:
        return {"time": None, "level": None, "logger": None, "message": line}
    return {"time": entry_time(line), "level": m.group(2), "logger": m.group(3), "message": m.group(4)}


def read_entries(files: list[Path], since: float | None) -> list[str]:
    """Lines of the log files; with `since`, entries from then on (a traceback's lines follow their entry)."""
    out: list[str] = []
    keep = since is None
    for p in files:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            t = entry_time(line)
            if t is not None and since is not None:
                keep = t >= since
            if keep:
                out.append(line)
    return out


@click.command("logs")
@click.option("-n", "--lines", "lines", type=click.IntRange(min=0), default=50, show_default=True,
              help="How many recent lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C stops).")
@click.option("--since", default=None, help="Only entries since: 1h, 30m, today, yesterday, 2026-11-22 ...")
@click.option("--journal", is_flag=True,
              help="Read the systemd user service's journal (journalctl) instead of occd's log file.")
@json_option
@handle_errors
def logs_cmd(lines, follow, since, journal, as_json):
    """occd's log: what the daemon and every cycle did (the file under the log dir; rotated at 5 MB).

    Without a log file, and with --journal, the installed systemd user service's journal is read
    (journalctl --user -u occd.service).

    \b
    Examples:
      occd logs -n 100
      occd logs --since 1h
      occd logs -f
      occd logs --journal --since today
    """
    from occd import paths
    from occd.errors import NotFoundError
    from occd.report.status import parse_since

    if as_json and follow:
        from occd.errors import UsageError

        raise UsageError("--json prints one document and cannot --follow", "drop -f, or follow without --json")
    files = log_files()
    base = paths.log_dir() / "occd.log"
    since_ts = parse_since(since, time.time())
    if journal or (not files and not follow and _service_installed()):
        return _journal(lines if since_ts is None or lines != 50 else None, follow, since_ts, as_json)
    if not files and not follow:
        raise NotFoundError(f"No log at {paths.display_path(base)} yet",
                            "the daemon and `occd run --once` write it; `occd service status` says if it runs")
    out = read_entries(files, since_ts)
    if since_ts is None or lines != 50:
        out = out[-lines:] if lines else []
    if as_json:
        emit_json({"source": str(base), "entries": [redact(log_entry(x)) for x in out]})
        return
    for line in out:
        click.echo(redact(line))
    if follow:
        _follow(base)


def _service_installed() -> bool:
    """Is occd installed as a systemd user service here (its journal then holds the daemon's output)?"""
    from occd.runtime import service

    try:
        return service.detect_platform() == "linux" and service.installed_path("linux").exists()
    except Exception:  # noqa: BLE001 - an unsupported platform has no journal
        return False


def _journal(lines: int | None, follow: bool, since: float | None, as_json: bool = False) -> None:
    from occd.runtime import service
    from occd.errors import OccdError, UsageError

    if service.detect_platform() != "linux":
        raise UsageError("--journal reads journald, which this platform does not have",
                         "`occd logs` reads occd's own log file")
    cmd = service.journal_command(lines, follow, since)
    if follow:  # straight to the terminal until Ctrl-C
        service.run_command(cmd, capture=False)
        return
    r = service.run_command(cmd)
    if r.returncode != 0:
        first = next((x for x in (r.stderr or "").splitlines() if x.strip()), f"exit code {r.returncode}")
        raise OccdError(f"journalctl failed: {first}", "`occd logs` without --journal reads occd's own log file")
    if as_json:
        emit_json({"source": "journal", "entries": [{"time": None, "level": None, "logger": None,
                                                     "message": redact(x)} for x in r.stdout.splitlines()]})
        return
    click.echo(redact(r.stdout), nl=False)


def _follow(path: Path, poll: float = 0.5) -> None:
    """Print what is appended to `path`, across rotations (a new inode is read from its start)."""
    fh = None
    ino = None
    try:
        while True:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is not None and (fh is None or st.st_ino != ino):
                if fh is not None:
                    fh.close()
                fh = open(path, "r", encoding="utf-8", errors="replace")
                if ino is None:
                    fh.seek(0, os.SEEK_END)  # the first open: only new lines
                ino = st.st_ino
            if fh is not None:
                chunk = fh.read()
                if chunk:
                    click.echo(redact(chunk), nl=False)
            time.sleep(poll)
    except KeyboardInterrupt:
        pass
    finally:
        if fh is not None:
            fh.close()
