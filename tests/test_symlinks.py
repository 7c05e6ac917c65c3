"""Issue 24 item 6: symlinks planted where occd reads or writes, in its own folders and in OpenClaw's sessions
folder. The class: a backup slot (restore), a backup that is not this session's transcript, the archive folder
(rotation, the score job's idle-archive, rotate --undo), the archive's temp name, the ledger, occd's session lock
and the daemon's instance lock, the scan cache. Each either refuses with one clear line or writes around the link;
no target outside is ever written, read into a transcript, or truncated; the live file keeps its mode."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_daemon_jobs import state_with

KEY = "agent:main:main"
SECRET = b"API_KEY=sk-live-0123456789abcdef\n"


def occd(*args):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=180)


@pytest.fixture
def st(isolated_env, tmp_path):
    state = state_with(isolated_env, {KEY: {"turns": 30, "tools_per_turn": 3}}, window=150_000)
    sdir = state / "agents/main/sessions"
    (path,) = [p for p in sdir.glob("*.jsonl")]
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.env"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    return sdir, path, outside, secret


def _untouched(outside: Path, secret: Path) -> None:
    assert secret.read_bytes() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert sorted(p.name for p in outside.iterdir()) == ["secret.env"], list(outside.iterdir())


def _one_line_error(r, code: int = 1) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Internal error" not in r.stderr, r.stderr
    return r.stderr


def test_restore_refuses_a_symlinked_slot_and_a_foreign_backup_and_keeps_the_mode(st):
    sdir, path, outside, secret = st
    path.chmod(0o600)
    live = path.read_bytes()
    r = occd("edit", KEY, "--strip-tools=aggressive", "--force")
    assert r.returncode == 0, r.stderr
    edited = path.read_bytes()
    stem = path.name[: -len(".jsonl")]
    # a newer slot that is a symlink to a secret
    link = sdir / f"{stem}.backup.7.jsonl"
    link.symlink_to(secret)
    err = _one_line_error(occd("restore", KEY, "--force"))
    assert "symbolic link" in err
    assert path.read_bytes() == edited
    _untouched(outside, secret)
    link.unlink()
    # a regular file in the slot that is not a transcript of this session (a copy of the secret, another session)
    other = sdir / f"{stem}.backup.8.jsonl"
    other.write_bytes(SECRET)
    err = _one_line_error(occd("restore", KEY, "--force"))
    assert "not a transcript of session" in err and path.read_bytes() == edited
    header = json.loads(live.splitlines()[0])
    other.write_bytes(json.dumps({**header, "id": "0199aaaa-0000-7000-8000-000000000000"}).encode() + b"\n")
    err = _one_line_error(occd("restore", KEY, "--force"))
    assert "not a transcript of session" in err and path.read_bytes() == edited
    other.unlink()
    # the real backup restores, and the live file keeps its mode even though the backup is wider
    (bk,) = [p for p in sdir.glob(f"{stem}.backup.*.jsonl")]
    bk.chmod(0o644)
    r = occd("restore", KEY, "--force")
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == live and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotation_refuses_a_symlinked_archive_folder(st):
    sdir, path, outside, secret = st
    before = path.read_bytes()
    (sdir / "archive").symlink_to(outside, target_is_directory=True)
    err = _one_line_error(occd("rotate", KEY, "--force"))
    assert "symbolic link" in err
    assert path.read_bytes() == before
    _untouched(outside, secret)


def test_rotation_writes_around_a_symlink_at_the_archive_temp_name(st):
    sdir, path, outside, secret = st
    (sdir / "archive").mkdir()
    (sdir / "archive" / f".{path.name}.occd-tmp").symlink_to(secret)
    (sdir / "archive" / path.name).symlink_to(outside / "planted.jsonl")  # the archive name itself
    r = occd("rotate", KEY, "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    _untouched(outside, secret)
    archived = [p for p in (sdir / "archive").iterdir() if not p.is_symlink()]
    assert archived and all(json.loads(p.read_bytes().splitlines()[0])["type"] == "session" for p in archived)


def test_undo_refuses_when_the_archive_folder_became_a_symlink(st):
    sdir, path, outside, secret = st
    r = occd("rotate", KEY, "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    arch = sdir / "archive"
    moved = sdir.parent / "archive-real"
    arch.rename(moved)
    for p in moved.iterdir():  # the same archive, now reached through a link to a folder outside
        (outside / p.name).write_bytes(p.read_bytes())
    arch.symlink_to(outside, target_is_directory=True)
    names = sorted(p.name for p in outside.iterdir())
    err = _one_line_error(occd("rotate", KEY, "--undo"))
    assert "symbolic link" in err
    assert sorted(p.name for p in outside.iterdir()) == names and secret.read_bytes() == SECRET


def test_idle_archive_never_writes_into_a_symlinked_archive_folder(isolated_env, tmp_path):
    from occd.config import load_settings
    from occd.jobs import JobContext
    from occd.jobs import score as score_job
    from occd.ledger import Ledger
    from tests.test_relevance import make_file_agent

    now = time.time()
    state = isolated_env / ".openclaw"
    sdir = make_file_agent(state, "main", [
        {"sid": "active", "users": ["refactor the webhook handler"], "cwd": str(isolated_env), "mtime": now - 60},
        {"sid": "old-rota", "users": ["plan the holiday rota"], "cwd": str(isolated_env), "mtime": now - 30 * 86400},
    ])
    os.utime(sdir / "old-rota.jsonl", (now - 30 * 86400, now - 30 * 86400))
    outside = tmp_path / "outside"
    outside.mkdir()
    (sdir / "archive").symlink_to(outside, target_is_directory=True)
    with Ledger.open() as led:
        out = score_job.run(JobContext(settings=load_settings({"policy": {"mode": "act"}}), ledger=led,
                                       state_dir=state, clock=lambda: now))
        assert out["archived"] == 0
    assert list(outside.iterdir()) == [] and (sdir / "old-rota.jsonl").exists()


@pytest.mark.slow
def test_occd_own_files_never_follow_a_planted_symlink(st):
    sdir, path, outside, secret = st
    home = Path(os.environ["OCCD_HOME"])
    (home / "run").mkdir(parents=True)
    (home / "cache").mkdir(parents=True)
    # occd's per-session lock and the daemon's instance lock: a symlink to the secret must not be truncated
    digest = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:24]
    (home / "run" / f"session-{digest}.lock").symlink_to(secret)
    (home / "run" / "occd.lock").symlink_to(secret)
    (home / "cache" / "scan-files.json").symlink_to(outside / "cache.json")
    r = occd("edit", KEY, "--strip-tools=aggressive", "--force")
    assert "symbolic link" in _one_line_error(r)
    r = occd("run", "--once")
    assert "symbolic link" in _one_line_error(r)
    _untouched(outside, secret)
    (home / "run" / "occd.lock").unlink()
    r = occd("run", "--once")
    assert r.returncode == 0, r.stderr
    _untouched(outside, secret)
    # the ledger itself
    led = home / "ledger.db"
    led.rename(outside / "ledger.db")
    led.symlink_to(outside / "ledger.db")
    size = (outside / "ledger.db").stat().st_size
    assert "symbolic link" in _one_line_error(occd("run", "--once"))
    assert (outside / "ledger.db").stat().st_size == size
