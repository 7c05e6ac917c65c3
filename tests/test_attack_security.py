"""Hostile inputs (issue 15, items 5, 7, 8, 10): path traversal through sessions.json, symlinked and foreign
transcripts, a FIFO named as a transcript, a repository whose config names programs, empty references."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from occd.errors import OccdError
from tests.statefactory import FileState

KEY = "agent:main:main"


@pytest.fixture
def fstate(isolated_env):
    return FileState(Path(os.environ["OPENCLAW_STATE_DIR"]))


@pytest.fixture
def settings():
    from occd.config import load_settings

    return load_settings({"idle_seconds": 0})


def occd(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_traversal_session_id_is_never_written(fstate, tmp_path):
    s = fstate.add_session(KEY, turns=10, tools_per_turn=3)
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = victim_dir / "evil.jsonl"
    shutil.copy(s.path, victim)
    before = victim.read_bytes()
    rel = os.path.relpath(victim_dir / "evil", fstate.sessions_dir())
    fstate.write_index({"agent:main:evil": {"sessionId": rel, "updatedAt": 9999999999999}})
    r = occd("edit", "agent:main:evil", "--strip-tools=aggressive", "--force")
    assert r.returncode != 0
    assert victim.read_bytes() == before and not list(victim_dir.glob("*backup*"))
    r = occd("run", "--once", "--act", timeout=120)  # the daemon acting on its own
    assert victim.read_bytes() == before and not list(victim_dir.glob("*backup*"))
    r = occd("sessions", "--json")
    assert "invalid sessionId" in r.stdout + r.stderr


def test_session_file_outside_the_sessions_dir_is_refused(fstate, settings, tmp_path):
    from occd.actions.edit import edit_session

    s = fstate.add_session(KEY, turns=10, tools_per_turn=3)
    other = tmp_path / "elsewhere" / "agents" / "main" / "sessions"
    other.mkdir(parents=True)
    moved = other / s.path.name
    shutil.move(s.path, moved)
    fstate.write_index({KEY: s.entry | {"sessionFile": str(moved)}})
    before = moved.read_bytes()
    with pytest.raises(OccdError) as ei:
        edit_session(settings, ref=KEY, force=True)
    assert ei.value.code == "UNSAFE_PATH"
    assert moved.read_bytes() == before


def test_symlinked_transcript_is_refused(fstate, settings, tmp_path):
    from occd.actions.edit import edit_session

    s = fstate.add_session(KEY, turns=10, tools_per_turn=3)
    real = tmp_path / "real.jsonl"
    shutil.move(s.path, real)
    os.symlink(real, s.path)
    before = real.read_bytes()
    with pytest.raises(OccdError) as ei:
        edit_session(settings, ref=KEY, force=True)
    assert ei.value.code == "UNSAFE_PATH"
    assert s.path.is_symlink() and real.read_bytes() == before
    assert not list(s.path.parent.glob("*backup*"))


def test_header_of_another_session_is_refused(fstate, settings):
    from occd.actions.edit import edit_session

    a = fstate.add_session(KEY, turns=10, tools_per_turn=3)
    b = fstate.add_session("agent:main:b", turns=10, tools_per_turn=3)
    shutil.copy(b.path, a.path)  # a's name now holds b's transcript
    with pytest.raises(OccdError) as ei:
        edit_session(settings, ref=KEY, force=True)
    assert ei.value.code == "UNSAFE_PATH"


@pytest.mark.parametrize("args", [["sessions"], ["run", "--once"], ["rotate", KEY, "--dry-run"], ["list"]])
def test_fifo_named_as_a_transcript_never_hangs(fstate, args):
    s = fstate.add_session(KEY, turns=4)
    s.path.unlink()
    os.mkfifo(s.path)
    r = occd(*args, timeout=60)  # a hang is a TimeoutExpired: the test fails
    assert "Traceback" not in r.stderr, r.stderr


def test_rotate_on_a_directory_is_a_clear_error(fstate):
    s = fstate.add_session(KEY, turns=4)
    s.path.unlink()
    s.path.mkdir()
    r = occd("rotate", KEY)
    assert r.returncode == 1 and "Internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["edit", "", "--strip-tools"], ["edit", "--agent", "", "--strip-tools"]])
def test_empty_reference_or_agent_is_a_usage_error(fstate, args):
    fstate.add_session(KEY, turns=4)
    r = occd(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)


def test_clone_of_an_empty_transcript(fstate):
    s = fstate.add_session(KEY, turns=4)
    s.path.write_bytes(b"")
    r = occd("clone", KEY)
    assert r.returncode == 1 and "bug in occd" not in r.stderr and "empty" in r.stderr, r.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_hostile_repository_runs_nothing(tmp_path):
    from occd.relevance.project import project_status

    repo = tmp_path / "repo"
    marker = tmp_path / "PWNED"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "a.txt").write_text("hi\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, env=env)
    hook = repo / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    for k, v in [("core.fsmonitor", str(hook)), ("core.hooksPath", str(repo)), ("filter.evil.clean", str(hook)),
                 ("core.pager", str(hook)), ("diff.external", str(hook))]:
        subprocess.run(["git", "config", k, v], cwd=repo, check=True)
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    for name in ("post-checkout", "pre-commit", "reference-transaction"):
        (repo / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (repo / name).chmod(0o755)
    (repo / "a.txt").write_text("changed\n")
    # git itself runs the hook (the attack is real here)
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    if not marker.exists():
        pytest.skip("this git does not run core.fsmonitor programs")
    marker.unlink()
    st = project_status(repo, use_gh=False)
    assert st.branch and st.uncommitted >= 1
    assert not marker.exists(), "occd's git ran a program named by the repository"


def test_ledger_from_a_newer_occd_says_so(isolated_env):
    from occd.ledger import Ledger
    from occd import paths

    Ledger.open().close()
    import sqlite3

    con = sqlite3.connect(paths.ledger_path())
    con.execute("UPDATE alembic_version SET version_num = '0099'")
    con.commit()
    con.close()
    for args in (["status"], ["db", "upgrade"]):
        r = occd(*args)
        assert r.returncode == 1 and "newer occd" in r.stderr and "Internal error" not in r.stderr, (args, r.stderr)


HANG_RUNNER = """
import os, sys, time
import occd.jobs
from occd.jobs import JobSpec

def scan(ctx):
    with open(os.environ["HANG_MARK"], "w") as f:
        f.write("started")
    time.sleep(3600)  # blocked like an open() on a FIFO: never looks at ctx.stop
    return {}

occd.jobs.JOBS = (JobSpec("scan", "hang.scan", lambda s: 3600, func=scan),)
from occd.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_sigterm_ends_the_daemon_within_seconds_even_with_a_stuck_job(isolated_env, tmp_path):
    import signal
    import time

    runner = tmp_path / "hang_runner.py"
    runner.write_text(HANG_RUNNER)
    mark = tmp_path / "started"
    p = subprocess.Popen([sys.executable, str(runner), "run"], env={**os.environ, "HANG_MARK": str(mark),
                                                                    "OCCD_STOP_GRACE_S": "2"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert mark.exists()
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=15)
        assert time.monotonic() - t0 < 10
        assert rc == 1
        assert "did not finish" in p.stderr.read()
        again = occd("run", "--once", timeout=60)  # the instance lock went with the process
        assert again.returncode != 75, again.stderr
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_locked_ledger_makes_run_once_exit_75(isolated_env):
    import sqlite3

    from occd import paths
    from occd.ledger import Ledger

    (isolated_env / ".openclaw").mkdir()  # a state to scan: the ledger is what is locked
    Ledger.open().close()
    con = sqlite3.connect(paths.ledger_path())
    con.execute("BEGIN EXCLUSIVE")
    try:
        r = occd("run", "--once", timeout=120)
    finally:
        con.rollback()
        con.close()
    assert r.returncode == 75, (r.returncode, r.stderr)


@pytest.mark.parametrize("args", [["run", "--once"], ["status"]])
def test_ledger_path_that_is_a_directory(isolated_env, args):
    from occd import paths

    (isolated_env / ".openclaw").mkdir()  # a state to scan: the ledger path is what is wrong
    paths.ledger_path().mkdir(parents=True)
    r = occd(*args, timeout=60)
    assert r.returncode == 1 and "is a directory" in r.stderr and "disk space" not in r.stderr, r.stderr
