"""`occd config show|path`."""

from __future__ import annotations

import click

from occd.cli.common import console, emit_json, handle_errors, json_option


@click.group("config")
def config_group():
    """Show the effective configuration and where each value comes from."""


@config_group.command("show")
@json_option
@handle_errors
def show(as_json):
    """Print every setting, its value and its source (default, file, env or flag)."""
    from occd import paths
    from occd.config import effective_items, load_settings

    s = load_settings()
    rows = effective_items(s)
    if as_json:
        emit_json({"configFile": str(s.config_path), "configFileExists": bool(s.config_path and s.config_path.is_file()),
                   "settings": [{"key": k, "value": v, "source": src} for k, v, src in rows]})
        return
    from occd.cli.render import Table

    c = console()
    exists = "" if s.config_path and s.config_path.is_file() else " (not present: defaults apply)"
    c.print(f"Config file: {paths.display_path(s.config_path)}{exists}")
    t = Table(show_edge=False, box=None)
    t.add_column("setting")
    t.add_column("value")
    t.add_column("source")
    for k, v, src in rows:
        t.add_row(k, repr(v) if isinstance(v, str) else str(v), src)
    c.print(t)


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
