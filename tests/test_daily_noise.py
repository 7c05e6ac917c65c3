"""Issue 32 §4: the daemon's log says what an operator must know once, not every wake: a new OpenClaw session
whose transcript appears seconds after its index entry is not a WARNING (and not "resolved" later); "no rotation:
a fresh session would be over the target" is INFO once per session state, DEBUG while it lasts."""

from __future__ import annotations

import json
import logging
import time

from occd.jobs import run_cycle
from occd.ledger import Ledger
from tests.test_daemon_jobs import ctx_for, state_with


def _records(caplog, level, text):
    return [r for r in caplog.records if r.levelno == level and text in r.getMessage()]


def test_new_session_without_its_transcript_yet_is_not_a_warning(isolated_env, caplog):
    state = state_with(isolated_env, {"agent:main:main": {"turns": 6}})
    sdir = state / "agents/main/sessions"
    idx = json.loads((sdir / "sessions.json").read_text())
    born = sdir / "0198c1f0-aaaa-4bbb-8ccc-000000000001.jsonl"
    old = sdir / "0198c1f0-aaaa-4bbb-8ccc-000000000002.jsonl"
    idx["agent:main:new"] = {"sessionId": born.stem, "sessionFile": str(born), "updatedAt": int(time.time() * 1000)}
    idx["agent:main:gone"] = {"sessionId": old.stem, "sessionFile": str(old),
                              "updatedAt": int((time.time() - 86400) * 1000)}
    (sdir / "sessions.json").write_text(json.dumps(idx))
    caplog.set_level(logging.DEBUG, logger="occd")
    with Ledger.open() as led:
        ctx = ctx_for(state, led)
        run_cycle(ctx, ["scan"])
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert not any("agent:main:new" in m for m in warned), warned
        assert any("agent:main:gone" in m and "is missing" in m for m in warned), warned  # a real loss still warns
        # the transcript appears with the first reply: nothing "resolved" about the new session
        born.write_text(next(sdir.glob("*.jsonl")).read_text())
        caplog.clear()
        run_cycle(ctx, ["scan"])
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and "agent:main:new" in r.getMessage()]


def test_fresh_session_over_the_target_is_said_once(isolated_env, caplog):
    from tests.test_small_window_spiral import _state
    from tests.test_budget_jobs import _ctx

    state, _path = _state(isolated_env)
    idx_path = state / "agents/main/sessions/sessions.json"
    idx = json.loads(idx_path.read_text())
    for entry in idx.values():  # its 4 compactions are recent: the rotate job counts them (history is not a to-do list)
        entry["compactionCheckpoints"] = [{"reason": "threshold", "createdAt": int((time.time() - 600 * i) * 1000)}
                                          for i in range(1, 5)]
    idx_path.write_text(json.dumps(idx))
    caplog.set_level(logging.DEBUG, logger="occd")
    with Ledger.open() as led:
        ctx = _ctx(state, led, mode="act")
        for _ in range(3):
            run_cycle(ctx, ["scan", "apply", "rotate"])
    text = "no rotation: a fresh session"
    assert len(_records(caplog, logging.INFO, text)) == 1, [r.getMessage() for r in caplog.records if text in r.getMessage()]
    assert _records(caplog, logging.DEBUG, text)
