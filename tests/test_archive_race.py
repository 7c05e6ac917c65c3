"""Issue 24 item 3: the idle-archive and `rotate --undo` take a transcript's name away behind the same fence as
a rotation (occd.openclaw.fence): a run starting at any step (deterministic hooks at the exact step, and at
random against a real appender) loses no line and leaves no headerless file at the old name."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import orjson
import pytest

from occd.errors import BusyError, OccdError
from tests.statefactory import FileState

KEY = "agent:main:main"
RACE_SECONDS = float(os.environ.get("OCCD_RACE_SECONDS", "4"))


@pytest.fixture
def fstate(isolated_env):
    return FileState(Path(os.environ["OPENCLAW_STATE_DIR"]))


@pytest.fixture
def settings():
    from occd.config import load_settings

    return load_settings({"idle_seconds": 0})


def probes(p: Path) -> list[int]:
    out = []
    for raw in p.read_bytes().splitlines():
        try:
            o = orjson.loads(raw)
        except ValueError:
            continue
        if isinstance(o, dict) and isinstance(o.get("probe"), int):
            out.append(o["probe"])
    return out


def append(p: Path, n: int) -> None:
    with open(p, "a") as fh:  # appendFileSync: open by path, append, close
        fh.write(json.dumps({"type": "custom", "probe": n}) + "\n")


def leftovers(sdir: Path) -> list[str]:
    return sorted(p.name for p in sdir.iterdir() if p.name.startswith(".") and "occd" in p.name)


def _session(fstate):
    s = fstate.add_session(KEY, turns=12, compactions=1, plain_every=2, seed=3)
    fstate.write_index(fstate.read_index() | {"agent:main:other": {"sessionId": "zzz"}})
    return s


def _archive(settings):
    from occd.actions.archive import archive_session

    return archive_session(settings, ref=KEY, force=True)


def _assert_untouched(fstate, s, n_before: int, probe: int) -> None:
    assert fstate.read_index()[KEY]["sessionId"] == s.session_id
    lines = s.path.read_bytes().splitlines()
    assert len(lines) == n_before + 1 and probes(s.path) == [probe]
    assert json.loads(lines[0])["id"] == s.session_id  # the header stays first: no headerless file
    arch = s.path.parent / "archive"
    assert not arch.exists() or not any(arch.iterdir())
    assert leftovers(s.path.parent) == []


def test_archive_run_starting_right_after_the_link(fstate, settings, monkeypatch):
    """A run takes the lock and appends its reply right after the archive link: exit 75, nothing changed."""
    import occd.actions.archive as arch

    s = _session(fstate)
    n = len(s.path.read_bytes().splitlines())
    real = arch.archive_file

    def link_then_run(src, dst, sid):
        out = real(src, dst, sid)
        fstate.lock_transcript(s.path)
        append(s.path, 1)
        return out

    monkeypatch.setattr(arch, "archive_file", link_then_run)
    with pytest.raises(BusyError):
        _archive(settings)
    _assert_untouched(fstate, s, n, 1)


def test_archive_writer_right_after_the_index_drop(fstate, settings, monkeypatch):
    """A run that resolved the file before the key was dropped appends right after the drop (no lock seen)."""
    import occd.openclaw as oc

    s = _session(fstate)
    n = len(s.path.read_bytes().splitlines())
    real = oc.update_index
    calls = {"n": 0}

    def drop_then_append(*a, **k):
        out = real(*a, **k)
        calls["n"] += 1
        if calls["n"] == 1:
            append(s.path, 2)
        return out

    monkeypatch.setattr(oc, "update_index", drop_then_append)
    with pytest.raises(BusyError):
        _archive(settings)
    _assert_untouched(fstate, s, n, 2)


def test_archive_writer_right_after_the_name_was_taken(fstate, settings, monkeypatch):
    """The writer appends by path just after occd renamed the file away (a new headerless file appears): the file
    goes back under its name with that line after its own, the key comes back, exit 75."""
    s = _session(fstate)
    n = len(s.path.read_bytes().splitlines())
    real_rename = os.rename

    def rename_then_append(a, b, *x, **k):
        real_rename(a, b, *x, **k)
        if str(b).endswith(".occd-rotating"):
            append(Path(a), 3)

    monkeypatch.setattr(os, "rename", rename_then_append)
    with pytest.raises(BusyError):
        _archive(settings)
    _assert_untouched(fstate, s, n, 3)


def _race(fstate, run_once, make, target_of, rounds_min=4):
    """A writer against run_once(), started at a random instant, alternating two kinds:
    - an OpenClaw run: takes the transcript's lock, resolves the key in sessions.json (a key that is gone or
      names another session is a new session: not ours), appends a turn's lines by path, releases the lock;
    - a lock-less appender (open by path, append, close) writing a burst of lines.
    Every line written before run_once returned is in the file the index points to or in an archive, no other
    file holds one, and after a run no headerless file is left at the old name."""
    rng = random.Random(24)
    deadline = time.monotonic() + RACE_SECONDS
    rounds = done = busy = 0
    span = 0.2  # how long run_once takes: the writer starts at a random instant inside it
    while time.monotonic() < deadline or rounds < rounds_min:
        s, path = make()
        written: list[tuple[int, float]] = []
        as_run = rounds % 2 == 0

        def writer(base=rounds * 100000):
            time.sleep(rng.random() * span)
            lock = path.with_name(path.name + ".lock")
            if as_run:
                fstate.lock_transcript(path)
                e = fstate.read_index().get(KEY) or {}
                if e.get("sessionId") != path.stem:
                    lock.unlink()
                    return
            for i in range(rng.randint(1, 8)):
                append(path, base + i)
                written.append((base + i, time.monotonic()))
                time.sleep(rng.choice([0.0005, 0.002, 0.01, 0.03]))
            if as_run:
                lock.unlink()

        th = threading.Thread(target=writer)
        th.start()
        t0 = time.monotonic()
        try:
            run_once()
            done += 1
        except (BusyError, OccdError):
            busy += 1
        returned = time.monotonic()
        span = returned - t0
        th.join()
        rounds += 1
        due = {i for i, t in written if t < returned or as_run}
        sdir = path.parent
        kept = set(probes(target_of(s)) if target_of(s).exists() else [])
        for a in (sdir / "archive").glob("*.jsonl") if (sdir / "archive").exists() else []:
            kept |= set(probes(a))
        where = {str(p.relative_to(sdir)): sorted(set(probes(p)) & (due - kept))[:5]
                 for p in sdir.rglob("*") if p.is_file() and p.name != "sessions.json"}
        assert due <= kept, f"round {rounds}: lost {sorted(due - kept)[:5]}: {where} {as_run=}"
        for p in sdir.iterdir():
            if p.is_file() and p != target_of(s) and p.name != "sessions.json":
                assert not (set(probes(p)) & due), f"round {rounds}: lines in a stray file {p.name}"
        if as_run and path.exists() and path != target_of(s):
            raise AssertionError(f"round {rounds}: a headerless file was left at {path.name}")
        assert leftovers(sdir) == [], leftovers(sdir)
        for p in list(sdir.rglob("*")):
            if p.is_file():
                p.unlink()
    return rounds, done, busy


def test_archive_racing_an_appender_loses_no_line(fstate, settings):
    def make():
        s = _session(fstate)
        return s, s.path

    def target(s):
        e = fstate.read_index().get(KEY)
        return s.path if e else s.path.parent / "archive" / s.path.name

    rounds, done, busy = _race(fstate, lambda: _archive(settings), make, target)
    print(f"archive vs appender: {rounds} rounds ({done} archived, {busy} deferred), 0 lost")


# ------------------------------------------------------------------------------------------ rotate --undo

def _rotated(fstate, settings):
    from occd.rotation.rotate import rotate_session

    s = _session(fstate)
    res = rotate_session(settings, ref=KEY, force=True)
    return s, Path(res["newPath"])


def _undo(settings):
    from occd.rotation.rotate import undo_rotation

    return undo_rotation(settings, ref=KEY)


def test_undo_first_turn_right_after_the_switch_back(fstate, settings, monkeypatch):
    """The seeded session's first turn is appended right after the index went back to the old session: the
    undo stops (75), the key stays on the seeded session, which keeps its turn."""
    import occd.openclaw as oc

    s, new = _rotated(fstate, settings)
    before = new.read_bytes()
    real = oc.update_index
    calls = {"n": 0}

    def switch_then_append(*a, **k):
        out = real(*a, **k)
        calls["n"] += 1
        if calls["n"] == 1:
            append(new, 7)
        return out

    monkeypatch.setattr(oc, "update_index", switch_then_append)
    with pytest.raises(BusyError):
        _undo(settings)
    assert fstate.read_index()[KEY]["sessionId"] == new.stem
    assert new.read_bytes().startswith(before) and probes(new) == [7]
    assert (s.path.parent / "archive" / s.path.name).exists() and not s.path.exists()
    assert leftovers(s.path.parent) == []


def test_undo_first_turn_right_after_the_name_was_taken(fstate, settings, monkeypatch):
    s, new = _rotated(fstate, settings)
    before = new.read_bytes()
    real_rename = os.rename

    def rename_then_append(a, b, *x, **k):
        real_rename(a, b, *x, **k)
        if str(b).endswith(".occd-rotating"):
            append(Path(a), 8)

    monkeypatch.setattr(os, "rename", rename_then_append)
    real_replace = os.replace

    def replace_then_append(a, b, *x, **k):  # today's undo moves the seeded file with os.replace
        real_replace(a, b, *x, **k)
        if Path(a) == new:
            append(new, 8)

    monkeypatch.setattr(os, "replace", replace_then_append)
    with pytest.raises(BusyError):
        _undo(settings)
    assert fstate.read_index()[KEY]["sessionId"] == new.stem
    assert new.read_bytes().startswith(before) and probes(new) == [8]
    assert json.loads(new.read_bytes().splitlines()[0])["id"] == new.stem
    assert leftovers(s.path.parent) == []


def test_undo_racing_the_first_turn_loses_no_line(fstate, settings):
    made: dict = {}

    def make():
        s, new = _rotated(fstate, settings)
        made["s"], made["new"] = s, new
        return s, new

    def target(s):
        e = fstate.read_index()[KEY]
        return made["new"] if e["sessionId"] == made["new"].stem else s.path

    rounds, done, busy = _race(fstate, lambda: _undo(settings), make, target)
    print(f"undo vs first turn: {rounds} rounds ({done} undone, {busy} refused/deferred), 0 lost")
