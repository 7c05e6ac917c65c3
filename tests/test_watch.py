"""Issue 19: the daemon wakes on what OpenClaw writes and strips when a run ends, on its defaults."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from occd.runtime import watch
from occd.config import load_settings
from occd.runtime.daemon import Daemon
from occd.runtime.statusfile import read_status
from occd.ledger import Ledger
from simrun import BUDGET, SimAgent


def wait_for(pred, timeout=15.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


# ---- pure parts ----------------------------------------------------------------------------------------------

def test_debouncer_waits_for_quiet():
    d = watch.Debouncer(2.0)
    assert d.wait_for(100.0) is None and not d.due(100.0)
    d.note(100.0, "/s/a.jsonl")
    d.note(101.0, "/s/a.jsonl")
    assert not d.due(102.5) and d.wait_for(102.5) == pytest.approx(0.5)
    assert d.due(103.0) == ["/s/a.jsonl"]
    assert d.take(103.0) == [("/s/a.jsonl", 101.0)]
    assert not d.due(200.0)


def test_interesting_files():
    for p in ("/s/a.jsonl", "/s/a.jsonl.lock", "/s/sessions.json", "/a/openclaw-agent.sqlite-wal"):
        assert watch.interesting(p), p
    for p in ("/s/.a.jsonl.123.tmp", "/s/a.backup.1.jsonl", "/s/notes.txt", "/s/.sessions.json.tmp"):
        assert not watch.interesting(p), p
    assert watch.interesting("/lean/stats.json", frozenset({"/lean/stats.json"}))


def test_wake_runner_coalesces_requests():
    runs = []
    gate = threading.Event()

    def cycle():
        runs.append(time.monotonic())
        gate.wait(2)

    w = watch.WakeRunner(cycle).start()
    try:
        for _ in range(5):
            w.request()
        assert wait_for(lambda: len(runs) == 1)
        for _ in range(5):  # asked while the cycle runs: exactly one more afterwards
            w.request()
        gate.set()
        assert wait_for(lambda: len(runs) == 2)
        time.sleep(0.3)
        assert len(runs) == 2
        w.request(time.time() + 0.5)  # a due time: not before it
        time.sleep(0.2)
        assert len(runs) == 2
        assert wait_for(lambda: len(runs) == 3, timeout=3)
    finally:
        w.stop()


# ---- the watcher on a real folder ----------------------------------------------------------------------------

def test_watcher_wakes_when_the_run_ends_not_while_it_runs(isolated_env):
    agent = SimAgent(isolated_env, turns=2)
    wakes = []
    w = watch.Watcher(agent.state, lambda r: wakes.append(time.monotonic()), settle=0.5)
    assert w.start()[0] == "events"
    try:
        agent.start_run()
        agent.append_turn()
        time.sleep(1.5)
        agent.append_turn()
        time.sleep(1.5)
        assert wakes == []          # the lock is held by a live pid: no wake-up mid-run
        ended = time.monotonic()
        agent.end_run()
        assert wait_for(lambda: len(wakes) == 1, timeout=5)
        assert 0.4 <= wakes[0] - ended < 3.0
        time.sleep(1.0)
        assert len(wakes) == 1      # one burst, one wake-up
    finally:
        w.stop()


def test_watcher_falls_back_to_polling_with_the_reason(isolated_env, monkeypatch):
    agent = SimAgent(isolated_env, turns=1)
    from watchdog.observers import Observer

    def refuse(self, *a, **k):
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(Observer, "schedule", refuse)
    w = watch.Watcher(agent.state, lambda r: None)
    mode, reason = w.start()
    w.stop()
    assert mode == "polling" and "inotify watch limit reached" in reason


# ---- the daemon, with its defaults -------------------------------------------------------------------------

def _daemon(state):
    def loader():
        return load_settings({"state_dir": str(state), "policy": {"mode": "act"}})  # no other setting
    return Daemon(loader)


def _start(d, led):
    t = threading.Thread(target=d.run_forever, args=(led,), kwargs={"install_signals": False}, daemon=True)
    t.start()
    assert wait_for(lambda: d.last_cycle is not None, timeout=30)
    return t


def _stop(d, t):
    d._on_signal(signal.SIGTERM, None)
    t.join(40)
    assert not t.is_alive()


def test_daemon_strips_within_seconds_of_the_run_end_on_its_defaults(isolated_env):
    """A run pushes the session to where OpenClaw would compact within two turns: the daemon, with no setting but
    act mode, strips it seconds after the run releases its lock — never while the lock is held — and keeps the
    newest 5 turns' tool results."""
    agent = SimAgent(isolated_env, turns=10)    # under the trigger: the start-up scan leaves it alone
    with Ledger.open() as led:
        d = _daemon(agent.state)
        t = _start(d, led)
        try:
            assert d.watch_mode[0] == "events", d.watch_mode
            assert (read_status() or {}).get("watch", {}).get("mode") == "events"
            assert led.history(kind="strip") == []
            agent.start_run()
            for _ in range(9):
                agent.append_turn()
                time.sleep(0.3)
            assert agent.predicted() + 2 * 1500 >= BUDGET   # urgent now
            time.sleep(3)
            assert [a for a in led.history(kind="strip") if a["outcome"] == "ok"] == []  # the lock is live
            ended = agent.end_run()
            assert wait_for(lambda: any(a["outcome"] == "ok" for a in led.history(kind="strip")), timeout=20)
            took = time.time() - ended
            (a,) = [a for a in led.history(kind="strip") if a["outcome"] == "ok"]
            assert a["before"].get("urgency") and a["before"]["keepTurnsWithTools"] >= 5
        finally:
            _stop(d, t)
    assert took < 10, took
    assert agent.tool_results() >= 5 and agent.predicted() <= BUDGET // 2


def test_watcher_follows_an_agent_created_after_it_started(isolated_env):
    state = isolated_env / ".openclaw"
    (state / "agents").mkdir(parents=True)
    wakes = []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3)
    assert w.start()[0] == "events"
    try:
        sdir = state / "agents" / "main" / "sessions"
        sdir.mkdir(parents=True)
        assert wait_for(lambda: str(sdir) in w.watched, timeout=5)
        n = len(wakes)
        (sdir / "s1.jsonl").write_text("{}\n")
        assert wait_for(lambda: len(wakes) > n, timeout=5)
        assert "folders" in w.reason and str(len(w.watched)) in w.reason
    finally:
        w.stop()


def test_doctor_and_status_say_which_mode(isolated_env, monkeypatch):
    from click.testing import CliRunner

    from occd.cli.main import cli
    from occd.health.doctor import DoctorContext, check_watch

    agent = SimAgent(isolated_env, turns=1)
    s = load_settings({"state_dir": str(agent.state)})
    r = check_watch(DoctorContext(now=time.time(), settings=s))
    assert r.status == "ok" and "would run in events mode" in r.detail
    off = load_settings({"state_dir": str(agent.state), "daemon": {"watch": False}})
    r = check_watch(DoctorContext(now=time.time(), settings=off))
    assert r.status == "warn" and "polling mode (daemon.watch is off)" in r.detail
    from occd.runtime.lock import InstanceLock

    with Ledger.open() as led, InstanceLock():  # a running daemon (`occd run` holds the lock): its own mode
        d = _daemon(agent.state)
        t = _start(d, led)
        try:
            r = check_watch(DoctorContext(now=time.time(), settings=s))
            assert r.status == "ok" and r.detail.startswith("the daemon runs in events mode (inotify")
            out = CliRunner().invoke(cli, ["status"], env={"OPENCLAW_STATE_DIR": str(agent.state)})
            assert "Wakes on: OpenClaw’s writes (events: inotify" in out.output, out.output
        finally:
            _stop(d, t)


def test_status_and_doctor_say_when_the_daemon_cannot_write_its_log(isolated_env, monkeypatch):
    """A full OCCD_HOME: the daemon goes on without its log file (logging_setup marks the handler degraded); the log
    cannot say so, so the heartbeat carries it to `status` and doctor's daemon-log check."""
    from click.testing import CliRunner

    from occd.cli.main import cli
    from occd.health.doctor import DoctorContext, check_daemon_log
    from occd.runtime import logging_setup
    from occd.runtime.lock import InstanceLock

    agent = SimAgent(isolated_env, turns=1)
    s = load_settings({"state_dir": str(agent.state)})
    assert check_daemon_log(DoctorContext(now=time.time(), settings=s)) is None  # no daemon: nothing to say
    with Ledger.open() as led, InstanceLock():
        d = _daemon(agent.state)
        t = _start(d, led)
        try:
            d.heartbeat()
            r = check_daemon_log(DoctorContext(now=time.time(), settings=s))
            assert r.status == "ok", r
            out = CliRunner().invoke(cli, ["status"], env={"OPENCLAW_STATE_DIR": str(agent.state)})
            assert "Log: not written" not in out.output
            monkeypatch.setattr(logging_setup, "degraded", lambda: "No space left on device")
            d.heartbeat()
            r = check_daemon_log(DoctorContext(now=time.time(), settings=s))
            assert r.status == "warn" and "No space left on device" in r.detail, r
            out = CliRunner().invoke(cli, ["status"], env={"OPENCLAW_STATE_DIR": str(agent.state)})
            assert "Log: not written (No space left on device)" in out.output, out.output
            js = CliRunner().invoke(cli, ["status", "--json"], env={"OPENCLAW_STATE_DIR": str(agent.state)})
            import json as _json
            assert _json.loads(js.output)["daemon"]["logDegraded"] == "No space left on device"
        finally:
            _stop(d, t)


def test_a_reader_opening_the_agent_database_does_not_wake_the_daemon(isolated_env):
    """OpenClaw's gateway opens the agent database read-write and closes it every few seconds without writing
    (inotify: a close-after-write with no change). That is no reason to look: the 2026.7.35 gateway loop woke the
    daemon every ~3 s, a full cycle and five log lines each time. A real write (the -wal grows) still wakes it."""
    import sqlite3

    state = isolated_env / ".openclaw"
    adir = state / "agents" / "main" / "agent"
    adir.mkdir(parents=True)
    db = adir / "openclaw-agent.sqlite"
    keep = sqlite3.connect(db)  # the gateway holds the database open (its -wal stays)
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("CREATE TABLE t (x)")
    keep.commit()
    wakes = []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.2)
    assert w.start()[0] == "events"
    try:
        assert wait_for(lambda: str(adir) in w.watched, timeout=5)
        time.sleep(0.6)
        n = len(wakes)
        for _ in range(5):  # opened for writing, read, closed: no change
            with open(db, "r+b") as f:
                f.read(100)
            con = sqlite3.connect(db)
            con.execute("SELECT * FROM t").fetchall()
            con.close()
            time.sleep(0.1)
        time.sleep(1.0)
        assert len(wakes) == n, wakes[n:]
        con = sqlite3.connect(db)
        con.execute("INSERT INTO t VALUES (1)")
        con.commit()
        assert wait_for(lambda: len(wakes) > n, timeout=5)
        con.close()
    finally:
        w.stop()
        keep.close()


def test_a_job_line_that_says_the_same_as_last_time_goes_to_debug(caplog):
    import logging

    from occd import jobs

    spec = jobs.JobSpec("demo-job", "occd.jobs.scan", jobs.AFTER_SCAN)
    caplog.set_level(logging.DEBUG, logger="occd.jobs")
    for summary in ({"changed": 0}, {"changed": 0}, {"changed": 1}, {"changed": 0}):
        jobs.run_job(None, spec, lambda ctx, s=summary: s)
    levels = [r.levelno for r in caplog.records if r.getMessage().startswith("demo-job:")]
    assert levels == [logging.INFO, logging.DEBUG, logging.INFO, logging.INFO], levels


def test_the_watcher_names_the_agents_that_changed(isolated_env):
    """Issue 29 point 1: before each wake the watcher says which agents' files settled (the wake's scan looks at
    those only); when it cannot say (a folder watched anew, removed or recreated) it says None: every agent."""
    state = isolated_env / ".openclaw"
    for a in ("main", "other"):
        (state / "agents" / a / "sessions").mkdir(parents=True)
    wakes, changed = [], []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.3, changed=changed.append)
    assert w.start()[0] == "events"
    try:
        (state / "agents" / "other" / "sessions" / "s1.jsonl").write_text("{}\n")
        assert wait_for(lambda: len(wakes) == 1, timeout=5)
        assert changed == [{"other"}]
        new = state / "agents" / "third" / "sessions"
        new.mkdir(parents=True)
        assert wait_for(lambda: None in changed, timeout=5)  # a folder watched anew
    finally:
        w.stop()


def _events_daemon(home, scan, led):
    """A daemon in events mode (a stand-in watcher) whose only job is `scan`, its context on `led`."""
    from occd.jobs import JobSpec, available_jobs
    from occd.runtime import daemon as dmod

    state = home / ".openclaw"
    (state / "agents").mkdir(parents=True, exist_ok=True)
    reg = (JobSpec("scan", "x", lambda s: 300, func=scan),)
    d = dmod.Daemon(lambda: load_settings({"state_dir": str(state)}), jobs=reg, env={})
    d.ctx = d.make_context(led)
    d._registered = {spec.name: (spec, fn) for spec, fn in available_jobs(reg, d.settings)}

    class Watching:
        def describe(self):
            return {"mode": "events", "reason": "test", "folders": []}

    d.watcher = Watching()
    return d


def test_a_wake_cycle_scans_what_changed_and_the_schedule_everything(isolated_env):
    """The daemon's side: a cycle the wake runner asks for passes the watcher's agents to the scan (ctx.changed);
    a scheduled cycle, or any cycle without a watcher (polling), passes None and takes the noted changes too."""
    from occd.runtime.wake import Changes

    got = []
    with Ledger.open() as led:
        d = _events_daemon(isolated_env, lambda ctx: got.append(ctx.changed) or {}, led)
        d.cycle(wake=True)       # the first cycle: nothing noted yet means every agent
        d.changes.note({"a"})
        d.changes.note({"b"})
        d.cycle(wake=True)
        d.cycle(wake=True)       # nothing since
        d.changes.note({"c"})
        d.cycle()                # the scheduled scan: everything, and "c" is covered by it
        d.cycle(wake=True)
        d.changes.note({"d"})
        d.changes.note(None)     # something the watcher cannot name
        d.cycle(wake=True)
        d.watcher = None         # polling
        d.changes.note({"e"})
        d.cycle(wake=True)
        assert d.ctx.changed is None
    assert got == [None, frozenset({"a", "b"}), frozenset(), None, frozenset(), None, None]
    c = Changes()
    assert c.take() is None and c.take() == frozenset()


def test_a_wake_whose_scan_fails_leaves_its_agents_for_the_next(isolated_env):
    """A scan that fails (a busy ledger, an error) has taken the agents the watcher named: the next wake's scan
    looks at them again, with what changed since."""
    got = []

    def scan(ctx):
        got.append(ctx.changed)
        if len(got) == 2:
            raise RuntimeError("the ledger is busy")
        return {}

    with Ledger.open() as led:
        d = _events_daemon(isolated_env, scan, led)
        d.cycle(wake=True)
        d.changes.note({"a"})
        d.cycle(wake=True)       # fails
        d.changes.note({"b"})
        d.cycle(wake=True)
        d.cycle(wake=True)
    assert got == [None, frozenset({"a"}), frozenset({"a", "b"}), frozenset()]


def test_a_key_dropped_from_a_full_debouncer_makes_the_wake_look_at_every_agent(isolated_env):
    """A storm past the debouncer's room drops the oldest key: the wake then cannot name every agent that changed,
    so it names none (None: every agent is looked at)."""
    from occd.runtime.debounce import Debouncer

    state = isolated_env / ".openclaw"
    changed = []
    w = watch.Watcher(state, lambda r: None, changed=changed.append)
    w.deb = Debouncer(0.1, max_keys=1)
    a = str(state / "agents" / "a" / "sessions" / "s.jsonl")
    b = str(state / "agents" / "b" / "sessions" / "s.jsonl")
    w.deb.note(0.0, a)
    w._wake(w.deb.take(1.0))
    w.deb.note(2.0, a)
    w.deb.note(2.0, b)  # no room: b folds into its folder's key, which has no room either: a is dropped
    w._wake(w.deb.take(3.0))
    assert changed == [{"a"}, None]
    assert w._agents_of([str(state / "openclaw.json")]) is None


def test_events_the_kernel_dropped_make_a_wake_that_looks_at_every_agent(isolated_env):
    """A lost inotify queue (IN_Q_OVERFLOW): watchdog rebuilds its watches and logs a warning but hands no event to
    any handler, so the run's end it carried would wait for the scheduled scan. The watcher hears watchdog's
    warning (LostEvents) and wakes, naming no agent (None: every agent is looked at), without counting a run's end.
    Driven through watchdog's own handler for the kernel's overflow event."""
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent

    state = isolated_env / ".openclaw"
    (state / "agents" / "main" / "sessions").mkdir(parents=True)
    wakes, changed, ends = [], [], []
    w = watch.Watcher(state, lambda r: wakes.append(r), settle=0.2, changed=changed.append, run_ends=ends.extend)
    assert w.start()[0] == "events"
    try:
        fd = getattr(w.observer, "_inotify_fd", None)
        assert fd is not None, "the watcher runs on watchdog's inotify observer here"
        time.sleep(0.3)
        assert wakes == []
        fd.handle_event(InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b""))
        assert wait_for(lambda: len(wakes) == 1, timeout=5)
        assert changed == [None] and ends == []
        # and it keeps watching: a write after the overflow wakes for its own agent
        (state / "agents" / "main" / "sessions" / "s1.jsonl").write_text("{}\n")
        assert wait_for(lambda: len(wakes) == 2, timeout=5)
        assert changed == [None, {"main"}] and len(ends) == 1
    finally:
        w.stop()
    import logging

    assert not logging.getLogger("watchdog.observers.inotify_c").filters  # detached with the watcher
