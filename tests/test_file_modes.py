"""Issue 24 item 8: occd's own files are its user's alone whatever the umask: OCCD_HOME 0700, config.toml, logs,
caches, the ledger and its -wal/-shm 0600. Every writing command and a daemon cycle, under umask 000 and 022,
starting from no OCCD_HOME at all; and nothing occd writes in OpenClaw's state becomes group/other-writable."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_daemon_jobs import state_with
from tests.test_lean_upgrade import oc  # noqa: F401 - the fixture (a scripted `openclaw`)

KEY = "agent:main:main"


def _run(args, umask: int, cwd=None):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=180,
                          preexec_fn=lambda: os.umask(umask), cwd=cwd)


def _wide(root: Path, bits: int) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = p.lstat()
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & bits:
                out.append(f"{p.relative_to(root)} {stat.filemode(st.st_mode)}")
    return out


@pytest.mark.parametrize("umask", [0o000, 0o022])
@pytest.mark.slow
def test_occd_files_are_private_whatever_the_umask(isolated_env, umask):
    home = Path(os.environ["OCCD_HOME"])
    assert not home.exists()
    state = state_with(isolated_env, {KEY: {"turns": 40, "tools_per_turn": 3},
                                      "agent:main:other": {"turns": 30, "tools_per_turn": 3}}, window=150_000)
    os.chmod(state.parent, 0o755)
    for args in (["config", "init"], ["run", "--once", "--act"], ["run", "--once"], ["status"], ["history"],
                 ["edit", KEY, "--strip-tools=aggressive", "--force"], ["restore", KEY],
                 ["clone", KEY, "--strip-tools=extreme"], ["select", "--task", "webhook", "--no-llm"],
                 ["rotate", "agent:main:other", "--force"] , ["db", "backup"], ["doctor"]):
        r = _run(args, umask, cwd=isolated_env)
        assert "Traceback" not in r.stderr, (args, r.stderr)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    names = {str(p.relative_to(home)) for p in home.rglob("*")}
    assert {"config.toml", "ledger.db", "logs/occd.log"} <= names, names
    assert _wide(home, 0o077) == []
    # the -wal/-shm of a ledger opened by a daemon (they exist while it is open)
    import sqlite3

    c = sqlite3.connect(home / "ledger.db")
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("SELECT count(*) FROM sqlite_master").fetchall()
    r = _run(["run", "--once"], umask, cwd=isolated_env)
    assert r.returncode == 0, r.stderr
    for f in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        assert stat.S_IMODE((home / f).stat().st_mode) == 0o600, f
    c.close()
    assert _wide(state, 0o022) == []  # nothing group/other-writable in OpenClaw's state either


# ---- issue 32 §17: every file occd creates under OCCD_HOME, the lean view's included -------------------------

@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_every_file_under_occd_home_is_private_lean_view_included(oc, umask):
    """`lean enable` (the plugin copied from the installed package, whose files are 0644/0755), a daemon cycle,
    an edit: every folder under OCCD_HOME 0700 and every file 0600 (OpenClaw's gateway runs as the same user:
    that is all it needs to load the plugin)."""
    from click.testing import CliRunner

    from occd import lean
    from occd.cli.main import cli

    state, _pkg = oc
    old = os.umask(umask)
    try:
        runner = CliRunner()
        for args in (["lean", "enable", "--yes", "--state-dir", str(state)], ["run", "--once"], ["status"],
                     ["lean", "status"]):
            r = runner.invoke(cli, args)
            assert r.exit_code in (0, 1), (args, r.output)
    finally:
        os.umask(old)
    home = Path(os.environ["OCCD_HOME"])
    assert (lean.installed_plugin_dir() / "index.js").is_file() and lean.policy_path().is_file()
    assert lean.marker_path().is_file()
    wrong = []
    for dirpath, dirnames, filenames in os.walk(home):
        for n in dirnames:
            m = stat.S_IMODE((Path(dirpath) / n).lstat().st_mode)
            if m != 0o700:
                wrong.append(f"{Path(dirpath, n).relative_to(home)}/ {oct(m)}")
        for n in filenames:
            p = Path(dirpath) / n
            if p.is_symlink():
                continue
            m = stat.S_IMODE(p.lstat().st_mode)
            if m != 0o600:
                wrong.append(f"{p.relative_to(home)} {oct(m)}")
    assert wrong == []
