"""Issue 29, point 3: a neighbour cannot starve a session. The debounce is per session: another agent writing
every 0.2 s under its run lock, or a storm of events, never holds back the wake for a run that ended elsewhere."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from occd.runtime import watch
from occd.runtime.debounce import MAX_KEYS, Debouncer, key_of


def wait_for(pred, timeout=15.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


# ---- pure: events + now -> which keys are due --------------------------------------------------------------

def test_a_busy_neighbour_does_not_push_back_another_sessions_wake():
    d = Debouncer(2.0)
    a, b = "/st/agents/a/sessions/s1.jsonl", "/st/agents/b/sessions/s9.jsonl"
    d.note(0.0, a)
    t = 0.0
    while t < 10.0:  # agent b writes every 0.2 s, for ten seconds
        t = round(t + 0.2, 1)
        d.note(t, b)
        if t < 2.0:
            assert d.due(t) == [], t
        if t == 2.0:
            assert d.due(t) == [a]  # a quiet for settle: due, whatever b does
    assert d.take(10.0) == [(a, 0.0)]
    assert d.due(10.0) == [] and d.wait_for(10.0) == 2.0  # b's own key waits for b's own quiet
    assert d.take(12.0) == [(b, 10.0)]


def test_a_transcript_and_its_lock_are_one_session_and_the_queue_is_bounded():
    assert key_of("/s/x.jsonl.lock") == key_of("/s/x.jsonl") == "/s/x.jsonl"
    assert key_of("/s/sessions.json") == "/s/sessions.json"
    d = Debouncer(1.0, max_keys=100)
    for i in range(50_000):  # a storm: 50k events on 50k distinct files in one minute
        d.note(i * 60 / 50_000, f"/st/agents/storm/sessions/f{i}.jsonl")
    assert len(d) <= 100 and d.folded > 0
    assert "/st/agents/storm/sessions" in d.pending  # folded into the folder's key
    d.note(60.0, "/st/agents/other/sessions/s.jsonl")  # a new folder's key: the oldest key makes room
    assert len(d) <= 100 and "/st/agents/other/sessions" in d.pending
    assert {k for k, _ in d.take(61.5)} >= {"/st/agents/storm/sessions", "/st/agents/other/sessions"}


def test_due_keys_are_a_prefix_in_order_of_their_last_event():
    d = Debouncer(1.0)
    d.note(0.0, "a")
    d.note(0.5, "b")
    d.note(0.9, "a")  # a moves behind b
    assert d.due(1.6) == ["b"] and d.wait_for(1.6) == 0.0
    assert d.due(2.0) == ["b", "a"]


# ---- a real watchdog observer ---------------------------------------------------------------------------------

def _agent(state: Path, name: str) -> Path:
    sdir = state / "agents" / name / "sessions"
    sdir.mkdir(parents=True)
    return sdir


def _lock(sdir: Path, sid: str) -> Path:
    p = sdir / f"{sid}.jsonl.lock"
    p.write_text(json.dumps({"pid": os.getpid(), "createdAt": "2026-11-27T00:00:00.000Z"}))
    return p


def _busy(sdir: Path, stop: threading.Event, every: float = 0.2) -> None:
    """A neighbour: a run that holds its lock and writes a line every `every` seconds."""
    path = sdir / "busy.jsonl"
    lock = _lock(sdir, "busy")
    try:
        while not stop.is_set():
            with open(path, "a") as fh:
                fh.write('{"type":"message"}\n')
            stop.wait(every)
    finally:
        lock.unlink()


def _storm(sdir: Path, stop: threading.Event, per_second: int = 850) -> None:
    """A storm: ~50k file events a minute on many files in the neighbour's folder."""
    i = 0
    while not stop.is_set():
        t0 = time.monotonic()
        for _ in range(per_second // 10):
            with open(sdir / f"storm{i % 500}.jsonl", "a") as fh:
                fh.write("x\n")
            i += 1
        stop.wait(max(0.0, 0.1 - (time.monotonic() - t0)))


def _run_end_wake_latency(tmp_path, neighbour, settle=1.0) -> tuple[float, watch.Watcher]:
    state = tmp_path / ".openclaw"
    quiet, busy = _agent(state, "quiet"), _agent(state, "busy")
    wakes: list[float] = []
    ends: list[tuple[float, list[float]]] = []
    w = watch.Watcher(state, lambda r: wakes.append(time.monotonic()), settle=settle,
                      run_ends=lambda times: ends.append((time.monotonic(), times)))
    assert w.start()[0] == "events"
    stop = threading.Event()
    t = threading.Thread(target=neighbour, args=(busy, stop), daemon=True)
    t.start()
    try:
        time.sleep(1.5)
        lock = _lock(quiet, "s1")
        with open(quiet / "s1.jsonl", "a") as fh:
            fh.write('{"type":"message"}\n')
        time.sleep(0.5)
        ended = time.monotonic()
        lock.unlink()  # the run ends
        ended_wall = time.time()

        def woken():  # a wake whose run ends include this one (the latency the daemon records)
            return next((at for at, times in ends if any(abs(e - ended_wall) < 1.0 for e in times)), None)

        assert wait_for(lambda: woken() is not None, timeout=settle + 5), ("no wake for the run that ended", ends[-3:])
        took = woken() - ended
        assert len(w.deb) <= MAX_KEYS
    finally:
        stop.set()
        t.join(5)
        w.stop()
    return took, w


def test_a_neighbour_writing_under_its_lock_does_not_hold_back_a_wake(tmp_path):
    settle = 1.0
    took, w = _run_end_wake_latency(tmp_path, _busy, settle)
    assert settle - 0.1 <= took < settle + 2.0, took


def test_a_storm_of_events_next_door_does_not_hold_back_a_wake(tmp_path):
    settle = 1.0
    t0 = time.process_time()
    took, w = _run_end_wake_latency(tmp_path, _storm, settle)
    assert settle - 0.1 <= took < settle + 2.0, took
    assert w.events > 500  # the storm was seen, and coalesced
    assert time.process_time() - t0 < 30  # bounded: the writer thread, watchdog and the watcher together


def test_the_daemon_strips_on_time_beside_a_busy_neighbour(isolated_env):
    """The daemon on its defaults (act mode only): another agent writes every 0.2 s under its run lock the whole
    time; the run that pushes `main` past OpenClaw's trigger is still stripped within settle + 2 s of its end
    (on main before issue 29 the global debounce waited for the 300 s safety-net scan)."""
    from occd.ledger import Ledger
    from simrun import BUDGET, SimAgent
    from test_watch import _daemon, _start, _stop

    agent = SimAgent(isolated_env, turns=10)
    busy = _agent(agent.state, "busy")
    stop = threading.Event()
    neighbour = threading.Thread(target=_busy, args=(busy, stop), daemon=True)
    with Ledger.open() as led:
        d = _daemon(agent.state)
        t = _start(d, led)
        neighbour.start()
        try:
            assert d.watch_mode[0] == "events", d.watch_mode
            settle = max(d.settings.daemon.settle_seconds, d.settings.idle_seconds)
            agent.start_run()
            for _ in range(9):
                agent.append_turn()
                time.sleep(0.2)
            assert agent.predicted() + 2 * 1500 >= BUDGET
            ended = agent.end_run()
            assert wait_for(lambda: any(a["outcome"] == "ok" for a in led.history(kind="strip")), timeout=30)
            (a,) = [a for a in led.history(kind="strip") if a["outcome"] == "ok"]
            took = a["ts"] - ended
            assert neighbour.is_alive()  # the neighbour wrote under its lock the whole time
        finally:
            stop.set()
            neighbour.join(5)
            _stop(d, t)
    print(f"run end -> strip beside a busy neighbour: {took:.2f}s (settle {settle}s)")
    assert took < settle + 2.0, (took, settle)


def test_a_live_lock_vetoes_its_own_session_and_its_agents_index_only(tmp_path):
    state = tmp_path / ".openclaw"
    a, b = _agent(state, "a"), _agent(state, "b")
    _lock(a, "busy")  # agent a runs session busy
    (a / "busy.jsonl").write_text("{}\n")
    wakes, ends = [], []
    w = watch.Watcher(state, wakes.append, settle=1.0, run_ends=ends.append)
    w._wake([(str(a / "busy.jsonl"), 0.0), (str(a / "sessions.json"), 0.0)])
    assert wakes == []  # the run goes on: its release will wake
    w._wake([(str(a / "done.jsonl"), 0.0)])  # another session of the same agent ended: not vetoed by busy's lock
    w._wake([(str(b / "sessions.json"), 0.0)])  # another agent's index: not vetoed by agent a's lock
    # an index write wakes, but only a transcript counts as a run's end (the latency histogram: one per run)
    assert len(wakes) == 2 and [len(e) for e in ends] == [1]
    w._wake([(str(b / "s1.jsonl"), 0.0), (str(b / "sessions.json"), 0.0)])  # a run of b ended and its index moved
    assert len(wakes) == 3 and [len(e) for e in ends] == [1, 1]


def test_wake_cycles_are_spaced_in_a_storm_of_settling_sessions():
    """Thousands of files written once each settle one after another: the daemon's wake cycles do not run back to
    back, at most one per max(gap, the last cycle's duration); a request is still served within one gap."""
    from occd.runtime.wake import WakeRunner

    starts, ends = [], []

    def cycle():
        starts.append(time.monotonic())
        time.sleep(0.3 if len(starts) == 2 else 0.01)
        ends.append(time.monotonic())

    w = WakeRunner(cycle, min_gap=0.5).start()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:
            w.request()
            time.sleep(0.02)
        assert wait_for(lambda: len(ends) == len(starts), timeout=3)
        assert 3 <= len(starts) <= 7, len(starts)
        gaps = [b - a for a, b in zip(ends, starts[1:])]
        assert all(g >= 0.45 for g in gaps), gaps
        n = len(starts)
        time.sleep(0.6)
        asked = time.monotonic()
        w.request()
        assert wait_for(lambda: len(starts) > n, timeout=2) and starts[n] - asked < 0.2
    finally:
        w.stop()
