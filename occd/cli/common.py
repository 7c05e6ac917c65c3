"""Shared CLI plumbing: common options, settings loading, output (human or --json), and the ONE place where
errors become stderr lines and exit codes. Keep this module light: it is imported by every command.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

import click

from occd.errors import EXIT_USER, OccdError


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout, nothing else.")(f)


def verbose_option(f):
    return click.option("-v", "--verbose", is_flag=True, help="More detail.")(f)


def agent_option(f):
    return click.option("-a", "--agent", "agent", metavar="AGENT", default=None,
                        help="OpenClaw agent id (default: config `agent`, else main).")(f)


def state_option(f):
    return click.option("--state-dir", "state_dir", type=click.Path(file_okay=False), default=None,
                        help="OpenClaw state directory (default: resolved as OpenClaw does).")(f)


def load_settings_from_ctx(**overrides):
    from occd.config import load_settings

    return load_settings({k: v for k, v in overrides.items() if v is not None})


def use_color(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def console(stderr: bool = False):
    """A rich console that only uses colour and symbols on a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = use_color(stream)
    return Console(file=stream, no_color=not tty, force_terminal=tty, highlight=False, soft_wrap=True,
                   width=None if tty else 200)


def emit_json(obj: Any) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def ok_mark() -> str:
    return "✓" if use_color() else "OK"


def handle_errors(f: Callable) -> Callable:
    """Turn OccdError (and anything unexpected) into one stderr line + exit code; with --json also an
    error object on stdout. Use on every command, under the click decorators."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        as_json = kwargs.get("as_json", False)
        try:
            return f(*args, **kwargs)
        except OccdError as e:
            _fail(e.message, e.hint, e.code, e.exit_code, as_json, e.details)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # a bug: still one line, traceback only with --debug
            ctx = click.get_current_context(silent=True)
            debug = bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("debug"))
            if debug:
                raise
            msg = f"Internal error: {type(e).__name__}: {e}".splitlines()[0]
            _fail(msg, "run with --debug for a traceback and report it", "INTERNAL", EXIT_USER, as_json, None)

    return wrapper


def _fail(message, hint, code, exit_code, as_json, details):
    if as_json:
        err = {"code": code, "message": message, "hint": hint}
        if details:
            err["details"] = details
        emit_json({"success": False, "error": err})
    line = f"Error: {message}"
    if hint:
        line += f" (hint: {hint})"
    click.echo(line, err=True)
    sys.exit(exit_code)
