"""File-era store: tolerant index reading, listing, resolution, locked atomic index updates, transcript locks."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
import uuid

import pytest

from occd.errors import BusyError, OccdError
from occd.openclaw import FileStore, is_session_file, new_session_id, open_store, transcript_lock, update_index
from occd.openclaw.filestore import _resolve_file
from occd.openclaw.locks import IndexLock, proc_starttime, read_lock
from statefactory import FileState, write_lock


@pytest.fixture
def st(tmp_path):
    return FileState(tmp_path / ".openclaw")


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ------------------------------------------------------------------------------------------------ is_session_file

@pytest.mark.parametrize("name,ok", [
    ("0198f0a2-7c1e-7d2a-9b3c-4d5e6f708192.jsonl", True),
    ("abc123.jsonl", True),
    ("abc123-topic-42.jsonl", True),
    ("abc123.backup.3.jsonl", False),                                   # occd's backups
    ("abc123.jsonl.reset.2026-11-01T10-00-00.000Z", False),
    ("abc123.jsonl.deleted.2026-11-01T10-00-00.000Z", False),
    ("abc123.jsonl.bak.2026-11-01T10-00-00.000Z", False),
    ("abc123.jsonl.reset.2026-11-01T10-00-00.000Z.zst", False),
    ("abc123.jsonl.zst", False),
    ("abc123.jsonl.lock", False),
    ("abc123.jsonl.tmp", False),
    ("abc123.trajectory.jsonl", False),
    ("abc123.trajectory-path.json", False),
    ("abc123.checkpoint.0198f0a2-7c1e-7d2a-9b3c-4d5e6f708192.jsonl", False),  # compaction checkpoints
    ("sessions.json", False),
    (".hidden.jsonl", False),
    ("bad name.jsonl", False),
    ("archive/abc123.jsonl", False),                                    # occd's archive dir
    ("abc123.JSONL", False),
])
def test_is_session_file(name, ok):
    assert is_session_file(name) is ok


# ------------------------------------------------------------------------------------------------ reading

def test_list_newest_first_with_unindexed_and_missing(st):
    old = st.add_session("agent:main:old", turns=2, updated_at=time.time() - 7200)
    new = st.add_session("agent:main:new", turns=2, updated_at=time.time() - 60, session_file="relative")
    nofile = st.add_session("agent:main:nofile", turns=1, session_file="none")
    gone = st.add_session("agent:main:gone", turns=1)
    gone.path.unlink()
    stray = st.add_session(None, turns=1, mtime=time.time() - 10)          # on disk, not in the index
    sdir = st.sessions_dir()
    for junk in (f"{old.session_id}.backup.1.jsonl", f"{old.session_id}.trajectory.jsonl",
                 f"{old.session_id}.jsonl.lock", f"{new.session_id}.jsonl.reset.2026-11-01T10-00-00.000Z"):
        (sdir / junk).write_text("{}\n")
    (sdir / "archive").mkdir()
    (sdir / "archive" / "zzz.jsonl").write_text("{}\n")
    store = FileStore(st.state_dir, "main")
    got = store.sessions()
    ids = [s.session_id for s in got]
    assert ids == [stray.session_id, new.session_id, nofile.session_id, old.session_id]
    assert set(ids) == {old.session_id, new.session_id, nofile.session_id, stray.session_id}
    assert ids[-1] == old.session_id
    by_id = {s.session_id: s for s in got}
    assert by_id[stray.session_id].unindexed and by_id[stray.session_id].key is None
    assert by_id[new.session_id].path == sdir / new.path.name and by_id[new.session_id].size == new.path.stat().st_size
    assert by_id[old.session_id].entry["someFutureField"] == {"kept": True}
    assert any("agent:main:gone" in w and "missing" in w for w in store.warnings)
    assert [a.session_id for a in store.archived_sessions()] == ["zzz"]


def test_a_moved_state_lists_each_session_once(tmp_path):
    """A state copied elsewhere keeps absolute `sessionFile`s naming the old place (OpenClaw uses those as they
    are when they have the .../agents/<agent>/sessions/<file> shape): the copy's own file of the same name is
    not a second, unindexed session (every session was listed twice and observed in turns)."""
    import shutil

    a = FileState(tmp_path / "a" / ".openclaw")
    s1 = a.add_session("agent:main:one", turns=2)
    s2 = a.add_session("agent:main:two", turns=1)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    index = json.loads((tmp_path / "a" / ".openclaw" / "agents" / "main" / "sessions" / "sessions.json").read_text())
    assert all(os.path.isabs(e["sessionFile"]) for e in index.values()), index
    got = FileStore(tmp_path / "b" / ".openclaw", "main").sessions()
    assert sorted(i.session_id for i in got) == sorted([s1.session_id, s2.session_id])
    assert all(not i.unindexed and str(i.path).startswith(str(tmp_path / "a")) for i in got)


@pytest.mark.parametrize("content,needle", [
    (b"", "is empty"),
    (b'{"agent:main:main": {"sessionId": "ab', "not valid JSON"),
    (b"[1, 2, 3]", "not a JSON object"),
    (b"\xff\xfe garbage", "not valid JSON"),
])
def test_bad_index_gives_warning_and_transcripts_on_disk(st, content, needle):
    s = st.add_session(turns=1)
    st.index_path().write_bytes(content)
    store = FileStore(st.state_dir, "main")
    got = store.sessions()
    assert [i.session_id for i in got] == [s.session_id] and got[0].unindexed
    assert any(needle in w for w in store.warnings), store.warnings


def test_bad_entries_are_per_entry_warnings(st):
    s = st.add_session(turns=1)
    idx = st.read_index()
    idx["agent:main:weird"] = "not an object"
    idx["agent:main:noid"] = {"updatedAt": 1}
    st.write_index(idx)
    store = FileStore(st.state_dir, "main")
    assert [i.session_id for i in store.sessions()] == [s.session_id]
    assert len(store.warnings) == 2


def test_large_index_reads_fast(st):
    s = st.add_session(turns=1)
    idx = st.read_index()
    blob = "x" * 2000
    for i in range(7000):  # ~14 MB, the size users reported
        idx[f"agent:main:cron:{i}"] = {"sessionId": f"gone{i}", "skillsSnapshot": {"prompt": blob}}
    st.write_index(idx)
    assert st.index_path().stat().st_size > 14_000_000
    store = FileStore(st.state_dir, "main")
    t = time.perf_counter()
    got = store.sessions()
    assert time.perf_counter() - t < 2.0
    assert [i.session_id for i in got] == [s.session_id]
    assert len(store.warnings) == 7000


def test_session_file_resolution_as_openclaw(tmp_path):
    sdir = tmp_path / "state" / "agents" / "main" / "sessions"
    e = lambda sf: {"sessionFile": sf}  # noqa: E731
    assert _resolve_file(sdir, {}, "abc", "main") == sdir / "abc.jsonl"
    assert _resolve_file(sdir, e("abc-topic-1.jsonl"), "abc", "main") == sdir / "abc-topic-1.jsonl"
    assert _resolve_file(sdir, e(str(sdir / "x.jsonl")), "abc", "main") == sdir / "x.jsonl"
    moved = "/old/place/agents/main/sessions/abc.jsonl"   # a state written by another install: used as it is
    assert str(_resolve_file(sdir, e(moved), "abc", "main")) == moved
    assert _resolve_file(sdir, e("/old/place/agents/other/sessions/abc.jsonl"), "abc", "main") == sdir / "abc.jsonl"
    assert _resolve_file(sdir, e("../../escape.jsonl"), "abc", "main") == sdir / "abc.jsonl"
    assert _resolve_file(sdir, e("/etc/passwd"), "abc", "main") == sdir / "abc.jsonl"


# ------------------------------------------------------------------------------------------------ resolution

def test_resolve_exact_prefix_key_ambiguous_none(st):
    a = st.add_session("agent:main:main", session_id="abc11111-0000-7000-8000-000000000001", turns=1)
    st.add_session("agent:main:other", session_id="abc22222-0000-7000-8000-000000000002", turns=1)
    store = FileStore(st.state_dir, "main")
    assert store.resolve(a.session_id).session_id == a.session_id
    assert store.resolve("abc1").session_id == a.session_id
    assert store.resolve("ABC1").session_id == a.session_id
    assert store.resolve("agent:main:main").session_id == a.session_id
    with pytest.raises(OccdError) as ei:
        store.resolve("abc")
    assert ei.value.code == "AMBIGUOUS_SESSION" and ei.value.message == "Multiple sessions match 'abc'"
    assert "abc11111" in ei.value.hint and "abc22222" in ei.value.hint and "agent:main:other" in ei.value.hint
    with pytest.raises(OccdError) as ei:
        store.resolve("zzz")
    assert ei.value.code == "SESSION_NOT_FOUND" and "occd list" in ei.value.hint


def test_two_keys_one_transcript_is_one_session(st):
    a = st.add_session("agent:main:main", turns=1)
    idx = st.read_index()
    idx["agent:main:alias"] = dict(idx["agent:main:main"])
    st.write_index(idx)
    assert FileStore(st.state_dir, "main").resolve(a.session_id[:8]).session_id == a.session_id


# ------------------------------------------------------------------------------------------------ update_index

def test_update_index_atomic_mode_unknown_fields(st):
    s = st.add_session(turns=1)
    os.chmod(st.index_path(), 0o644)

    def change(d):
        d["agent:main:main"]["label"] = "renamed ✓"
        return d

    update_index(st.sessions_dir(), change)
    text = st.index_path().read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["agent:main:main"]["label"] == "renamed ✓" and "✓" in text        # UTF-8, not escaped
    assert data["agent:main:main"]["someFutureField"] == {"kept": True}
    assert text.startswith('{\n  "agent:main:main": {\n    "sessionId"')          # 2-space JSON
    assert stat.S_IMODE(st.index_path().stat().st_mode) == 0o600
    assert not (st.sessions_dir() / "sessions.json.lock").exists()
    assert [p.name for p in st.sessions_dir().iterdir() if p.name.endswith(".tmp")] == []
    assert s.session_id in text


def test_update_index_rereads_inside_the_lock(st):
    st.add_session(turns=1)
    seen = {}

    def change(d):
        seen.update(d)
        d["agent:main:new"] = {"sessionId": "n1"}

    # someone else writes between our decision and the update: fn sees their version
    idx = st.read_index()
    idx["agent:main:theirs"] = {"sessionId": "t1"}
    st.write_index(idx)
    update_index(st.sessions_dir(), change)
    assert "agent:main:theirs" in seen and set(st.read_index()) == {"agent:main:main", "agent:main:theirs",
                                                                    "agent:main:new"}


def test_update_index_refuses_to_overwrite_a_damaged_index(st):
    st.add_session(turns=1)
    st.index_path().write_text('{"agent:main:main": {')
    with pytest.raises(OccdError) as ei:
        update_index(st.sessions_dir(), lambda d: d)
    assert ei.value.code == "INDEX_DAMAGED"
    assert st.index_path().read_text() == '{"agent:main:main": {'


def test_update_index_missing_dir_is_clear(tmp_path):
    with pytest.raises(OccdError) as ei:
        update_index(tmp_path / "nope" / "sessions", lambda d: d)
    assert ei.value.code == "STATE_NOT_FOUND"


# ------------------------------------------------------------------------------------------------ locks

def test_index_lock_payload_and_release(st):
    path = st.index_path()
    with IndexLock(path) as lk:
        payload = json.loads(lk.path.read_text())
        assert payload["pid"] == os.getpid() and payload["starttime"] == proc_starttime(os.getpid())
        assert payload["startTime"] == payload["starttime"] and payload["createdAt"].endswith("Z")
        assert stat.S_IMODE(lk.path.stat().st_mode) == 0o600
    assert not lk.path.exists()


@pytest.mark.parametrize("kind", ["dead", "reused", "old", "empty-old"])
def test_stale_index_locks_are_taken(st, kind):
    lock = st.sessions_dir() / "sessions.json.lock"
    if kind == "dead":
        write_lock(lock, dead_pid(), starttime=12345)
    elif kind == "reused":
        write_lock(lock, os.getpid(), starttime=proc_starttime(os.getpid()) + 1)
    elif kind == "old":
        write_lock(lock, os.getpid(), created_at=time.time() - 31, spelling="startTime")
    else:
        lock.write_text("")
        os.utime(lock, (time.time() - 60, time.time() - 60))
    t = time.monotonic()
    with IndexLock(st.index_path(), timeout=5):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert time.monotonic() - t < 1.0


def test_live_index_lock_waits_then_busy(st):
    lock = st.sessions_dir() / "sessions.json.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        write_lock(lock, holder.pid)
        t = time.monotonic()
        with pytest.raises(BusyError) as ei:
            with IndexLock(st.index_path(), timeout=0.5):
                pass
        assert 0.5 <= time.monotonic() - t < 2.0
        assert ei.value.exit_code == 75 and str(holder.pid) in ei.value.message
        assert lock.exists()  # never removed from under a live holder
        # released while we wait: we get it
        threading.Timer(0.3, lock.unlink).start()
        with IndexLock(st.index_path(), timeout=3):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_transcript_lock_states(st):
    s = st.add_session(turns=1)
    assert transcript_lock(s.path) is None
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        st.lock_transcript(s.path, holder.pid, extra={"maxHoldMs": 300000})
        info = transcript_lock(s.path)
        assert info.alive and info.reason == "live" and info.pid == holder.pid
        store = open_store(st.state_dir, "main")
        assert store.is_running(store.resolve(s.session_id))
        # an old lock of a live run is still a run (runs take minutes)
        st.lock_transcript(s.path, holder.pid, created_at=time.time() - 3600)
        assert transcript_lock(s.path).alive
        st.lock_transcript(s.path, holder.pid, starttime=proc_starttime(holder.pid) + 7)
        assert transcript_lock(s.path).reason == "pid-reused" and not store.is_running(store.resolve(s.session_id))
    finally:
        holder.kill()
        holder.wait()
    st.lock_transcript(s.path, dead_pid())
    info = transcript_lock(s.path)
    assert not info.alive and info.reason == "dead-pid"
    assert info.to_json()["alive"] is False


def test_read_lock_garbage(tmp_path):
    p = tmp_path / "x.lock"
    p.write_text("not json")
    assert read_lock(p).alive  # a lock being written right now counts as held
    os.utime(p, (time.time() - 60, time.time() - 60))
    assert not read_lock(p).alive


# ------------------------------------------------------------------------------------------------ ids

def test_new_session_id_is_uuid7_and_ordered():
    ids = [new_session_id() for _ in range(50)]
    for i in ids:
        u = uuid.UUID(i)
        assert u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == i
    t_ms = int(ids[0].replace("-", "")[:12], 16)
    assert abs(t_ms - time.time() * 1000) < 5000
    assert len(set(ids)) == 50 and ids[0][:8] <= ids[-1][:8]
    assert is_session_file(ids[0] + ".jsonl")
