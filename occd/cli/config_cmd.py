"""`occd config show|path|init`."""

from __future__ import annotations

import click

from occd.cli.common import console, emit_json, handle_errors, json_option


@click.group("config")
def config_group():
    """Show the effective configuration and where each value comes from; write a commented config file."""


def toml_value(v) -> str:
    """A value as it is written in config.toml."""
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    return json.dumps(str(v))


def resolved_rows(s) -> list[dict]:
    """Every setting with its effective value and source; unset values that occd resolves elsewhere (the
    OpenClaw state dir, the agent) show what is used and why."""
    import os

    from occd.config import descriptions, effective_items

    desc = descriptions()
    rows = []
    for k, v, src in effective_items(s):
        row = {"key": k, "value": v, "source": src, "description": desc.get(k)}
        if k == "state_dir" and v is None:
            from occd.openclaw.state import resolve_state_dir

            env = next((n for n in ("OPENCLAW_STATE_DIR", "CLAWDBOT_STATE_DIR") if os.environ.get(n)), None)
            row.update(value=str(resolve_state_dir()), source=f"env {env}" if env else "OpenClaw's default")
        elif k == "agent" and v is None:
            row.update(value="main", source="default")
        rows.append(row)
    return rows


@config_group.command("show")
@json_option
@handle_errors
def show(as_json):
    """Print every setting, its value and its source (default, file, env or flag).

    \b
    Examples:
      occd config show
      occd config show --json | jq '.settings[] | select(.source != "default")'
    """
    from occd import paths
    from occd.config import load_settings

    s = load_settings()
    rows = resolved_rows(s)
    if as_json:
        emit_json({"configFile": str(s.config_path), "configFileExists": bool(s.config_path and s.config_path.is_file()),
                   "settings": [{k: r[k] for k in ("key", "value", "source", "description")} for r in rows]})
        return
    from occd.cli.render import Table

    c = console()
    exists = "" if s.config_path and s.config_path.is_file() else " (not present: defaults apply; `occd config init` writes one)"
    c.print(f"Config file: {paths.display_path(s.config_path)}{exists}", wrap=True, indent=13)
    t = Table()
    t.add_column("SETTING", no_wrap=True)
    t.add_column("VALUE", overflow="path")
    t.add_column("SOURCE", no_wrap=True)
    for r in rows:
        v = r["value"]
        shown = "(unset)" if v is None else (str(v) if r["key"] == "state_dir" else toml_value(v))
        t.add_row(r["key"], shown, r["source"])
    c.print(t)


def init_text() -> str:
    """config.toml with every setting at its default, commented out (so later defaults still apply), each with
    its description."""
    import typing

    from pydantic import BaseModel

    from occd.config import Settings

    out = ["# occd configuration. Every setting is shown at its default, commented out: uncomment to change it.",
           "# Precedence: defaults < this file < OCCD_* environment (OCCD_POLICY__MODE=act) < command-line flags.",
           "# `occd config show` prints the effective values and where each comes from.", ""]

    def section(cls, prefix: str) -> None:
        subs = []
        for name, f in cls.model_fields.items():
            tp = f.annotation
            if isinstance(tp, type) and issubclass(tp, BaseModel) and typing.get_origin(tp) is None:
                subs.append((name, tp))
                continue
            value = f.get_default(call_default_factory=True)
            if isinstance(value, dict):
                continue  # presets, agents: examples at the end
            if f.description:
                out.append(f"# {f.description}")
            if value is None:
                out.append(f"# {name} = (unset)")
            else:
                out.append(f"# {name} = {toml_value(value)}")
        for name, sub in subs:
            out.append("")
            out.append(f"[{prefix}{name}]")
            section(sub, f"{prefix}{name}.")

    section(Settings, "")
    out += ["", "# Per-agent overrides of [policy] (and the agent's own llm_model), for example:",
            "#   [agents.work]", '#   mode = "observe"', "",
            "# Custom presets for --strip-tools=NAME and policy.strip_preset, for example:",
            "#   [presets.gentle]", "#   keep_turns_with_tools = 40", "#   truncate_percent = 25", ""]
    return "\n".join(out)


@config_group.command("init")
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the file instead of writing it.")
@click.option("--force", is_flag=True, help="Replace an existing config file (it is kept as config.toml.bak).")
@json_option
@handle_errors
def init(to_stdout, force, as_json):
    """Write a config file with every setting at its default, commented out and explained.

    \b
    Examples:
      occd config init                 writes `occd config path`
      occd config init --stdout > my.toml
    """
    import os

    from occd import paths
    from occd.errors import OccdError

    text = init_text()
    if to_stdout:
        if as_json:
            emit_json({"path": None, "written": False, "text": text})
            return
        click.echo(text, nl=False)
        return
    p = paths.config_file()
    if p.exists() and not force:
        raise OccdError(f"{paths.display_path(p)} exists", "`occd config init --stdout` prints the template; "
                        "--force replaces the file (keeping a .bak)", code="CONFIG_EXISTS")
    paths.ensure_dir(p.parent)
    bak = None
    if p.exists():
        bak = p.with_name(p.name + ".bak")
        os.replace(p, bak)
    paths.write_private(p, text.encode("utf-8"))  # 0600: it names notify_command, a program the daemon runs
    if as_json:
        emit_json({"path": str(p), "written": True, "backup": str(bak) if bak else None})
        return
    click.echo(f"Wrote {paths.display_path(p)} (every default, commented out).")


@config_group.command("path")
@json_option
@handle_errors
def path(as_json):
    """Print the config file's path (OCCD_CONFIG, else under OCCD_HOME, else the platform's config dir)."""
    from occd import paths

    p = paths.config_file()
    if as_json:
        emit_json({"path": str(p), "exists": p.is_file()})
        return
    click.echo(str(p))
