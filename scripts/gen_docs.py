"""Generate the reference pages from the code: docs/cli.md (every command's --help) and docs/config.md (every
setting with its default, environment variable and description, and the sample file `occd config init` writes).

    .venv/bin/python scripts/gen_docs.py           # rewrite the pages
    .venv/bin/python scripts/gen_docs.py --check   # exit 1 naming each page that is out of date (tests/test_docs.py)

A command, option or setting that changes without its page makes tests/test_docs.py fail; run this to fix it.
"""

from __future__ import annotations

import os
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 100  # the CLI's own max_content_width

CLI_HEAD = """\
# CLI reference

Generated from the commands themselves by `scripts/gen_docs.py` (`tests/test_docs.py` fails when a command
changes without this page). Every command also takes `--help`; `occd --quickstart` is a 250-token summary for
agents. Exit codes everywhere: 0 ok, 1 error (with a hint), 2 usage, 75 busy (retry later).

"""

CONFIG_HEAD = """\
# Configuration reference

Generated from the settings' own descriptions (`occd/config.py`) by `scripts/gen_docs.py`
(`tests/test_docs.py` fails when a setting changes without this page).

Precedence, lowest to highest: defaults < the TOML file (`occd config path`; `$OCCD_CONFIG` chooses another)
< `OCCD_*` environment variables (`__` between levels: `OCCD_POLICY__MODE=act`) < command-line flags.
`occd config show` prints every effective value and where it comes from; `occd config init` writes the sample
at the end of this page. An unknown key, in the file or the environment, is an error naming the nearest known
one. Per-agent overrides of `[policy]` live under `[agents.<id>]`.

"""


def _help_text(path: list[str]) -> str:
    from click.testing import CliRunner

    from occd.cli.main import cli

    r = CliRunner().invoke(cli, [*path, "--help"], terminal_width=WIDTH, prog_name="occd")
    if r.exit_code != 0:
        raise SystemExit(f"`occd {' '.join(path)} --help` failed: {r.output}")
    return r.output.rstrip() + "\n"


def _commands() -> list[list[str]]:
    """Every command path, groups followed by their subcommands, in the order `occd --help` lists them."""
    import click

    from occd.cli.main import COMMANDS, SECTIONS, cli

    out: list[list[str]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        out.append(path)
        if isinstance(cmd, click.Group):
            for name in sorted(cmd.list_commands(None)):  # type: ignore[arg-type]
                walk(cmd.get_command(None, name), [*path, name])  # type: ignore[arg-type]

    for section in SECTIONS:
        for name in sorted(n for n, spec in COMMANDS.items() if spec[2] == section):
            walk(cli.get_command(None, name), [name])  # type: ignore[arg-type]
    return out


def cli_page() -> str:
    from occd.cli.main import COMMANDS, SECTIONS

    parts = [CLI_HEAD, "## Contents\n\n"]
    for section in SECTIONS:
        names = sorted(n for n, spec in COMMANDS.items() if spec[2] == section)
        parts.append(f"- {section}: " + ", ".join(f"[`{n}`](#occd-{n})" for n in names) + "\n")
    parts.append("\n## occd\n\n```\n" + _help_text([]) + "```\n")
    for path in _commands():
        level = "##" if len(path) == 1 else "###"
        parts.append(f"\n{level} occd {' '.join(path)}\n\n```\n{_help_text(path)}```\n")
    return "".join(parts)


def _toml(v) -> str:
    from occd.cli.config_cmd import toml_value

    return toml_value(v)


def config_page() -> str:
    from pydantic import BaseModel

    from occd.cli.config_cmd import init_text
    from occd.config import Settings

    parts = [CONFIG_HEAD]
    tables: list[tuple[str, type]] = [("", Settings)]
    done = 0
    while done < len(tables):
        prefix, cls = tables[done]
        done += 1
        rows = []
        for name, f in cls.model_fields.items():
            tp = f.annotation
            if isinstance(tp, type) and issubclass(tp, BaseModel) and typing.get_origin(tp) is None:
                tables.append((f"{prefix}{name}.", tp))
                continue
            key = f"{prefix}{name}"
            value = f.get_default(call_default_factory=True)
            shown = "(unset)" if value is None else _toml(value)
            env = "OCCD_" + key.upper().replace(".", "__")
            desc = (f.description or "").replace("|", "\\|").replace("\n", " ")
            rows.append(f"| `{key}` | `{shown}` | `{env}` | {desc} |")
        if not rows:
            continue
        title = f"[{prefix[:-1]}]" if prefix else "Top level"
        parts.append(f"## {title}\n\n| setting | default | environment | what it does |\n|---|---|---|---|\n")
        parts.append("\n".join(rows) + "\n\n")
    parts.append("## The sample file (`occd config init`)\n\n```toml\n" + init_text().rstrip() + "\n```\n")
    return "".join(parts)


PAGES = {"docs/cli.md": cli_page, "docs/config.md": config_page}


def main(argv: list[str]) -> int:
    # The pages must not depend on who generates them: no colour, a fixed home for any path a default names.
    os.environ.setdefault("NO_COLOR", "1")
    check = "--check" in argv
    stale = []
    for rel, make in PAGES.items():
        text = make()
        target = ROOT / rel
        old = target.read_text(encoding="utf-8") if target.exists() else None
        if old == text:
            continue
        if check:
            stale.append(rel)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    if stale:
        print("out of date: " + ", ".join(stale) + " (run: .venv/bin/python scripts/gen_docs.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
