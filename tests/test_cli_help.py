"""Every command has help text and imports; `occd --help` pays for no heavy import; the quickstart stays short."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from occd.cli.main import COMMANDS, cli


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    r = CliRunner().invoke(cli, [name, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output
    cmd = cli.get_command(None, name)
    assert (cmd.help or "").strip(), f"{name} has no help text"


def test_help_imports_nothing_heavy():
    code = ("import sys\nfrom occd.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('litellm', 'sqlalchemy', 'sqlmodel', 'alembic', 'rich', 'apscheduler', 'pydantic', "
            "'mcp', 'orjson') if m in sys.modules]\nprint('HEAVY', heavy)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in p.stdout, p.stdout + p.stderr


def test_quickstart_is_about_250_tokens():
    r = CliRunner().invoke(cli, ["--quickstart"])
    assert r.exit_code == 0
    words = len(r.output.split())
    assert 120 <= words <= 260, words  # ~250 tokens
    for must in ("default", "aggressive", "extreme", "--json", "occd edit", "occd list"):
        assert must in r.output
