"""The `occd` entry point. Commands are loaded lazily: `occd --help` imports none of them.

To add a command: write it in a module under occd/cli/ (keep module-level imports light: click and occd's
small modules only; import heavy things inside the function), then add one line to COMMANDS.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from occd import __version__

# name -> (module:attribute, one-line help shown by `occd --help`, section)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "list": ("occd.cli.sessions:list_cmd", "List the agent's sessions, newest first.", "Sessions"),
    "info": ("occd.cli.sessions:info_cmd", "Analyse one session: messages, tools, tokens, compactions.", "Sessions"),
    "edit": ("occd.cli.sessions:edit_cmd", "Strip or truncate old tool calls in place (with a backup).", "Sessions"),
    "clone": ("occd.cli.sessions:clone_cmd", "Copy a session under a new id, optionally stripped.", "Sessions"),
    "restore": ("occd.cli.sessions:restore_cmd", "Put a session back to its newest backup (or backup N).", "Sessions"),
    "backups": ("occd.cli.sessions:backups_cmd", "List the backups of a session (or of all): number, size, age.", "Sessions"),
    "rotate": ("occd.cli.rotate_cmd:rotate_cmd", "Archive a session that keeps compacting; start it afresh, seeded.", "Sessions"),
    "db": ("occd.cli.db_cmd:db_group", "Ledger database: path, info, schema upgrade.", "Daemon"),
    "lean": ("occd.cli.lean_cmd:lean_group", "The lean view: OpenClaw context engine hiding old tool calls (enable/status).", "Daemon"),
    "breaker": ("occd.cli.breaker_cmd:breaker_group", "Show or reset the circuit breakers of automatic actions.", "Daemon"),
    "run": ("occd.cli.daemon_cmd:run_cmd", "Run the daemon in the foreground (--once: one cycle).", "Daemon"),
    "scan-now": ("occd.cli.daemon_cmd:scan_now_cmd", "Ask the running daemon to scan now (SIGUSR1).", "Daemon"),
    "status": ("occd.cli.status_cmd:status_cmd", "What the daemon saw and did; one session's history.", "Daemon"),
    "history": ("occd.cli.history_cmd:history_cmd", "Actions from the ledger, filtered.", "Daemon"),
    "stats": ("occd.cli.history_cmd:stats_cmd", "What the daemon saved: tokens, compactions, money.", "Daemon"),
    "metrics": ("occd.cli.metrics_cmd:metrics_cmd", "Metrics for Prometheus (OpenMetrics): actions, savings, watching, latency.", "Daemon"),
    "logs": ("occd.cli.logs_cmd:logs_cmd", "occd's own log (-f follows, -n lines, --since).", "Daemon"),
    "service": ("occd.cli.daemon_cmd:service_group", "Install/remove the background service; its status and logs.", "Daemon"),
    "check": ("occd.cli.check_cmd:check_cmd", "Check backups, archives and the ledger (--read-data: load them too).", "Setup"),
    "doctor": ("occd.cli.doctor_cmd:doctor_cmd", "Check config, OpenClaw state, ledger, service, heartbeat, breakers.", "Setup"),
    "completion": ("occd.cli.main:completion_cmd", "Shell completion script: bash, zsh or fish.", "Setup"),
    "demo": ("occd.cli.demo_cmd:demo_cmd", "Run occd on a built-in demo OpenClaw state (no network).", "Setup"),
    "config": ("occd.cli.config_cmd:config_group", "Show the effective configuration and where it comes from.", "Setup"),
    "sessions": ("occd.cli.relevance_cmd:sessions_cmd", "Sessions of all OpenClaw agents and Claude Code, linked.", "Relevance"),
    "project-status": ("occd.cli.relevance_cmd:project_status_cmd", "Git (and GitHub) status of a repository.", "Relevance"),
    "select": ("occd.cli.relevance_cmd:select_cmd", "Resume a session, start fresh or queue, for a task, and why.", "Relevance"),
    "mcp": ("occd.cli.relevance_cmd:mcp_cmd", "MCP server over stdio for agents (needs occd[mcp]).", "Relevance"),
}

SECTIONS = ["Sessions", "Daemon", "Relevance", "Setup"]

QUICKSTART = """\
occd keeps OpenClaw sessions lean by stripping old tool calls and results from transcripts.

Use it when: context is running low (`occd info` shows >60% of the window), a session has compacted
repeatedly, or it carries many old tool results you no longer need. The conversation text is kept;
only old tool calls/results (and their thinking) are removed or shortened. A backup is always made.

Presets (--strip-tools=NAME):
  default     keep the 20 newest turns with tools, shorten the older half of those, remove the rest
  aggressive  keep 10, shorten the older half, remove the rest
  extreme     remove every tool call and result

Common commands:
  occd list                          sessions of the agent, newest first
  occd info ID                       tokens, tool calls, compactions (any unique part of an id works)
  occd edit ID --strip-tools         clean in place (session must be idle)
  occd clone ID --strip-tools=extreme  cleaned copy under a new id; prints how to resume it
  occd restore ID                    undo the last edit from its backup
  occd status                        what the daemon saw and did

Flags: --agent NAME, --json (machine-readable, one object on stdout), --verbose, --help.
Exit codes: 0 ok, 1 error (message has a hint), 2 usage, 75 busy (retry when the agent is idle).
"""


def usage_json(e: click.UsageError, args) -> None:
    """Under --json a usage error (click's: a bad option, a missing argument, no such command) also prints the
    envelope on stdout, exit 2 as without --json (click prints its own lines on stderr)."""
    if "--json" not in list(args or ()):
        return
    from occd.cli.common import envelope

    import orjson

    cmd = " ".join(e.ctx.command_path.split(" ")[1:]) if e.ctx is not None else ""
    hint = f"`occd {cmd + ' ' if cmd else ''}--help` shows the usage"
    if not cmd:  # the group's own error (no such command): the word the user typed
        cmd = next((a for a in args if not a.startswith("-")), "")
        hint = "`occd --help` lists the commands"
    data = envelope(None, success=False, error={"code": "USAGE", "message": e.format_message(),
                                                 "hint": hint})
    data["command"] = cmd
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name in self.commands:
            return self.commands[name]
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        mod_name, attr = spec[0].split(":")
        cmd = getattr(importlib.import_module(mod_name), attr)
        from occd.cli.output_flags import add_output_flags

        self.commands[name] = add_output_flags(cmd)  # -q/--quiet, -v/--verbose: one meaning on every command
        return cmd

    def resolve_command(self, ctx, args):
        """Click's own "No such command", with the nearest command names (`occd lsit` → list)."""
        name = click.utils.make_str(args[0]) if args else None
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            near = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if near:
                ctx.fail(f"No such command '{name}'. Did you mean " + " or ".join(f"'{n}'" for n in near) + "?")
        return super().resolve_command(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra):
        argv = list(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            usage_json(e, argv)
            raise
        ctx.meta["occd.argv"] = argv
        return ctx

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            usage_json(e, ctx.meta.get("occd.argv", ()))
            raise

    def format_commands(self, ctx, formatter):
        # Help text comes from COMMANDS, so listing commands imports nothing.
        for section in SECTIONS:
            rows = [(n, spec[1]) for n, spec in sorted(COMMANDS.items()) if spec[2] == section]
            if rows:
                with formatter.section(f"{section} commands"):
                    formatter.write_dl(rows)


def _quickstart(ctx, param, value):
    if value and not ctx.resilient_parsing:
        click.echo(QUICKSTART, nl=False)
        ctx.exit(0)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="occd")
@click.option("--quickstart", is_flag=True, expose_value=False, is_eager=True, callback=_quickstart,
              help="About 250 tokens of agent-friendly help, then exit.")
@click.option("--debug", is_flag=True, envvar="OCCD_DEBUG", help="Show tracebacks for unexpected errors.")
@click.pass_context
def cli(ctx, debug):
    """occd: the OpenClaw context-cleaner daemon.

    Cleans old tool calls out of OpenClaw session transcripts (by hand or as a daemon), rotates sessions
    that keep compacting, and records everything in a ledger you can query.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    from occd.paths import private_umask

    old = private_umask()  # occd's files (config, ledger and its -wal/-shm, logs, caches) are 0600, folders 0700
    ctx.call_on_close(lambda: os.umask(old))
    from occd.cli.render import install_safe_streams

    install_safe_streams()  # nothing from OpenClaw's files reaches the terminal as a control sequence


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.option("--json", "as_json", is_flag=True, help="The script inside the JSON envelope: {shell, script}.")
def completion_cmd(shell, as_json):
    """Print the completion script for SHELL (commands, options, session ids, agents, presets).

    \b
    Examples:
      occd completion bash > ~/.local/share/bash-completion/completions/occd
      occd completion zsh > "${fpath[1]}/_occd"
      occd completion fish > ~/.config/fish/completions/occd.fish
    """
    from click.shell_completion import get_completion_class

    comp = get_completion_class(shell)(cli, {}, "occd", "_OCCD_COMPLETE")
    if as_json:
        from occd.cli.common import emit_json

        emit_json({"shell": shell, "script": comp.source()})
        return
    click.echo(comp.source())


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="occd", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
