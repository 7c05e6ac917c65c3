"""The docs cannot fall behind the code: the CLI and configuration references are generated and compared here,
every doctor check has a troubleshooting entry, every link in the README and docs/ points at a file that exists,
and the README stays a short front page whose figures each carry a date and the bench that makes them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gen_docs  # noqa: E402


@pytest.mark.parametrize("page", sorted(gen_docs.PAGES))
def test_generated_page_is_current(page):
    want = gen_docs.PAGES[page]()
    have = (ROOT / page).read_text(encoding="utf-8")
    assert have == want, f"{page} is out of date: run `.venv/bin/python scripts/gen_docs.py`"


def test_cli_page_has_every_command_and_option():
    """Not only equal to what the generator makes: the generator itself covers every command and option."""
    import click

    from occd.cli.main import cli

    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    for path in gen_docs._commands():
        assert f"occd {' '.join(path)}\n" in text, path
        cmd: click.Command = cli
        for name in path:
            cmd = cmd.get_command(None, name)  # type: ignore[attr-defined]
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                assert any(o in text for o in p.opts), (path, p.opts)


def test_config_page_has_every_setting():
    from occd.config import descriptions

    text = (ROOT / "docs/config.md").read_text(encoding="utf-8")
    for key in descriptions():
        assert f"`{key}`" in text, key


def test_gen_docs_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch):
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    assert gen_docs.main([]) == 0  # writes both pages
    assert gen_docs.main(["--check"]) == 0
    p = tmp_path / "docs/config.md"
    p.write_text(p.read_text() + "stale\n")
    assert gen_docs.main(["--check"]) == 1


def test_every_doctor_check_has_a_troubleshooting_entry():
    from occd.health import doctor

    text = (ROOT / "docs/troubleshooting.md").read_text(encoding="utf-8")
    names = [name for _order, name, _fn in doctor.CHECKS]
    assert names, "doctor registers no checks?"
    missing = [n for n in names if f"### `{n}`" not in text]
    assert not missing, f"docs/troubleshooting.md has no section for: {missing}"


def _md_files():
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("md", _md_files(), ids=lambda p: p.name)
def test_links_point_at_files_that_exist(md):
    text = md.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # an address, not a file of the repository
        assert (md.parent / target).exists(), f"{md.name} links to {target}, which does not exist"


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 12 * 1024, "README.md must stay under 12 KB: move detail into docs/"
    lines = text.splitlines()
    assert lines[0].startswith("# occd")
    block = text.split("```", 2)[1]
    assert "occd demo" in block and "scripts/test.sh" in block, "the two set-up commands come first"
    for page in ("docs/guide.md", "docs/cli.md", "docs/config.md", "docs/benchmarks.md",
                 "docs/troubleshooting.md", "docs/openclaw-releases.md", "docs/design.md", "CHANGELOG.md"):
        assert page in text, f"the README links {page}"


def test_every_readme_figure_has_a_date_and_a_bench():
    """A measured figure in the README (a percentage, a ratio, seconds, a count of compactions) sits in a line
    that says when it was measured and which bench/ script or test makes it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    figure = re.compile(r"\d+(\.\d+)?\s?(%|x\b|ms\b|s\b| compactions?\b|/\d+\b| of \d+\b)")
    date = re.compile(r"20\d\d-\d\d-\d\d")
    source = re.compile(r"(bench/\w+\.py|tests/test_\w+\.py|docs/benchmarks\.md)")
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code or not figure.search(line):
            continue
        assert date.search(line) and source.search(line), f"README figure without a date and a source: {line!r}"


def test_changelog_names_the_current_version():
    from occd import __version__

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(__version__)}\b", text, re.M), f"CHANGELOG.md has no entry for {__version__}"


def test_gen_docs_runs_as_a_script():
    r = subprocess.run([sys.executable, str(ROOT / "scripts/gen_docs.py"), "--check"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
