"""Issue 29, point 4: the watcher heals and tells. A removed and recreated agents or state folder is watched again
within seconds; a folder that cannot be watched (inotify limits) is polled; status, doctor and status --json say
per agent whether it is watched or polled, and since when."""

from __future__ import annotations

import errno
import json
import shutil
import time

import pytest

from occd.runtime import watch
from occd.runtime.folders import POLLED, WATCHED


def wait_for(pred, timeout=10.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def _sessions(state, name):
    sdir = state / "agents" / name / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    return sdir


def _mode(w, path):
    f = w.folders.get(str(path))
    return f.mode if f is not None else None


def _wakes_on_write(w, wakes, sdir, timeout):
    n = len(wakes)
    with open(sdir / "s1.jsonl", "a") as fh:
        fh.write("{}\n")
    return wait_for(lambda: len(wakes) > n, timeout=timeout)


@pytest.mark.parametrize("remove", ["agents", "state"])
def test_a_removed_and_recreated_folder_is_watched_again(isolated_env, remove):
    state = isolated_env / ".openclaw"
    sdir = _sessions(state, "main")
    wakes = []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3)
    assert w.start()[0] == "events"
    try:
        assert _mode(w, sdir) == WATCHED
        shutil.rmtree(state / "agents" if remove == "agents" else state)
        assert wait_for(lambda: _mode(w, sdir) is None, timeout=5)
        # never "watched" (nor polled) for a folder that is gone
        assert wait_for(lambda: "main" not in (w.describe().get("agents") or {}), timeout=watch.TICK_S + 2)
        time.sleep(0.3)
        sdir.mkdir(parents=True)
        t0 = time.monotonic()
        assert wait_for(lambda: _mode(w, sdir) == WATCHED, timeout=watch.TICK_S + 3)
        assert time.monotonic() - t0 < watch.TICK_S + 3
        assert _wakes_on_write(w, wakes, sdir, timeout=5)
        assert w.describe()["agents"]["main"]["mode"] == WATCHED and w.mode == "events"
    finally:
        w.stop()


def _refuse(monkeypatch, part: str, code: int):
    """inotify's limits, simulated: scheduling a watch on a folder whose path contains `part` fails."""
    from watchdog.observers import Observer

    real = Observer.schedule

    def schedule(self, handler, path, *a, **k):
        if part in str(path):
            raise OSError(code, "inotify watch limit reached" if code == errno.ENOSPC else "Too many open files")
        return real(self, handler, path, *a, **k)

    monkeypatch.setattr(Observer, "schedule", schedule)


@pytest.mark.parametrize("code,name", [(errno.ENOSPC, "ENOSPC"), (errno.EMFILE, "EMFILE")])
def test_a_folder_that_cannot_be_watched_is_polled_and_still_wakes(isolated_env, monkeypatch, code, name):
    state = isolated_env / ".openclaw"
    _sessions(state, "main")
    full = _sessions(state, "full")
    _refuse(monkeypatch, "/agents/full", code)
    wakes = []
    before = time.time()
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3)
    mode, reason = w.start()
    try:
        assert mode == "events" and "1 polled" in reason and name in reason, reason
        d = w.describe()
        assert d["agents"]["main"]["mode"] == WATCHED
        assert d["agents"]["full"]["mode"] == POLLED and name in d["agents"]["full"]["reason"]
        assert before <= d["agents"]["full"]["since"] <= time.time()
        assert _wakes_on_write(w, wakes, full, timeout=watch.TICK_S + 2)  # polled: seen within a tick
    finally:
        w.stop()


def test_the_limit_reached_after_the_start_polls_the_new_agent(isolated_env, monkeypatch):
    state = isolated_env / ".openclaw"
    _sessions(state, "main")
    wakes = []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3)
    assert w.start()[0] == "events"
    try:
        _refuse(monkeypatch, "/agents/late", errno.ENOSPC)
        late = _sessions(state, "late")
        assert wait_for(lambda: _mode(w, late) == POLLED, timeout=5)
        assert "polled" in w.reason and w.describe()["agents"]["late"]["mode"] == POLLED
        assert _wakes_on_write(w, wakes, late, timeout=watch.TICK_S + 2)
        monkeypatch.undo()  # the limit raised again: watched at the next full sync
        w._next_full = 0
        assert wait_for(lambda: _mode(w, late) == WATCHED, timeout=watch.TICK_S + 2)
        assert w.describe()["agents"]["late"]["mode"] == WATCHED
    finally:
        w.stop()


def test_status_doctor_and_json_say_per_agent_watched_or_polled(isolated_env, monkeypatch):
    from click.testing import CliRunner

    from occd.cli.main import cli
    from occd.config import load_settings
    from occd.health.doctor import DoctorContext, check_watch
    from occd.ledger import Ledger
    from occd.runtime.lock import InstanceLock
    from occd.runtime.statusfile import read_status
    from simrun import SimAgent
    from test_watch import _daemon, _start, _stop

    agent = SimAgent(isolated_env, turns=1)
    _sessions(agent.state, "other")
    _refuse(monkeypatch, "/agents/main/", errno.ENOSPC)
    s = load_settings({"state_dir": str(agent.state)})
    env = {"OPENCLAW_STATE_DIR": str(agent.state)}
    with Ledger.open() as led, InstanceLock():
        d = _daemon(agent.state)
        t = _start(d, led)
        try:
            assert d.watch_mode[0] == "events"
            st = read_status()["watch"]
            assert st["agents"]["main"]["mode"] == POLLED and st["agents"]["other"]["mode"] == WATCHED
            out = CliRunner().invoke(cli, ["status"], env=env).output
            assert "1 polled" in out and "polled since" in out and "ENOSPC" in out, out
            js = json.loads(CliRunner().invoke(cli, ["status", "--json"], env=env).output)
            (main,) = [a for a in js["agents"] if a["id"] == "main"]
            assert main["watch"]["mode"] == POLLED and main["watch"]["since"].endswith("Z")
            assert {x["agent"]: x["mode"] for x in js["daemon"]["watch"]["agents"]} == {"main": POLLED,
                                                                                     "other": WATCHED}
            r = check_watch(DoctorContext(now=time.time(), settings=s))
            assert r.status == "warn" and "1 of 2 agents are polled" in r.detail and "main" in r.detail, r
        finally:
            _stop(d, t)


def test_a_folder_on_a_network_filesystem_is_polled(isolated_env, monkeypatch, tmp_path):
    from occd.runtime import folders

    info = tmp_path / "mountinfo"
    info.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                    "40 22 0:50 / /mnt/share\\040box rw,relatime shared:9 - nfs4 srv:/export rw,vers=4.2\n")
    table = folders.mounts(str(info))
    assert folders.remote_fs("/mnt/share box/agents/x", table) == "nfs4"
    assert folders.remote_fs("/home/u/.openclaw", table) is None
    assert folders.mounts(str(tmp_path / "none")) == []  # no /proc (macOS): nothing known, nothing polled
    state = isolated_env / ".openclaw"
    _sessions(state, "main")
    nfs = _sessions(state, "onnfs")
    monkeypatch.setattr(watch, "mounts", lambda: [(str(state / "agents" / "onnfs"), "nfs4"), ("/", "ext4")])
    wakes = []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3)
    assert w.start()[0] == "events"
    try:
        d = w.describe()["agents"]
        assert d["main"]["mode"] == WATCHED
        assert d["onnfs"]["mode"] == POLLED and "nfs4" in d["onnfs"]["reason"]
        assert _wakes_on_write(w, wakes, nfs, timeout=watch.TICK_S + 2)
    finally:
        w.stop()
