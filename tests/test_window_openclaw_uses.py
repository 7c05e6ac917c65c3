"""Issue 30.3: the window OpenClaw uses. Decisions use the budget OpenClaw recorded for the session's last turn
(contextBudgetStatus) where there is one, the catalog or the config only where there is none, never a catalog
(agents/<id>/agent/models.json) older than the openclaw.json it derives from; a figure that changed without a turn
(a config edit) is re-checked at the next turn before anything is rotated."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from occd.jobs import run_cycle
from occd.ledger import Ledger
from occd.openclaw import context_window
from test_daemon_jobs import ctx_for, state_with

KEY = "agent:main:main"


def test_openclaws_recorded_budget_wins_over_the_resolved_window_and_the_catalog():
    from occd.openclaw.figure import session_window, window_choice

    e = {"sessionId": "s1", "contextTokens": 48_000, "updatedAt": 2_000_000,
         "contextBudgetStatus": {"sessionId": "s1", "contextTokenBudget": 96_000, "promptBudgetBeforeReserve": 76_000}}
    assert window_choice(e, 48_000, config_mtime=1_000.0, session_id="s1") == (96_000, "openclaw")
    # recorded for another session (the key moved): not this session's record
    assert session_window(e, 48_000, 1_000.0, session_id="other") == 48_000
    # no record at all: the catalog's or the config's window
    assert window_choice({}, 64_000, 1_000.0, 200_000) == (64_000, "config")
    # the config edited after the last turn names another window: that one, marked as not confirmed by a turn
    assert window_choice(e, 128_000, config_mtime=3_000.0, session_id="s1") == (128_000, "config-edit")
    # ... the same window: nothing changed
    assert window_choice(e, 96_000, config_mtime=3_000.0, session_id="s1") == (96_000, "openclaw")


def _catalog(state: Path, window: int) -> Path:
    p = state / "agents" / "main" / "agent" / "models.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": window}]}}}))
    return p


def test_a_catalog_older_than_the_config_is_not_used(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 4}}, window=96_000)   # openclaw.json: 96k
    cat = _catalog(state, 48_000)
    cfg = state / "openclaw.json"
    t = time.time()
    os.utime(cat, (t - 600, t - 600))                                    # written before the config was edited
    os.utime(cfg, (t - 60, t - 60))
    kw = dict(agent="main", model="claude-opus-4-6", provider="anthropic")
    assert context_window(state, **kw) == 96_000
    with Ledger.open() as led:                                           # the daemon's figure: the same window
        run_cycle(ctx_for(state, led), ["scan"])
        (o,) = led.latest_observations()
        assert o["context_window"] == 96_000
    os.utime(cat, (t, t))                                                # OpenClaw regenerated it since
    assert context_window(state, **kw) == 48_000


def _index(state: Path) -> dict:
    return json.loads((state / "agents/main/sessions/sessions.json").read_text())


def _write(state: Path, idx: dict) -> None:
    (state / "agents/main/sessions/sessions.json").write_text(json.dumps(idx, indent=2))


def test_a_config_edit_without_a_turn_is_rechecked_at_the_next_turn_before_a_rotation(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 8, "compaction_count": 3}}, window=100_000)
    idx = _index(state)
    old_id = idx[KEY]["sessionId"]
    idx[KEY]["contextBudgetStatus"] = {"sessionId": old_id, "contextTokenBudget": 100_000}
    _write(state, idx)
    # the window is raised in the config after the session's last turn: no turn has used it yet
    cfg = state / "openclaw.json"
    cfg.write_text(json.dumps({"models": {"providers": {"anthropic": {"models": [
        {"id": "claude-opus-4-6", "contextWindow": 200_000}]}}}}))
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        out = run_cycle(ctx, ["scan", "rotate"])["rotate"][1]
        assert out["rotated"] == 0 and out["blocked"] == 1, out
        (a,) = led.history(kind="rotate")
        assert a["policy"] == "window_unconfirmed" and "next turn" in a["reason"]
        assert _index(state)[KEY]["sessionId"] == old_id
        # the next turn: OpenClaw records the budget it used with it; now the rotation goes ahead
        idx = _index(state)
        idx[KEY]["updatedAt"] = int((time.time() - 600) * 1000)
        idx[KEY]["contextBudgetStatus"] = {"sessionId": old_id, "contextTokenBudget": 200_000}
        _write(state, idx)
        out = run_cycle(ctx, ["scan", "rotate"])["rotate"][1]
        assert out["rotated"] == 1, out
        assert _index(state)[KEY]["sessionId"] != old_id
