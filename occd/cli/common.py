"""Shared CLI plumbing: common options, settings loading, output (human or --json), and the ONE place where
errors become stderr lines and exit codes. Keep this module light: it is imported by every command.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from typing import Any, Callable

import click

from occd.cli.render import use_color  # noqa: F401  (the commands import it from here)
from occd.errors import EXIT_TEMPFAIL, EXIT_USER, OccdError


# ---- shell completion (`occd completion bash|zsh|fish`): ids, agents and presets ----

def _completion_settings():
    from occd.config import load_settings

    return load_settings()


def complete_session(ctx, param, incomplete: str):
    """Session ids (any part matches) and keys of the agent given so far (else the configured one)."""
    from click.shell_completion import CompletionItem

    try:
        from occd.actions.common import open_agent_store

        agent = ctx.params.get("agent")
        _s, _aid, store = open_agent_store(_completion_settings(), agent)
        low = incomplete.lower()
        out = []
        for info in store.sessions():
            if low in info.session_id.lower():
                out.append(CompletionItem(info.session_id, help=info.key or ""))
            elif info.key and info.key.startswith(incomplete):
                out.append(CompletionItem(info.key, help=info.session_id))
        return out
    except Exception:  # noqa: BLE001 - completion never prints errors into the user's shell
        return []


def complete_agent(ctx, param, incomplete: str):
    from click.shell_completion import CompletionItem

    try:
        from occd.openclaw.state import list_agents, resolve_state_dir

        s = _completion_settings()
        return [CompletionItem(a.id, help=f"{a.era} era") for a in list_agents(resolve_state_dir(state_dir=s.state_dir))
                if a.id.startswith(incomplete)]
    except Exception:  # noqa: BLE001
        return []


def complete_preset(ctx, param, incomplete: str):
    from click.shell_completion import CompletionItem

    try:
        from occd.config import BUILTIN_PRESETS

        names = sorted(set(BUILTIN_PRESETS) | set(_completion_settings().presets))
        return [CompletionItem(n) for n in names if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001
        return []


def json_option(f):
    return click.option("--json", "as_json", is_flag=True,
                        help="Machine-readable: one JSON object (the envelope of docs/guide.md) on stdout, nothing else.")(f)


def verbose_option(f):
    return click.option("-v", "--verbose", is_flag=True, help="More detail.")(f)


def agent_option(f):
    return click.option("-a", "--agent", "agent", metavar="AGENT", default=None, shell_complete=complete_agent,
                        help="OpenClaw agent id (default: config `agent`, else main).")(f)


def agent_filter_option(f):
    """--agent for commands that cover every agent unless told otherwise (history, sessions, select)."""
    return click.option("-a", "--agent", "agent", metavar="AGENT", default=None, shell_complete=complete_agent,
                        help="Only this agent (default: all agents).")(f)


def state_option(f):
    return click.option("--state-dir", "state_dir", type=click.Path(file_okay=False), default=None,
                        help="OpenClaw state directory (default: resolved as OpenClaw does).")(f)


def session_question(command: str) -> str:
    """The question `require_session` asks, wrapped at spaces to the terminal (never mid-word)."""
    from occd.cli.render import terminal_width, wrap_text

    text = (f"Which session should `occd {command}` act on? (id, any unique part of it, or key; `occd list` shows "
            "them)")
    return wrap_text(text, (terminal_width(sys.stderr) or 0) - 2 or None, indent=0)


def require_session(session: str | None, command: str, example: str) -> str:
    """Commands that change a session act on the one named: without SESSION they ask on a terminal and
    otherwise stop with a usage error (never guess the newest: it is usually the one the user talks to)."""
    if session:
        return session
    from occd.errors import UsageError

    if sys.stdin.isatty() and sys.stdout.isatty():
        return click.prompt(session_question(command), err=True).strip()
    raise UsageError(f"`occd {command}` needs the session: an id, any unique part of it, or a session key",
                     f"`occd list` shows them; e.g. {example}")


def confirm(text: str, command: str, flag: str = "--yes") -> bool:
    """Ask yes/no on the terminal; without one an answer may be piped in. With no terminal and no answer (a
    script, cron, </dev/null) nobody can answer: one usage line naming the flag to pass (exit 2), never an Abort."""
    from occd.errors import UsageError

    if sys.stdin is not None and sys.stdin.isatty():
        return click.confirm(text, default=False, err=True)
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line.strip():
        raise UsageError(f"`occd {command}` asks for confirmation and there is no terminal to answer it",
                         f"pass {flag} to confirm it in a script")
    click.echo(f"{text} [y/N]: {line.strip()}", err=True)
    return line.strip().lower() in ("y", "yes")


def looks_like_session_id(text: str | None) -> bool:
    import re

    return bool(text) and bool(re.fullmatch(r"[0-9a-fA-F]{4,}(-[0-9a-fA-F]*)*…?|[0-9a-fA-F-]{8,}", text))


def load_settings_from_ctx(**overrides):
    from occd.config import load_settings

    return load_settings({k: v for k, v in overrides.items() if v is not None})


def console(stderr: bool = False):
    """The human renderers' output through rich (occd.cli.render.Console; rich is imported at the first print):
    text and tables fitted to the terminal, colour only on a terminal without NO_COLOR."""
    from occd.cli.render import Console

    return Console(stderr=stderr)


# ---- the JSON contract: every command's --json goes through emit_json (tests/test_json_contract.py checks it) ----

SCHEMA_VERSION = 1
ENVELOPE_KEYS = ("schemaVersion", "occdVersion", "command", "success")
# Keys whose value is a time: epoch seconds (or ms, or an ISO string) become ISO-8601 UTC with a Z.
TIME_KEYS = frozenset({"ts", "started", "stopped", "heartbeat", "created", "updated", "finished", "firstSeen",
                       "lastSeen", "lastCycle", "lastActivity", "nextScan", "since", "until", "time", "when"})
# Keys whose value is a map keyed by data (table names, action kinds, roles): its keys are kept as they are.
DATA_MAPS = frozenset({"tables", "actions24h", "messagesByRole", "countsByOutcome", "files"})


def camel(key: str) -> str:
    if "_" not in key or key.startswith("_"):
        return key
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest if p)


def is_time_key(key: str) -> bool:
    return key in TIME_KEYS or (key.endswith(("At", "Modified")) and key not in ("At", "Modified"))


def iso_time(v: Any) -> Any:
    """Epoch seconds or ms, a datetime, or an ISO string → '2026-11-25T17:18:31.123Z' (others unchanged)."""
    from datetime import datetime, timezone

    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        secs = v / 1000.0 if v > 1e11 else float(v)
        if secs < 1e8:  # not an epoch time (a duration, a count): leave it
            return v
        dt = datetime.fromtimestamp(secs, tz=timezone.utc)
    elif isinstance(v, datetime):
        dt = v if v.tzinfo else v.replace(tzinfo=timezone.utc)
    elif isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return v
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
    else:
        return v
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@functools.lru_cache(maxsize=4096)
def _contract_key(key: str) -> tuple[str, bool]:
    """(the key as the contract writes it, whether its value is a time): asked once per key name, not per value."""
    k2 = camel(key)
    return k2, is_time_key(k2)


_AS_THEY_ARE = frozenset({str, int, float, bool, type(None)})  # exactly these types: nothing in them to change


def normalize(obj: Any, key: str | None = None) -> Any:
    """The contract's shape: camelCase keys, ISO-8601 UTC times, lists (never tuples), paths as strings."""
    if type(obj) in _AS_THEY_ARE:  # (most values: 5,000 sessions of 33 fields in `occd sessions --json`)
        return obj
    if isinstance(obj, dict):
        keep = key in DATA_MAPS
        out = {}
        for k, v in obj.items():
            if keep:
                out[str(k)] = normalize(v, str(k))
                continue
            k2, is_time = _contract_key(str(k))
            out[k2] = iso_time(v) if is_time else normalize(v, k2)
        return out
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [normalize(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "isoformat"):
        return iso_time(obj)
    return obj


def command_name() -> str | None:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    parts = ctx.command_path.split(" ")
    return " ".join(parts[1:]) or parts[0]


def envelope(payload: Any = None, *, success: bool = True, key: str = "items", error: dict | None = None) -> dict:
    """{"schemaVersion": 1, "occdVersion": "0.2.0", "command": "db info", "success": true, ...payload} — an object
    payload's fields sit beside the envelope's (the edit/clone shapes of the CLI contract); a list goes under `key`.
    occdVersion is the occd that wrote it (occd.__version__)."""
    from occd import __version__

    out: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "occdVersion": __version__, "command": command_name(),
                           "success": success}
    if isinstance(payload, dict):
        body = dict(payload)
        if body.get("success") is False:
            out["success"] = False
        for k in ENVELOPE_KEYS:
            body.pop(k, None)
        out.update(normalize(body))
    elif payload is not None:
        out[key] = normalize(payload)
    if error is not None:
        out["error"] = normalize(error)
    return out


def emit_json(obj: Any, *, key: str = "items", success: bool = True, error: dict | None = None) -> None:
    """Write one command's --json answer: the envelope around `obj` (a dict, or a list under `key`). A command
    that reports a failure itself (doctor) passes success=False and error={code, message, hint}."""
    data = envelope(obj, success=success, key=key, error=error)
    sys.stdout.buffer.write(_json_bytes(data) + b"\n")
    sys.stdout.flush()
    if not success and error:  # every --json failure: the same one line on stderr as an error's (README)
        click.echo(error_line(error.get("message") or "", error.get("hint")), err=True)


def error_line(message: str, hint: str | None) -> str:
    """The one stderr line of a failure: `Error: MESSAGE (hint: HINT)`, with and without --json."""
    from occd.cli.render import clean
    from occd.config import redact

    line = f"Error: {clean(redact(message))}"
    if hint:
        line += f" (hint: {clean(redact(hint))})"
    return line


def _json_bytes(data) -> bytes:
    """The envelope as indented JSON; a lone surrogate from OpenClaw's data is written as its escape (orjson
    refuses it; occd.transcript.jsontext)."""
    import orjson

    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        from occd.transcript.jsontext import dumps

        return dumps(data, indent=2)


def ok_mark() -> str:
    return "✓" if use_color() else "OK"


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}  # a full or read-only disk: the contract's "cannot write"


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
        except BrokenPipeError:  # `occd status | head`: the reader left; stop quietly like other Unix tools
            try:
                fd = os.open(os.devnull, os.O_WRONLY)
                os.dup2(fd, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            sys.exit(141)
        except click.ClickException:
            raise
        except click.exceptions.Abort:  # Ctrl-C or end of input at a prompt: the user said no
            _fail("Aborted: nothing was changed", None, "CANCELLED", EXIT_USER, as_json, None)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # a bug: still one line, traceback only with --debug
            ctx = click.get_current_context(silent=True)
            debug = bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("debug"))
            if debug:
                raise
            if isinstance(e, FileNotFoundError) and e.filename:  # a race with another process, not a bug
                _fail(f"A file vanished while occd was working: {e.filename}",
                      "another process (OpenClaw or another occd) changed it meanwhile; run the command again",
                      "FILE_VANISHED", EXIT_TEMPFAIL, as_json, None)
            if isinstance(e, OSError) and e.errno in _WRITE_ERRNOS:  # a full or read-only disk is no bug
                from occd import paths

                where = e.filename or paths.state_dir()
                _fail(f"Failed to write {paths.display_path(where)}: {e.strerror}", "check disk space and permissions"
                      " (occd's own files: `occd db path`)", "WRITE_FAILED", EXIT_USER, as_json, None)
            msg = f"Internal error: {type(e).__name__}: {e}".splitlines()[0]
            path = ctx.command_path.split(" ", 1)[-1] if ctx and " " in ctx.command_path else "COMMAND"
            _fail(msg, f"`occd --debug {path} ...` shows the traceback; please report it", "INTERNAL", EXIT_USER,
                  as_json, None)

    return wrapper


def _fail(message, hint, code, exit_code, as_json, details):
    if as_json:
        from occd.config import redact

        err = {"code": code, "message": redact(message), "hint": redact(hint)}
        if details:
            err["details"] = details
        data = envelope(None, success=False, error=err)
        sys.stdout.buffer.write(_json_bytes(data) + b"\n")
        sys.stdout.flush()
    click.echo(error_line(message, hint), err=True)
    sys.exit(exit_code)
