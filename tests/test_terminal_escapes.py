"""Issue 24 item 7: nothing occd prints for people that came from OpenClaw's files (or a repository) reaches the
terminal as a control sequence. The class: OSC 52 (clipboard), OSC 8 (links), CSI colours, CR, LF (fake table
rows), BEL, C1 CSI, bidi override, in session keys, labels, agent names, paths, commit subjects and error messages,
for each human-readable command; on a pipe and on a colour terminal (a pty). --json keeps the data."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_daemon_jobs import state_with

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
CSI = "\x1b[5;41m"
BAD = {"osc52": OSC52, "osc8": OSC8, "csi": CSI, "cr": "\rOVERWRITTEN", "lf": "\nFAKE ROW 1 2 3", "bel": "\x07",
       "c1": "\x9b31m", "bidi": "\u202etxt.exe"}
EVIL = "".join(BAD.values())
AGENT = "ops" + OSC52 + CSI
KEY = "agent:main:chat" + OSC52 + "\nFAKE ROW"


def assert_clean(out: str, where: str) -> None:
    for name, seq in [("ESC", "\x1b"), ("BEL", "\x07"), ("CR", "\r"), ("C1", "\x9b"), ("bidi", "\u202e")]:
        assert seq not in out, f"{where}: raw {name} in output: {out[:400]!r}"
    for line in out.splitlines():
        assert not line.startswith(("FAKE ROW", "OVERWRITTEN")), f"{where}: data made a line of its own: {line!r}"


def assert_clean_on_colour_terminal(out: str, where: str) -> None:
    """On a colour terminal occd's own SGR codes may appear; nothing else may."""
    import re

    rest = re.sub(r"\x1b\[[0-9;]*m", "", out.replace(CSI, "<DATA-CSI>"))
    assert "<DATA-CSI>" not in rest, f"{where}: the data's colour code reached the terminal"
    assert_clean(rest.replace("\r\n", "\n"), where)


@pytest.fixture
def evil_state(isolated_env, tmp_path):
    home = isolated_env
    state = state_with(home, {KEY: {"turns": 6, "tools_per_turn": 2}, "agent:main:main": {"turns": 4}})
    sdir = state / "agents/main/sessions"
    idx = json.loads((sdir / "sessions.json").read_text())
    for e in idx.values():
        e["label"] = "label " + EVIL
        e["displayName"] = "name " + EVIL
        e["subject"] = "subject " + EVIL
    (sdir / "sessions.json").write_text(json.dumps(idx))
    # a second agent whose very name carries the sequences
    state_with(home, {f"agent:{AGENT}:main": {"turns": 3}}, agent=AGENT)
    # a repository whose commit subject and branch carry them
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_AUTHOR_NAME": "a" + OSC52,
           "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    (repo / "f").write_text("x")
    subprocess.run(["git", "add", "f"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "subject " + EVIL.replace("\n", " ")], cwd=repo, check=True, env=env)
    return state, repo


def commands(repo: Path) -> list[list[str]]:
    return [["list"], ["list", "--agent", AGENT], ["info", KEY], ["info", "chat"], ["status"], ["sessions"],
            ["backups"], ["history"], ["doctor"], ["project-status", str(repo)],
            ["select", "--task", "fix " + EVIL, "--repo", str(repo)],
            ["info", "nope" + EVIL],                    # an error message quoting the argument
            ["list", "--agent", "x" + OSC8],            # an error naming the agent
            ["project-status", str(repo / ("d" + OSC52))]]


def run(args, **kw):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.slow
def test_every_human_command_escapes_what_came_from_files(evil_state):
    state, repo = evil_state
    for args in commands(repo):
        r = run(args)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert_clean(r.stdout, f"stdout of {args[:2]}")
        assert_clean(r.stderr, f"stderr of {args[:2]}")
    r = run(["list"])
    assert "\\x1b]52;c;ZXZpbA==\\x07" in r.stdout  # shown, escaped: the user can still see what is there


def test_json_keeps_the_data(evil_state):
    state, repo = evil_state
    r = run(["list", "--json"])
    assert r.returncode == 0
    rows = json.loads(r.stdout)["sessions"]
    assert any(row.get("key") == KEY for row in rows)
    assert "\x1b" not in r.stdout  # JSON escapes it (\u001b)
    r = run(["info", "nope" + EVIL, "--json"])
    assert r.returncode == 1 and ("nope" + EVIL.split("\n")[0]) in json.loads(r.stdout)["error"]["message"]


def _pty_run(args: list[str], timeout: float = 120) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="200")
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execvpe(sys.executable, [sys.executable, "-m", "occd", *args], env)
    out = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 1)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    os.waitpid(pid, 0)
    return out.decode("utf-8", "replace")


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_on_a_colour_terminal_only_occds_own_colours_pass(evil_state):
    state, repo = evil_state
    for args in (["list"], ["info", KEY], ["status"], ["sessions"], ["info", "nope" + EVIL],
                 ["project-status", str(repo)]):
        assert_clean_on_colour_terminal(_pty_run(args), f"pty {args[:2]}")
