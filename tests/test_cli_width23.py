"""Issue 23, item 18: what people read at 80 and 120 columns: no word, UUID or path cut in the middle, plurals,
values rather than Python reprs, no one-character sparkline, cut subjects marked with '…', occd's seed never
shown as a session's task. Every check runs at both widths."""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from tests.test_cli_daily import _demo_after_a_cycle

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def run(*args, width=None):
    env = {"COLUMNS": str(width)} if width else None
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


def age_free(text: str) -> str:
    return re.sub(r"\b\d+(\.\d+)?(s|m|h|d|min)\b", "<age>", text)


@pytest.fixture
def demo(isolated_env, monkeypatch):
    return _demo_after_a_cycle(isolated_env, monkeypatch)


@pytest.mark.parametrize("width", [80, 120])
def test_history_detail_keeps_uuids_whole(demo, width):
    from occd.ledger import Ledger

    sid = demo["sessions"]["agent:main:main"]["id"]
    other = "01a20771-bb86-7d1a-8000-000000000001"
    with Ledger.open() as led:
        led.record_action("rotate-undo", "main", sid, "agent:main:main", outcome="ok",
                          reason=f"rotation undone: {other} archived again, {sid} back under agent:main:main")
    out = run("history", width=width).output
    assert all(len(line) <= width for line in out.splitlines()), out
    assert other in out and sid in out  # each UUID on one line, whole


@pytest.mark.parametrize("width", [80, 120])
def test_status_doctor_and_backups_cut_no_word(demo, width):
    for args in (["status"], ["doctor"], ["stats"], ["history"]):
        # stdout: what is laid out for the terminal (a failing doctor's one error line on stderr stays one line)
        whole = run(*args).stdout
        out = run(*args, width=width).stdout
        def words(text):  # issue 32 §13: a path longer than the line is cut in the middle (its file name kept)
            return [w for w in age_free(" ".join(text.split())).split() if "/" not in w]

        assert words(out) == words(whole), args
        assert all(len(line) <= width for line in out.splitlines()), (args, out)
    out = run("backups", width=width).output
    for b in json.loads(run("backups", "--json").stdout)["backups"]:
        assert any(line.strip() == b["path"] or line.endswith("  " + b["path"])
                   or (line.strip().startswith("…") and b["path"].endswith(line.strip()[1:]))
                   for line in out.splitlines()), out
    assert all(len(line) <= width for line in out.splitlines()), out


@pytest.mark.parametrize("width", [80, 120])
def test_plurals_and_values_not_reprs(demo, width):
    sid = demo["sessions"]["agent:ops:main"]["id"]
    out = run("status", width=width).output
    flat = " ".join(out.split())
    assert "1 sessions" not in flat and "1 compactions" not in flat and "1 strips" not in flat
    assert "1 rotations" not in flat and "Agent ops" in flat and "1 session," in flat
    info = run("info", sid, "--agent", "ops", "-v", width=width).output
    for repr_ in ("None", "False", "True", "{'", "[]", "[{"):
        assert repr_ not in info, (repr_, info)
    assert all(len(line) <= width for line in info.splitlines() if "/" not in line)
    once = run("run", "--once", width=width).output
    assert "enabled False" not in once and "enabled no" in once


@pytest.mark.parametrize("width", [80, 120])
def test_no_one_character_sparkline(demo, width):
    sid = demo["sessions"]["agent:ops:main"]["id"]
    out = run("status", sid, "--agent", "ops", width=width).output
    line = next(x for x in out.splitlines() if "context tokens" in x)
    spark = line.split("context tokens", 1)[1].split()[0]
    assert len(spark) != 1, line


@pytest.mark.parametrize("width", [80, 120])
def test_a_cut_subject_ends_with_an_ellipsis(tmp_path, width):
    import subprocess

    repo = tmp_path / "r"
    repo.mkdir()
    subject = "Tables and lines are drawn without rich, wrapping at spaces so that no word is ever cut in the middle x"
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                                          "--allow-empty", "-m", subject]):
        subprocess.run(cmd, cwd=repo, check=True)
    out = run("project-status", str(repo), width=width).output
    line = next(x for x in out.splitlines() if "Tables" in x)
    assert len(line) <= width
    shown = line.split("ago  ", 1)[1]
    assert shown.endswith("…") and subject.startswith(shown[:-1]) and subject[len(shown) - 1] == " "


@pytest.mark.parametrize("width", [80, 120])
def test_the_seed_is_never_a_sessions_task(demo, width):
    rows = json.loads(run("sessions", "--json").stdout)["sessions"]
    assert not [r for r in rows if (r["latestUserTask"] or "").startswith("[occd]")]
    assert "This session continues" not in run("sessions", width=width).output


def test_lean_help_lists_every_subcommand():
    for width in (80, 120):
        out = run("lean", "--help", width=width).output
        for sub in ("enable", "disable", "status"):
            assert re.search(rf"^\s+{sub}\s", out, re.M), out


def test_the_session_prompt_wraps_at_spaces(monkeypatch):
    from occd.cli.common import session_question

    for width in (80, 120, 40):
        monkeypatch.setenv("COLUMNS", str(width))
        q = session_question("edit")
        assert all(len(line) <= width - 2 for line in q.splitlines())
        assert " ".join(q.split()) == ("Which session should `occd edit` act on? (id, any unique part of it, or key; "
                                       "`occd list` shows them)")


def test_plain_values():
    from occd.cli.render import plain, plural

    assert plain(None) == "-" and plain(False) == "no" and plain(True) == "yes" and plain([]) == "none"
    assert plain({"a": 1, "b": None}) == "a 1, b -" and plain(2.50) == "2.5"
    assert plural(1, "session") == "1 session" and plural(2, "emergency", "emergencies") == "2 emergencies"
    assert time
