"""Attacks on the data (issue 15, items 1-4 and 9): concurrent occd writes, an OpenClaw run starting mid-rewrite,
appenders racing a rotation, a lock-less sessions.json writer, crashed edits' temp files.

The race tests run real processes/threads against each other, bounded in time (RACE_SECONDS each); the exact
interleavings are also forced deterministically where a hook allows it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from occd.errors import BusyError
from occd.openclaw import new_session_id
from tests.statefactory import FileState

RACE_SECONDS = float(os.environ.get("OCCD_RACE_SECONDS", "8"))
KEY = "agent:main:main"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def fstate(isolated_env):
    return FileState(Path(os.environ["OPENCLAW_STATE_DIR"]))


@pytest.fixture
def settings():
    from occd.config import load_settings

    return load_settings({"idle_seconds": 0})


def session(fstate, turns=30, **kw):
    return fstate.add_session(KEY, turns=turns, tools_per_turn=3, seed=7, **kw)


def line_ids(p: Path) -> set:
    out = set()
    for raw in p.read_bytes().splitlines():
        try:
            o = orjson.loads(raw)
        except ValueError:
            continue
        if isinstance(o, dict) and isinstance(o.get("probe"), int):
            out.add(o["probe"])
    return out


# ------------------------------------------------------------------------------------ 1. concurrent edits

def test_backup_name_taken_is_never_replaced(fstate, monkeypatch, tmp_path):
    """The second of two edits picked the same backup number: link(2) fails with EEXIST, which must move it to the
    next number, not make it copy over the other one's backup."""
    from occd.actions import backups

    s = session(fstate)
    other = s.path.with_name(f"{s.path.stem}.backup.1.jsonl")
    other.write_bytes(b"the other edit's backup\n")
    monkeypatch.setattr(backups, "next_backup_path", lambda p: other)
    made = backups.snapshot(s.path)
    assert made.name.endswith(".backup.2.jsonl")
    assert other.read_bytes() == b"the other edit's backup\n"
    assert made.samefile(s.path)


def test_copy_only_where_links_are_unsupported(fstate, monkeypatch):
    import errno

    from occd.actions import backups

    s = session(fstate)
    monkeypatch.setattr(backups, "_link", lambda a, b: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
    first = backups.snapshot(s.path)
    second = backups.snapshot(s.path)
    assert first != second and first.read_bytes() == second.read_bytes() == s.path.read_bytes()
    assert not first.samefile(s.path)
    monkeypatch.setattr(backups, "_link", lambda a, b: (_ for _ in ()).throw(OSError(errno.EACCES, "denied")))
    with pytest.raises(PermissionError):
        backups.snapshot(s.path)  # not a "links unsupported" error: no copy, the caller fails cleanly


def test_rewrite_reads_the_scanned_inode(fstate, settings, monkeypatch):
    """Another writer replaces the transcript by path after occd scanned it: occd must not read the new file at
    the old offsets (JSONDecodeError before); it finds the file changed and exits 75 without touching it."""
    from occd.actions import common
    from occd.actions.edit import edit_session

    s = session(fstate)
    real = common.replace_with_backup

    swapped = b"\n" * 10 + s.path.read_bytes()

    def swap_then_replace(path, *a, **kw):
        tmp = path.with_name("swap.tmp")
        tmp.write_bytes(swapped)
        os.replace(tmp, path)  # a new inode at the name, longer, shifted
        return real(path, *a, **kw)

    monkeypatch.setattr("occd.actions.edit.replace_with_backup", swap_then_replace)
    with pytest.raises(BusyError):
        edit_session(settings, ref=s.session_id, force=True)
    assert s.path.read_bytes() == swapped
    assert not list(s.path.parent.glob("*.backup.*"))


def _occd(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "occd", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env or os.environ.copy())


@pytest.mark.slow
def test_concurrent_edits_never_destroy_the_original(fstate):
    """Several `occd edit` at once on one session, repeated for RACE_SECONDS: each exits 0 or 75 (never 1: no
    JSONDecodeError from reading another's file), the first backup always holds the original bytes, and no two
    backups hold the same bytes (before: both processes took backup.1 and the loser copied over it)."""
    s = session(fstate, turns=60)
    original = s.path.read_bytes()
    deadline = time.monotonic() + RACE_SECONDS
    rounds = runs = 0
    while time.monotonic() < deadline or rounds < 2:
        for b in s.path.parent.glob("*.backup.*"):
            b.unlink()
        s.path.write_bytes(original)
        old = time.time() - 3600
        os.utime(s.path, (old, old))
        procs = [_occd("edit", s.session_id, "--strip-tools=aggressive", "--force") for _ in range(4)]
        codes = [p.wait(timeout=120) for p in procs]
        errs = [p.stderr.read().decode() for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        runs += len(procs)
        rounds += 1
        assert set(codes) <= {0, 75}, (codes, errs)
        assert 0 in codes, errs
        bks = sorted(s.path.parent.glob("*.backup.*.jsonl"), key=lambda p: int(p.name.split(".")[-2]))
        assert bks and bks[0].read_bytes() == original, "the original is lost"
        assert s.path.read_bytes() != original
        assert len({sha(b) for b in bks}) == len(bks), "two backups of the same bytes: one edit backed up twice"
    print(f"concurrent edits: {rounds} rounds, {runs} processes")


# ------------------------------------------------------------------------------------ 2. a run starts mid-write

def test_run_starting_during_the_rewrite_is_seen_before_the_rename(fstate, settings, monkeypatch):
    """OpenClaw takes the session's lock after occd's first check (while the temp file is written): the last
    look right before the rename must see it — exit 75, the original untouched, no backup left."""
    from occd.actions import backups
    from occd.actions.edit import edit_session

    s = session(fstate)
    real = backups.snapshot

    def run_starts(src, *a, **kw):
        fstate.lock_transcript(s.path)  # a live lock: this test process' pid and start time
        return real(src, *a, **kw)

    monkeypatch.setattr(backups, "snapshot", run_starts)
    before = sha(s.path)
    with pytest.raises(BusyError) as ei:
        edit_session(settings, ref=s.session_id, force=True)
    assert ei.value.exit_code == 75
    assert sha(s.path) == before
    assert not list(s.path.parent.glob("*.backup.*"))
    assert not list(s.path.parent.glob(".*occd-tmp"))


def _rot_state(fstate):
    s = fstate.add_session(KEY, turns=12, compactions=3, plain_every=2, seed=3)
    fstate.write_index(fstate.read_index() | {"agent:main:other": {"sessionId": "zzz", "n": 0}})
    return s


def _rotate(settings, **kw):
    from occd.rotation.rotate import rotate_session

    return rotate_session(settings, ref=KEY, force=True, **kw)


def test_rotation_write_right_before_the_switch_is_not_lost(fstate, settings, monkeypatch):
    """A line appended by path after the rotation's last check, before the index switch: exit 75, the session
    keeps every line under its name, the index still points to it, no new session left behind."""
    from occd.rotation.machine import FileRotation

    s = _rot_state(fstate)
    real = FileRotation._check_unchanged
    calls = {"n": 0}

    def check_then_append(self):
        real(self)
        calls["n"] += 1
        if calls["n"] == 3:  # the last look right before the switch
            with open(self.old_path, "a") as fh:
                fh.write(json.dumps({"type": "custom", "probe": 1}) + "\n")

    monkeypatch.setattr(FileRotation, "_check_unchanged", check_then_append)
    with pytest.raises(BusyError):
        _rotate(settings)
    idx = fstate.read_index()
    assert idx[KEY]["sessionId"] == s.session_id
    assert line_ids(s.path) == {1}
    assert [p.name for p in s.path.parent.glob("*.jsonl")] == [s.path.name]


def test_rotation_appender_after_the_rename_goes_back_with_every_line(fstate, settings, monkeypatch):
    """A writer appends by path after occd took the old name away (a new headerless file appears there): the
    rotation puts the old file back with those lines after its own, and exits 75."""
    from occd.rotation import machine

    s = _rot_state(fstate)
    real_rename = os.rename

    def rename_then_append(a, b, *x, **k):
        real_rename(a, b, *x, **k)
        if str(b).endswith(".occd-rotating"):
            with open(a, "a") as fh:  # appendFileSync on the old name
                fh.write(json.dumps({"type": "custom", "probe": 2}) + "\n")

    monkeypatch.setattr(machine.os, "rename", rename_then_append)
    n_before = len(s.path.read_bytes().splitlines())
    with pytest.raises(BusyError):
        _rotate(settings)
    assert fstate.read_index()[KEY]["sessionId"] == s.session_id
    lines = s.path.read_bytes().splitlines()
    assert len(lines) == n_before + 1 and json.loads(lines[-1])["probe"] == 2
    assert json.loads(lines[0])["id"] == s.session_id


def test_rotation_racing_an_appender_loses_no_line(fstate, settings):
    """An appender like OpenClaw's appendFileSync (open by path, O_APPEND, one line, close) with random pauses,
    against repeated rotations for RACE_SECONDS: every line written before the rotation returned is in the
    archive or in the session the index points to."""
    from occd.actions.archive import ARCHIVE_DIR

    deadline = time.monotonic() + RACE_SECONDS
    rounds = ok = busy = lines_total = 0
    rng = random.Random(15)
    while time.monotonic() < deadline or rounds < 3:
        s = _rot_state(fstate)
        written: list[tuple[int, float]] = []
        stop = threading.Event()

        def appender(path=s.path, base=rounds * 100000):
            i = 0
            while not stop.is_set():
                with open(path, "a") as fh:
                    fh.write(json.dumps({"type": "custom", "probe": base + i}) + "\n")
                written.append((base + i, time.monotonic()))
                i += 1
                # bursts and pauses: some rotations see a quiet file, some are hit in every step
                time.sleep(rng.choice([0.0005, 0.002, 0.01, 0.03, 0.15, 0.4]))

        th = threading.Thread(target=appender)
        th.start()
        time.sleep(rng.random() * 0.02)
        try:
            _rotate(settings)
            ok += 1
        except BusyError:
            busy += 1
        returned = time.monotonic()
        stop.set()
        th.join()
        rounds += 1
        idx = fstate.read_index()
        cur = Path(idx[KEY]["sessionFile"]) if "sessionFile" in idx[KEY] else s.path.parent / f"{idx[KEY]['sessionId']}.jsonl"
        found = line_ids(cur)
        for a in (s.path.parent / ARCHIVE_DIR).glob("*.jsonl"):
            found |= line_ids(a)
        due = {i for i, t in written if t < returned}
        lines_total += len(due)
        where = {str(p.relative_to(s.path.parent)): sorted(line_ids(p) & (due - found))
                 for p in s.path.parent.rglob("*") if p.is_file()}
        assert due <= found, f"lost {sorted(due - found)[:5]} (round {rounds}): {where}"
        # next round: a fresh session under the key
        for p in s.path.parent.iterdir():
            if p.is_file():
                p.unlink()
        arch = s.path.parent / ARCHIVE_DIR
        if arch.exists():
            for p in arch.iterdir():
                p.unlink()
    print(f"rotation vs appender: {rounds} rounds ({ok} rotated, {busy} deferred), {lines_total} lines, 0 lost")


# ------------------------------------------------------------------------------------ 4. lock-less index writer

def test_index_writer_racing_rotations_loses_no_update(fstate, settings):
    """A writer doing what OpenClaw 2026.7.x does to sessions.json (no lock file: read, change one entry, write a
    temp file and rename it over) increments a counter in another entry, as fast as it can, while rotations
    run: every increment survives (none overwritten by occd), and every rotation that returned ok left the
    key on its new session."""
    from occd.actions.archive import ARCHIVE_DIR

    s = _rot_state(fstate)
    idx_path = fstate.index_path()
    stop = threading.Event()
    done = {"n": 0}
    rng = random.Random(4)

    def writer():
        while not stop.is_set():
            data = json.loads(idx_path.read_text())
            time.sleep(rng.choice([0, 0.001, 0.003]))  # OpenClaw's mutation, maintenance, prompt blobs
            data["agent:main:other"]["n"] = data["agent:main:other"]["n"] + 1
            tmp = idx_path.with_name(f"sessions.json.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=2))
            os.replace(tmp, idx_path)
            done["n"] += 1
            time.sleep(rng.choice([0.001, 0.005, 0.02]))

    th = threading.Thread(target=writer)
    th.start()
    deadline = time.monotonic() + RACE_SECONDS
    rotated = tries = 0
    try:
        while time.monotonic() < deadline or tries < 3:
            tries += 1
            before = fstate.read_index()[KEY]["sessionId"]
            try:
                res = _rotate(settings)
            except BusyError:
                continue
            rotated += 1
            assert res["newSessionId"] != before
            time.sleep(0.05)
            # the switch stayed (a stale writer image would have put the old id back)
            assert fstate.read_index()[KEY]["sessionId"] == res["newSessionId"]
            for p in (s.path.parent / ARCHIVE_DIR).glob("*"):
                p.unlink()
    finally:
        stop.set()
        th.join()
    final = fstate.read_index()
    assert final["agent:main:other"]["n"] == done["n"], "an index update of the other writer was lost"
    assert rotated >= 1
    print(f"index writer vs rotation: {tries} rotations ({rotated} done), {done['n']} writer updates, 0 lost")


# ------------------------------------------------------------------------------------ 9. stale temp files

def test_stale_temp_files_of_crashed_edits_are_cleaned(fstate, settings):
    from occd.actions.edit import edit_session

    s = session(fstate)
    d = s.path.parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = d / f".{s.path.name}.{dead.pid}.abcd1234.occd-tmp"
    stale_legacy = d / f".{s.path.name}.x1y2z3.occd-tmp"
    live = d / f".{s.path.name}.{os.getpid()}.efgh5678.occd-tmp"  # a live owner: kept
    fresh = d / f".{s.path.name}.{dead.pid}.ijkl9012.occd-tmp"    # too young: kept
    for p in (stale, stale_legacy, live, fresh):
        p.write_bytes(b"x" * 1000)
    old = time.time() - 3600
    for p in (stale, stale_legacy, live):
        os.utime(p, (old, old))
    from occd.transcript.rewrite import clean_stale_temps

    removed = clean_stale_temps(d, max_age=1800)
    assert set(removed) == {stale, stale_legacy}
    assert live.exists() and fresh.exists()
    edit_session(settings, ref=s.session_id, force=True)  # the edit path cleans too (nothing old is left)


def test_crash_after_the_old_name_was_taken_then_resume(fstate, settings):
    """SIGKILL right after the old transcript was renamed to its hidden name (index already switched): the key
    points to the valid new session, the archive holds every old byte, and the resume finishes the rotation."""
    from occd.actions.archive import ARCHIVE_DIR
    from occd.ledger import Ledger
    from occd.rotation.recovery import resume_all
    from occd.transcript import check_invariants

    s = _rot_state(fstate)
    old_bytes = s.path.read_bytes()
    p = subprocess.run([sys.executable, "-m", "occd", "rotate", KEY, "--force"], capture_output=True, text=True,
                       env={**os.environ, "OCCD_CRASH_AT": "OLD_NAME_TAKEN"}, timeout=120)
    assert p.returncode == -9, p.stderr
    e = fstate.read_index()[KEY]
    assert e["sessionId"] != s.session_id and check_invariants(Path(e["sessionFile"])) == []
    assert (s.path.parent / ARCHIVE_DIR / s.path.name).read_bytes() == old_bytes
    with Ledger.open() as led:
        res = resume_all(settings, led, state_dir=fstate.state_dir)
        assert res["resumed"] == 1, res
        assert led.rotations()[0]["state"] == "COOLDOWN"
    assert not s.path.exists() and not list(s.path.parent.glob(".*occd-rotating"))
    assert (s.path.parent / ARCHIVE_DIR / s.path.name).read_bytes() == old_bytes


def test_maintain_job_cleans_stale_temp_files(fstate):
    from occd.config import load_settings
    from occd.jobs import JobContext
    from occd.jobs.maintain import run
    from occd.ledger import Ledger

    s = session(fstate)
    stale = s.path.parent / f".{s.path.name}.x1y2z3.occd-tmp"
    stale.write_bytes(b"x" * 1000)
    old = time.time() - 7200
    os.utime(stale, (old, old))
    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(fstate.state_dir)}), ledger=led,
                         state_dir=fstate.state_dir)
        assert run(ctx)["staleTempFiles"] == 1
    assert not stale.exists() and s.path.exists()


OC_WRITER = """
const [,, dist, storePath, n] = process.argv;
const api = await import(dist + "/extensionAPI.js");
let done = 0;
for (let i = 0; i < Number(n); i++) {
  await api.updateSessionStore(storePath, (store) => {
    const e = store["agent:main:other"] || {sessionId: "zzz", n: 0};
    e.n = (e.n || 0) + 1;
    store["agent:main:other"] = e;
  }, {skipMaintenance: true});
  done++;
  if (done === 1) console.log("started");
  await new Promise(r => setTimeout(r, Math.random() * 15));
}
console.log(JSON.stringify({done}));
"""


@pytest.mark.e2e
@pytest.mark.parametrize("version", ["2026.7.1", "2026.7.35"])
def test_real_openclaw_index_writer_racing_rotations(fstate, settings, tmp_path, version):
    """OpenClaw's own session-store writer (updateSessionStore from the release's dist: no lock file, an
    in-process queue, a stat-keyed cache, temp file + rename) increments a counter while occd rotates: no
    OpenClaw update is lost and every finished rotation stays switched."""
    from e2e_harness import OC_CACHE, OpenClawHome, require_e2e

    require_e2e()
    with OpenClawHome(version, tmp_path / "oc") as oc:
        dist = Path(OC_CACHE) / f"oc-{version}" / "node_modules" / "openclaw" / "dist"
        script = tmp_path / "writer.mjs"
        script.write_text(OC_WRITER)
        _rot_state(fstate)
        idx = fstate.index_path()
        p = subprocess.Popen(["node", str(script), str(dist), str(idx), "150"], env=oc.env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        try:
            assert p.stdout.readline().strip() == "started"
            rotated = tries = 0
            deadline = time.monotonic() + 120
            while p.poll() is None and time.monotonic() < deadline:
                tries += 1
                before = fstate.read_index()[KEY]["sessionId"]
                try:
                    res = _rotate(settings)
                except BusyError:
                    continue
                rotated += 1
                assert res["newSessionId"] != before
                last = res["newSessionId"]
            out = p.communicate(timeout=120)[0]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        done = json.loads(out.strip().splitlines()[-1])["done"]
        final = fstate.read_index()
        assert done == 150 and final["agent:main:other"]["n"] == 150, final["agent:main:other"]
        assert rotated >= 1 and final[KEY]["sessionId"] == last  # OpenClaw's stale image did not undo the switch
        print(f"OpenClaw {version} writer vs rotation: {tries} rotations ({rotated} done), {done} updates, 0 lost")


def test_rotation_archive_checked_while_openclaw_appends_is_busy_not_an_error(fstate, settings, monkeypatch):
    """OpenClaw appends between the archive's link and its check (the link is the same file: it grew): the
    rotation stops as for any write during it (BusyError, exit 75), not with 'archive not complete' (exit 1);
    the session keeps every line under its name and no temp file is left. (Seen once in a loaded CI run of
    test_rotation_racing_an_appender_loses_no_line.)"""
    import occd.transcript.archive as archive

    s = _rot_state(fstate)
    real = archive.verify_copy

    def append_then_check(tmp, *a, **kw):
        with open(s.path, "a") as fh:
            fh.write('{"type":"custom","customType":"t","data":{},"id":"ab12ab12","parentId":null,'
                     '"timestamp":"2026-11-27T10:00:00.000Z"}\n')
        return real(tmp, *a, **kw)

    monkeypatch.setattr(archive, "verify_copy", append_then_check)
    with pytest.raises(BusyError):
        _rotate(settings)
    assert "ab12ab12" in s.path.read_text()
    assert fstate.read_index()[KEY]["sessionId"] == s.session_id
    assert not list(s.path.parent.rglob("*.occd-tmp"))
