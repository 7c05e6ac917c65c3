"""`occd check`: backups, archives and rotation archives the ledger knows are present with the size and sha256
recorded when occd made them; --read-data loads them as their session's transcript; the ledger's integrity.
Problems stay open (status --check, doctor fail) until a later check passes or the artifact is forgotten."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from test_rotation import KEY, make_state


@pytest.fixture
def state(isolated_env):
    return make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))


def run(*args):
    return CliRunner().invoke(cli, list(args))


def jrun(*args):
    r = run(*args, "--json")
    return r.exit_code, json.loads(r.stdout)


def _led():
    from occd.ledger import Ledger

    return Ledger.open()


def _edit(state):
    r = run("edit", state.entry()["sessionId"], "--strip-tools", "--force")
    assert r.exit_code == 0, r.output
    with _led() as led:
        (b,) = led.backups()
    return b


def _rotate(state):
    r = run("rotate", KEY, "--force")
    assert r.exit_code == 0, r.output
    with _led() as led:
        rot = led.rotations(limit=1)[0]
    return Path(rot["archive_path"])


def test_backup_hash_recorded_at_creation_and_clean_check_passes(state):
    b = _edit(state)
    assert b["sha256"] and b["sha256_source"] == "creation" and b["size"] == Path(b["path"]).stat().st_size
    code, out = jrun("check", "--read-data")
    assert code == 0 and out["success"] and out["command"] == "check"
    assert out["counts"]["artifacts"] == 1 and out["counts"]["ok"] == 1 and out["problems"] == []
    assert out["ledger"]["integrity"] == "ok" and out["ledger"]["foreignKeyViolations"] == 0


def test_flipped_byte_in_backup_is_named_and_stays_open_until_fixed(state):
    b = _edit(state)
    p = Path(b["path"])
    good = p.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    p.write_bytes(bytes(bad))
    r = run("check")
    assert r.exit_code == 1
    assert f"backup:{b['id']}" in r.stderr and "same size, different sha256" in r.stderr
    assert "occd check --forget backup:" in r.stderr
    code, out = jrun("check")
    assert code == 1 and out["success"] is False and out["error"]["code"] == "ARTIFACT_CHANGED"
    # status --check and doctor fail while it is open
    rs = run("status", "--check")
    assert rs.exit_code == 1 and f"backup:{b['id']}" in rs.stderr
    rd = run("doctor")
    assert rd.exit_code == 1 and "backup:" in rd.output
    # the file comes back: a later check passes and closes the problem
    p.write_bytes(good)
    assert run("check").exit_code == 0
    with _led() as led:
        assert led.open_problems() == []


def test_deleted_rotation_archive_then_forget(state):
    arch = _rotate(state)
    assert arch.exists()
    with _led() as led:
        s = [x for x in led.sessions() if x.get("archive_path") == str(arch)][0]
        assert s["archive_sha256"] and s["archive_sha256_source"] == "creation"
    arch.unlink()
    code, out = jrun("check")
    assert code == 1
    (p,) = [x for x in out["problems"] if x["code"] == "ARTIFACT_MISSING"]
    assert p["path"] == str(arch) and "rotation archive" in p["message"] and "--forget" in p["hint"]
    # forgetting needs the exact id; it is recorded and closes the problem
    assert run("check", "--forget", "archive:999").exit_code == 1
    code, res = jrun("check", "--forget", p["id"])
    assert code == 0 and res["forgotten"] == p["id"] and res["problemsClosed"] == 1
    assert run("check").exit_code == 0
    assert run("status", "--check").stderr.count(p["id"]) == 0
    with _led() as led:
        rows = led._rows("SELECT resolution FROM problems WHERE subject = ? ORDER BY id", (p["id"],))
        assert [r["resolution"] for r in rows] == ["forgotten", "forgotten"]


def test_truncated_archive_found_by_size_and_by_read_data(state):
    arch = _rotate(state)
    data = arch.read_bytes()
    arch.write_bytes(data[: len(data) - 40])  # a torn last line
    code, out = jrun("check", "--read-data")
    assert code == 1
    codes = {x["code"] for x in out["problems"]}
    assert codes == {"ARTIFACT_CHANGED", "ARTIFACT_DAMAGED"}, out["problems"]
    dmg = next(x for x in out["problems"] if x["code"] == "ARTIFACT_DAMAGED")
    assert "does not load as the transcript" in dmg["message"]


def test_archive_that_only_grew_at_its_end_is_intact(state):
    arch = _rotate(state)
    before = arch.stat().st_size
    with open(arch, "ab") as fh:  # lines absorbed after the rotation (absorb_strays) go to the end
        fh.write(b'{"type":"custom","customType":"x","id":"zz1","parentId":null,"timestamp":"2026-01-01T00:00:00Z"}\n')
    code, out = jrun("check")
    assert code == 0, out
    (a,) = out["artifacts"]
    assert "grew by" in a["note"] and str(before) in a["note"]


def test_row_made_before_hashes_gets_its_hash_on_first_check_and_says_so(state):
    b = _edit(state)
    with _led() as led:
        with led._w() as c:
            c.exec_driver_sql("UPDATE backups SET sha256 = NULL, sha256_source = NULL")
    r = run("check")
    assert r.exit_code == 0 and "made before occd recorded hashes" in r.stdout
    with _led() as led:
        (b2,) = led.backups()
    assert b2["sha256"] == b["sha256"] and b2["sha256_source"] == "first-check"
    # from then on a change is caught
    p = Path(b["path"])
    p.write_bytes(p.read_bytes().replace(b"a", b"b", 1))
    assert run("check").exit_code == 1


def test_ledger_row_pointing_at_a_missing_file(state):
    with _led() as led:
        led.record_backup("/nonexistent/dir/x.backup.1.jsonl", "main", "sid-1", size=10, sha256="0" * 64)
    code, out = jrun("check")
    assert code == 1 and out["problems"][0]["code"] == "ARTIFACT_MISSING"
    assert "/nonexistent/dir/x.backup.1.jsonl" in out["problems"][0]["message"]


def test_read_data_problem_survives_a_cheap_check(state):
    b = _edit(state)
    p = Path(b["path"])
    # a backup whose header names another session (same bytes as recorded: only --read-data sees it)
    text = p.read_text().replace(state.entry()["sessionId"], "another-session-id")
    p.write_text(text)
    with _led() as led:
        from occd.ledger.digest import fingerprint

        size, sha = fingerprint(p)
        led.set_backup_fingerprint(b["id"], size, sha, "creation")
    assert run("check").exit_code == 0
    r = run("check", "--read-data")
    assert r.exit_code == 1 and "another-session-id" in r.stderr
    r = run("check")  # the cheap form cannot tell: the problem stays open
    assert r.exit_code == 1 and "STILL OPEN" in r.stderr


def test_ledger_foreign_key_violation(state):
    _edit(state)
    from occd import paths

    con = sqlite3.connect(paths.ledger_path())
    con.execute("PRAGMA foreign_keys = OFF")
    con.execute("INSERT INTO observations (session_pk, ts, compaction_count) VALUES (99999, 1.0, 0)")
    con.commit()
    con.close()
    code, out = jrun("check")
    assert code == 1 and out["problems"][0]["code"] == "LEDGER_FOREIGN_KEYS" and out["ledger"]["foreignKeyViolations"] == 1


def test_daemon_jobs_run_both_forms_and_record_them(state, monkeypatch):
    from occd import jobs as jobs_mod
    from occd.config import load_settings
    from occd.jobs import JobContext

    b = _edit(state)
    s = load_settings()
    by = {x.name: x for x in jobs_mod.JOBS}
    assert by["check"].enabled(s) and by["check-data"].enabled(s)
    monkeypatch.setenv("OCCD_CHECK__READ_DATA_INTERVAL_DAYS", "0")
    assert not by["check-data"].enabled(load_settings())  # 0 = never
    Path(b["path"]).unlink()
    with _led() as led:
        ctx = JobContext(settings=s, ledger=led, state_dir=Path(os.environ["OPENCLAW_STATE_DIR"]))
        assert jobs_mod.job_function(by["check"])(ctx)["problems"] == 1
        assert jobs_mod.job_function(by["check-data"])(ctx)["problems"] == 1
        runs = led._rows("SELECT read_data, trigger, problems FROM check_runs ORDER BY id")
        assert runs == [{"read_data": 0, "trigger": "auto", "problems": 1}, {"read_data": 1, "trigger": "auto", "problems": 1}]
        assert [p["code"] for p in led.open_problems()] == ["ARTIFACT_MISSING"]


def test_check_without_a_ledger_creates_none(isolated_env):
    from occd import paths

    code, out = jrun("check")
    assert code == 0 and out["success"] and out["artifacts"] == [] and not paths.ledger_path().exists()
