"""Issue 31 (6, 7, 8): `occd check` re-reads the ledger before calling a backup or archive gone (a prune, restore
or undo that removed and recorded it meanwhile is no alarm); accepts an archive's growth only as whole JSON lines
(a rejected growth leaves every recorded figure as it was); finds backups the ledger does not know. A full
OCCD_HOME: an edit whose record cannot be written is not made; `run --once --act` ends with one clear line."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from occd.ledger import check as chk
from test_check import _edit, _led, _rotate, jrun, run, state  # noqa: F401 - the fixture
from test_rotation import KEY


def _second_backup(state):  # noqa: F811
    r = run("edit", state.entry()["sessionId"], "--strip-tools", "extreme", "--force")
    assert r.exit_code == 0, r.output
    with _led() as led:
        return led.backups()


def _interleave(monkeypatch, action):
    """Run `action` between the check's listing of the artifacts and its first look at them."""
    real = chk.collect

    def collect(led):
        arts = real(led)
        action()
        return arts

    monkeypatch.setattr(chk, "collect", collect)


def test_a_backup_pruned_and_recorded_while_check_runs_is_no_alarm(state, monkeypatch):  # noqa: F811
    b = _edit(state)
    monkeypatch.setattr(chk, "UNRECORDED_GRACE_S", 0.0)

    def prune():
        Path(b["path"]).unlink()
        with _led() as other:  # the pruner's own connection
            other.mark_backup_pruned(b["path"])

    _interleave(monkeypatch, prune)
    code, out = jrun("check")
    assert code == 0 and out["problems"] == [], out["problems"]
    (a,) = out["artifacts"]
    assert a["status"] == "released" and "pruned" in a["note"]


def test_a_prune_that_records_a_moment_after_deleting_is_no_alarm(state, monkeypatch):  # noqa: F811
    b = _edit(state)
    monkeypatch.setattr(chk, "UNRECORDED_GRACE_S", 0.0)
    _interleave(monkeypatch, lambda: Path(b["path"]).unlink())  # deleted; not recorded yet
    slept = []

    def sleep(s):  # the pruner records its prune while the check waits once
        slept.append(s)
        with _led() as other:
            other.mark_backup_pruned(b["path"])

    monkeypatch.setattr(chk.time, "sleep", sleep)
    code, out = jrun("check")
    assert code == 0 and out["problems"] == [] and slept == [chk.SETTLE_S], out


def test_a_backup_gone_without_a_record_is_still_named(state, monkeypatch):  # noqa: F811
    b = _edit(state)
    _interleave(monkeypatch, lambda: Path(b["path"]).unlink())
    monkeypatch.setattr(chk.time, "sleep", lambda s: None)
    code, out = jrun("check")
    assert code == 1 and [p["code"] for p in out["problems"]] == ["ARTIFACT_MISSING"]


def test_an_archive_restored_while_check_runs_is_no_alarm(state, monkeypatch):  # noqa: F811
    arch = _rotate(state)
    with _led() as led:
        s = next(x for x in led.sessions() if x.get("archive_path") == str(arch))
        rot = led.rotations(limit=1)[0]

    def restore():
        arch.unlink()
        with _led() as other:
            other.mark_session_unarchived(s["agent_id"], s["session_id"])
            with other._w() as c:
                c.exec_driver_sql("UPDATE rotations SET state = 'UNDONE' WHERE id = ?", (rot["id"],))

    _interleave(monkeypatch, restore)
    code, out = jrun("check")
    assert code == 0 and out["problems"] == [], out["problems"]


# ---- 31.7: growth only as whole JSON lines; a rejected one changes no recorded figure -------------------------

LINE = b'{"type":"custom","customType":"x","id":"zz1","parentId":null,"timestamp":"2026-01-01T00:00:00Z"}\n'
JUNK = {
    "nul-padding": b"\0" * 65536,
    "line-then-nul": LINE + b"\0" * 4096,
    "partial-line": LINE[:-10],
    "text": b"not json at all\n",
    "json-not-object": b"[1, 2, 3]\n",
    "blank-line": b"\n",
    "nul-line": b"\0\0\0\n",
    "too-big": None,  # a growth larger than a check reads
}


def _figures():
    """Every figure `occd check` updates: the backups' and the archives' size, sha256 and its source."""
    with _led() as led:
        return (led._rows("SELECT id, size, sha256, sha256_source FROM backups ORDER BY id"),
                led._rows("SELECT id, archive_size, archive_sha256, archive_sha256_source FROM sessions ORDER BY id"))


@pytest.mark.parametrize("junk", sorted(JUNK))
def test_an_archive_grown_by_junk_is_a_problem_and_no_figure_moves(state, monkeypatch, junk):  # noqa: F811
    _edit(state)  # a backup too: its figures must not move either
    arch = _rotate(state)
    assert jrun("check")[0] == 0
    before = _figures()
    data = JUNK[junk]
    if data is None:
        monkeypatch.setattr(chk, "MAX_GROWTH", 1024)
        data = LINE * 64
    with open(arch, "ab") as fh:
        fh.write(data)
    for _ in range(2):  # rejected: it stays a problem, check after check
        code, out = jrun("check")
        assert code == 1, out
        (p,) = out["problems"]
        assert p["code"] == "ARTIFACT_CHANGED" and "not whole JSON lines" in p["message"], p
        assert _figures() == before


def test_a_backup_that_grew_is_a_problem_whatever_it_grew_by(state):  # noqa: F811
    b = _edit(state)
    before = _figures()
    with open(b["path"], "ab") as fh:
        fh.write(LINE)
    code, out = jrun("check")
    assert code == 1 and out["problems"][0]["code"] == "ARTIFACT_CHANGED"
    assert _figures() == before


def test_a_backup_made_a_moment_ago_is_left_to_the_change_recording_it(state, monkeypatch):  # noqa: F811
    from occd.errors import OccdError
    from occd.ledger import Ledger

    def refuse(self, *a, **k):
        raise OccdError("Cannot write the ledger: disk I/O error", None)

    with monkeypatch.context() as m:
        m.setattr(Ledger, "record_action", refuse)
        assert run("edit", state.entry()["sessionId"], "--strip-tools", "--force").exit_code == 0
    assert jrun("check")[0] == 0  # within UNRECORDED_GRACE_S of its making: not judged yet


def test_whole_json_lines_are_accepted_and_recorded(state):  # noqa: F811
    arch = _rotate(state)
    before = _figures()
    with open(arch, "ab") as fh:
        fh.write(LINE * 3)
    code, out = jrun("check")
    assert code == 0, out
    assert _figures() != before
    assert jrun("check")[0] == 0


# ---- 31.8: a full OCCD_HOME ---------------------------------------------------------------------------------

def _full_occd_home(monkeypatch):
    """Writes into OCCD_HOME fail with ENOSPC (file writes through Python; the ledger's own SQLite writes are
    simulated where a test needs them)."""
    home = os.path.realpath(os.environ["OCCD_HOME"])

    def under_home(fd):
        try:
            return os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")).startswith(home)
        except OSError:
            return False

    real_write, real_falloc, real_pwrite = os.write, os.posix_fallocate, os.pwrite

    def write(fd, data):
        if under_home(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def falloc(fd, off, n):
        if under_home(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_falloc(fd, off, n)

    def pwrite(fd, data, off):
        if under_home(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, off)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "posix_fallocate", falloc)
    monkeypatch.setattr(os, "pwrite", pwrite)


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc to tell where an fd points")
def test_an_edit_that_could_not_be_recorded_is_not_made(state, monkeypatch):  # noqa: F811
    assert jrun("check")[0] == 0  # the ledger exists
    path = Path(state.entry()["sessionFile"]) if "sessionFile" in state.entry() else None
    sdir = Path(os.environ["OPENCLAW_STATE_DIR"]) / "agents" / "main" / "sessions"
    files = {p: p.read_bytes() for p in sdir.iterdir()}
    _full_occd_home(monkeypatch)
    r = run("edit", state.entry()["sessionId"], "--strip-tools", "--force")
    assert r.exit_code == 1, r.output
    assert "Failed to write" in r.stderr and "not made" in r.stderr and "Traceback" not in r.output
    assert {p: p.read_bytes() for p in sdir.iterdir()} == files  # no rewrite, no backup
    assert path is None or path.exists()


def test_backups_the_ledger_does_not_know_are_found(state, monkeypatch):  # noqa: F811
    from occd.errors import OccdError
    from occd.ledger import Ledger

    assert jrun("check")[0] == 0
    monkeypatch.setattr(chk, "UNRECORDED_GRACE_S", 0.0)  # (a backup made seconds ago is left to its change)

    def refuse(self, *a, **k):
        raise OccdError("Cannot write the ledger: disk I/O error", None)

    with monkeypatch.context() as m:  # the record fails after the edit was made (the disk filled meanwhile)
        m.setattr(Ledger, "record_action", refuse)
        r = run("edit", state.entry()["sessionId"], "--strip-tools", "--force")
        assert r.exit_code == 0 and "could not record" in r.stderr
    sdir = Path(os.environ["OPENCLAW_STATE_DIR"]) / "agents" / "main" / "sessions"
    (orphan,) = [p for p in sdir.iterdir() if ".backup." in p.name]
    code, out = jrun("check")
    assert code == 1, out
    (p,) = out["problems"]
    assert p["code"] == "BACKUP_UNRECORDED" and orphan.name in p["message"] and out["counts"]["unrecorded"] == 1
    r = run("check")
    assert r.exit_code == 1 and "everything occd keeps is intact" not in r.output and orphan.name in r.stderr
    code, res = jrun("check", "--forget", p["id"])
    assert code == 0 and res["problemsClosed"] == 1
    assert jrun("check")[0] == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc to tell where an fd points")
def test_run_once_act_with_a_full_home_is_one_clear_line(state, monkeypatch):  # noqa: F811
    assert run("run", "--once").exit_code in (0, 1)
    _full_occd_home(monkeypatch)
    r = run("run", "--once", "--act")
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert "Internal error" not in r.stderr and any(x.startswith("Error: Failed to write") for x in lines), r.stderr
    r = run("run", "--once", "--act", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["success"] is False


def test_every_json_failure_writes_its_one_error_line_to_stderr(state, monkeypatch):  # noqa: F811
    """README: on failure `error` is {code, message, hint} and the same one line goes to stderr (issue 32.3)."""
    b = _edit(state)
    Path(b["path"]).write_bytes(b"changed\n")
    monkeypatch.setattr(chk.time, "sleep", lambda s: None)
    for args in (["check"], ["status", "--check"], ["doctor", "--check", "problems"]):
        r = run(*args, "--json")
        out = json.loads(r.stdout)
        assert r.exit_code == 1 and out["success"] is False, (args, out)
        e = out["error"]
        assert r.stderr.strip().splitlines() == [f"Error: {e['message']} (hint: {e['hint']})"], (args, r.stderr)
