"""`occd logs [-f] [-n N] [--since]`: occd's own log file (the daemon and every cycle write it, whatever the
service manager does with stderr)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from occd.cli.common import handle_errors

_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def log_files() -> list[Path]:
    """The log and its rotated copies, oldest first."""
    from occd import logging_setup, paths

    base = paths.log_dir() / "occd.log"
    older = [base.with_name(f"occd.log.{i}") for i in range(logging_setup.BACKUPS, 0, -1)]
    return [p for p in older + [base] if p.exists()]


def entry_time(line: str) -> float | None:
    m = _TS.match(line)
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))


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
@handle_errors
def logs_cmd(lines, follow, since):
    """occd's log: what the daemon and every cycle did (the file under the log dir; rotated at 5 MB).

    `occd service logs` shows what the service manager recorded (journald on Linux).

    \b
    Examples:
      occd logs -n 100
      occd logs --since 1h
      occd logs -f
    """
    from occd import paths
    from occd.errors import NotFoundError
    from occd.status import parse_since

    files = log_files()
    base = paths.log_dir() / "occd.log"
    if not files and not follow:
        raise NotFoundError(f"No log at {paths.display_path(base)} yet",
                            "the daemon and `occd run --once` write it; `occd service status` says if it runs")
    since_ts = parse_since(since, time.time())
    out = read_entries(files, since_ts)
    if since_ts is None or lines != 50:
        out = out[-lines:] if lines else []
    for line in out:
        click.echo(line)
    if follow:
        _follow(base)


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
                    click.echo(chunk, nl=False)
            time.sleep(poll)
    except KeyboardInterrupt:
        pass
    finally:
        if fh is not None:
            fh.close()
