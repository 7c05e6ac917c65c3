"""The daemon's rotate job: trigger, observe mode, cooldown, per-agent breaker, health/backoff, resume at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from occd.jobs import run_cycle
from occd.ledger import Ledger
from test_daemon_jobs import ctx_for, state_with

KEY = "agent:main:main"


def _index(state: Path) -> dict:
    return json.loads((state / "agents/main/sessions/sessions.json").read_text())


def _set_compactions(state: Path, key: str, n: int) -> None:
    p = state / "agents/main/sessions/sessions.json"
    idx = json.loads(p.read_text())
    idx[key]["compactionCount"] = n
    p.write_text(json.dumps(idx, indent=2))


def test_act_mode_rotates_then_cooldown_blocks(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 8, "compaction_count": 3}, "agent:main:calm": {"turns": 4}})
    old_id = _index(state)[KEY]["sessionId"]
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        ok, out = run_cycle(ctx, ["scan", "rotate"])["rotate"]
        assert ok and out["rotated"] == 1, out
        new = _index(state)[KEY]
        assert new["sessionId"] != old_id and new["compactionCount"] == 0
        a = led.history(kind="rotate")[0]
        assert a["trigger"] == "auto" and a["outcome"] == "ok" and a["policy"] == "rotate_at_compactions"
        # priced (issue 20): the prompt the model was being sent and the cost inputs are kept with the action
        before = a["before"] if isinstance(a["before"], dict) else json.loads(a["before"])
        assert before["promptTokens"] > 0 and before["cost"]["prices"]["input"] > 0, before
        from occd.policy.savings import summarize

        tot = summarize(led.history(kind="rotate"))["total"]
        assert tot["rotations"] == 1 and tot["unpriced"] == 0, tot
        # the session was quiet longer than the cache lives: the rewrite is free, the next prompt's write smaller
        assert tot["usdNet"] > 0 and tot["usdCacheWrites"] < 0, tot
        # the new session compacts 3 times at once: the cooldown (30 minutes) blocks the next rotation
        _set_compactions(state, KEY, 3)
        ok, out = run_cycle(ctx, ["scan", "rotate"])["rotate"]
        assert out["rotated"] == 0 and out["blocked"] == 1, out
        assert "cooldown" in led.history(kind="rotate")[0]["reason"]
        assert _index(state)[KEY]["sessionId"] == new["sessionId"]


def test_observe_mode_records_would_do(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 6, "compaction_count": 5}})
    before = _index(state)
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="observe")
        ok, out = run_cycle(ctx, ["scan", "rotate"])["rotate"]
        assert out["wouldDo"] == 1 and out["rotated"] == 0
        a = led.history(kind="rotate")[0]
        assert a["dry_run"] and "would rotate" in a["reason"]
        run_cycle(ctx, ["scan", "rotate"])
        assert len(led.history(kind="rotate")) == 1  # not recorded again within the hour
    assert _index(state) == before


def test_breaker_per_agent(isolated_env):
    state = state_with(isolated_env, {f"agent:main:s{i}": {"turns": 4, "seed": i + 1, "compaction_count": 3}
                                      for i in range(5)})
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        ok, out = run_cycle(ctx, ["scan", "rotate"])["rotate"]
        assert out["rotated"] == 3 and out["blocked"] == 2, out
        assert led.get_breaker("main", "rotate").state == "open"


def test_unhealthy_rotation_backs_off_the_seed_budget(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 8, "compaction_count": 3}})
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act", rotation={"min_minutes": 0, "min_compactions": 1})
        run_cycle(ctx, ["scan", "rotate"])
        r1 = led.rotations()[0]
        assert r1["seed_budget_percent"] == 15
        # the new session compacts after 2 turns: the seed was too big
        p = Path(_index(state)[KEY]["sessionFile"])
        last = orjson.loads(p.read_bytes().splitlines()[-1])["id"]
        with open(p, "ab") as fh:
            parent = last
            for i in range(2):
                for role, eid in (("user", f"cafe{i:04d}"), ("assistant", f"beef{i:04d}")):
                    content = f"turn {i}" if role == "user" else [{"type": "text", "text": "ok"}]
                    fh.write(orjson.dumps({"type": "message", "id": eid, "parentId": parent, "timestamp": "t",
                                           "message": {"role": role, "content": content, "timestamp": 1}}) + b"\n")
                    parent = eid
            fh.write(orjson.dumps({"type": "compaction", "id": "c0mpac70", "parentId": parent, "timestamp": "t",
                                   "summary": "s", "firstKeptEntryId": parent, "tokensBefore": 1}) + b"\n")
        old = time.time() - 3600
        os.utime(p, (old, old))
        _set_compactions(state, KEY, 3)
        run_cycle(ctx, ["scan", "rotate"])
        rows = led.rotations()
        assert led.rotation_get(r1["id"])["health"] == "unhealthy"
        assert len(rows) == 2 and rows[0]["seed_budget_percent"] == 10


def test_resume_at_start(isolated_env):
    state = state_with(isolated_env, {KEY: {"turns": 6, "compaction_count": 3}})
    env = {**os.environ, "OCCD_CRASH_AT": "NEW_WRITTEN", "OCCD_STATE_DIR": str(state)}
    p = subprocess.run([sys.executable, "-m", "occd", "rotate", KEY, "--force"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == -9, p.stderr
    with Ledger.open() as led:
        assert led.rotations()[0]["state"] == "ARCHIVED"
        ctx = ctx_for(state, led, mode="observe")
        ok, out = run_cycle(ctx, ["scan", "rotate"])["rotate"]
        assert ok and out["resumed"] == 1, out
        assert led.rotations()[0]["state"] == "COOLDOWN"
        assert _index(state)[KEY]["sessionId"] == led.rotations()[0]["new_session_id"]
