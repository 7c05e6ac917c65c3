"""`occd lean enable|disable|status`: occd's context-engine plugin for OpenClaw (occd.lean)."""

from __future__ import annotations

import click

from occd.cli.common import confirm, console, emit_json, handle_errors, json_option, load_settings_from_ctx, ok_mark, state_option


def _state_dir(s):
    from occd.openclaw.state import resolve_state_dir

    return resolve_state_dir(state_dir=s.state_dir)


def _render_change(res: dict, as_json: bool, headline: str, lines: tuple[str, ...] = (), running: str | None = None,
                   stopped: str | None = None) -> None:
    """What enable and disable did: the JSON result, or a ✓ headline, its detail lines and what the gateway
    needs (`running` when an OpenClaw gateway runs now, `stopped` when none does)."""
    if as_json:
        emit_json({"success": True, **res})
        return
    c = console()
    c.print(f"{ok_mark()} {headline}")
    for line in lines:
        c.print(f"  {line}")
    note = running if res["gatewayRunning"] else stopped
    if note:
        c.print(f"  {note}")


@click.group("lean")
def lean_group():
    """The lean view: an OpenClaw context engine (shipped with occd) that hides old tool calls and results from
    the model while OpenClaw's store keeps every message. The daemon turns it on per session by its policies."""


@lean_group.command("enable")
@state_option
@click.option("--yes", "-y", is_flag=True, help="Grant the plugin's capabilities without asking (scripts).")
@json_option
@handle_errors
def enable_cmd(state_dir, yes, as_json):
    """Install the plugin into OpenClaw and select it as the context engine."""
    from occd import lean

    s = load_settings_from_ctx(state_dir=state_dir)
    sd = _state_dir(s)

    def ask(text: str) -> bool:
        if as_json:
            return False
        return confirm(text, "lean enable")

    res = lean.enable(s, sd, confirm=ask, yes=yes)
    head = f"Lean view enabled on OpenClaw {res['release']} ({lean.PLUGIN_ID} from {res['pluginDir']})"
    _render_change(res, as_json, head, (f"Rules: {res['policy']} (the daemon turns sessions on by its policies)",),
                   running="Restart the OpenClaw gateway to load it (`openclaw gateway restart`).",
                   stopped="OpenClaw loads it on its next start (a running gateway needs a restart).")


@lean_group.command("disable")
@state_option
@json_option
@handle_errors
def disable_cmd(state_dir, as_json):
    """Uninstall the plugin; OpenClaw goes back to its legacy engine (the model gets the full history again)."""
    from occd import lean

    s = load_settings_from_ctx(state_dir=state_dir)
    res = lean.disable(s, _state_dir(s))
    _render_change(res, as_json,
                   "Lean view disabled" + ("" if res["wasInstalled"] else " (it was not installed in OpenClaw)"),
                   running="Restart the OpenClaw gateway so it stops using the plugin.")


@lean_group.command("status")
@state_option
@json_option
@handle_errors
def status_cmd(state_dir, as_json):
    """Whether the lean view is on, its rules, what it saves per session, and OpenClaw's view of it."""
    from occd import lean
    from occd.cli.render import format_table, human_tokens

    s = load_settings_from_ctx(state_dir=state_dir)
    from occd.jobs.lean import rules_from_settings

    res = lean.status(_state_dir(s), rules=rules_from_settings(s))
    if as_json:
        emit_json(res)
        return
    c = console()
    state = f"enabled but broken: {res['broken']}" if res.get("broken") else (
        "enabled" if res["enabled"] else "not enabled")
    c.print(f"Lean view: {state} (OpenClaw's context engine: {res['slot']})", markup=False)
    r, d = res["rules"], res["default"]
    on = sum(1 for v in res["sessions"].values() if v.get("mode") not in (None, "off"))
    c.print(f"  Mode {r['mode']} (config lean.mode), keep {r['keepTurns']} turns, batch {r['batchTurns']}: the rules a "
            f"session gets when the daemon's policies turn it on ({on} on now; every other session: "
            f"{d.get('mode') or 'off'})", wrap=True, indent=2)
    rows = [[k, v["mode"], str(v.get("callsHidden", "-")), str(v.get("resultsStubbed", "-")),
             human_tokens(v.get("tokensSaved")) if "tokensSaved" in v else "-",
             f"{v['savedPercent']:g}%" if "savedPercent" in v else "-"] for k, v in res["sessions"].items()]
    if rows:
        click.echo(format_table(["session key", "mode", "calls hidden", "stubbed", "saved", "%"], rows, right={2, 3, 4, 5}))
    for ch in res["checks"]:
        if ch["status"] in ("warn", "fail"):
            c.print(f"  {ch['status'].upper()}: {ch['message']}" + (f" (hint: {ch['hint']})" if ch.get("hint") else ""))
