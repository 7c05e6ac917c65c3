"""-q/--quiet and -v/--verbose on every command, with one meaning each (issue 32 §12):

- `-q/--quiet`: nothing on stdout but what a script asked for (`--json`'s envelope); errors and warnings still go
  to stderr and the exit code says how it went. A daemon run logs warnings only.
- `-v/--verbose`: more detail. Commands with their own detail (list, info, edit, clone) show it; every other
  command also writes occd's log lines (INFO and up) to stderr while it works; a daemon run logs at DEBUG.

Added to each command when it is loaded (occd.cli.main.LazyGroup), so a new command gets both."""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import sys

import click

SKIP = frozenset({"completion", "mcp"})   # a script for the shell, a stdio server: no human output to tune


class _Null(io.TextIOBase):
    def write(self, s):  # noqa: D401 - a sink
        return len(s)

    def writable(self):
        return True

    @property
    def buffer(self):  # emit_json writes bytes to sys.stdout.buffer; it is not silenced (see below)
        return io.BytesIO()


@contextlib.contextmanager
def _stderr_log(level: int):
    h = logging.StreamHandler(sys.stderr)
    h.setLevel(level)
    h.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("occd")
    old = root.level
    root.addHandler(h)
    if root.getEffectiveLevel() > level:
        root.setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(h)
        root.setLevel(old)


def add_output_flags(cmd: click.Command) -> click.Command:
    """Give `cmd` (and a group's subcommands) -q/--quiet and -v/--verbose; idempotent."""
    if getattr(cmd, "_occd_output_flags", False) or cmd.name in SKIP:
        return cmd
    cmd._occd_output_flags = True
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            add_output_flags(sub)
        return cmd
    names = {p.name for p in cmd.params}
    own_verbose = "verbose" in names
    if not own_verbose:
        cmd.params.append(click.Option(["-v", "--verbose", "occd_verbose"], is_flag=True,
                                       help="More detail: occd's log lines on stderr while it works."))
    if "quiet" not in names:
        cmd.params.append(click.Option(["-q", "--quiet", "occd_quiet"], is_flag=True,
                                       help="Nothing on stdout but --json's output; errors still on stderr."))
    inner = cmd.callback
    if inner is None:
        return cmd

    @functools.wraps(inner)
    def callback(*args, **kwargs):
        quiet = kwargs.pop("occd_quiet", False)
        verbose = kwargs.get("verbose") if own_verbose else kwargs.pop("occd_verbose", False)
        if quiet and verbose:
            raise click.UsageError("-q/--quiet and -v/--verbose say opposite things: give one")
        logs_itself = "log_level" in kwargs   # a daemon run: the flags set its log level unless it is given
        if logs_itself and kwargs["log_level"] is None and (quiet or verbose):
            kwargs["log_level"] = "WARNING" if quiet else "DEBUG"
        with contextlib.ExitStack() as stack:
            if verbose and not own_verbose and not logs_itself:
                stack.enter_context(_stderr_log(logging.INFO))
            if quiet and not kwargs.get("as_json"):
                stack.enter_context(contextlib.redirect_stdout(_Null()))
            return inner(*args, **kwargs)

    cmd.callback = callback
    return cmd
