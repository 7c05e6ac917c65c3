"""Issue 21 §2, lean view: the plugin records each assemble() call (run here by node, the real plugin code);
occd compares the turns OpenClaw stored with them. A session with the lean view on whose new turns bypassed
assemble() is named in `occd status`, fails `status --check` and `doctor`, and is recorded in the ledger."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd import lean
from occd.cli.main import cli
from occd.lean.check import judge, stored_turns
from occd.jobs import run_cycle
from occd.ledger import Ledger
from test_lean import fake_openclaw  # noqa: F401 - fixture

REPO = Path(__file__).resolve().parent.parent
KEY = "agent:main:main"
NODE = shutil.which("node")


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def test_judge_matches_calls_to_turns():
    turns = [{"userAt": 100.0, "replyAt": 105.0}, {"userAt": 200.0, "replyAt": 210.0}, {"userAt": 300.0, "replyAt": 301.0}]
    calls = [{"at": 100_500}, {"at": 300_200}]
    j = judge(turns, calls, since=50)
    assert (j["judged"], j["bypassed"], j["lastBypassAt"], j["until"]) == (3, 1, 210.0, 301.0)
    assert judge(turns, calls, since=250)["judged"] == 1 and judge(turns, calls, since=250)["bypassed"] == 0
    # turns in quick succession: one call cannot vouch for two turns
    quick = [{"userAt": 100.0, "replyAt": 100.2}, {"userAt": 100.3, "replyAt": 100.5}]
    assert judge(quick, [{"at": 100_100}], since=0)["bypassed"] == 1
    assert judge(quick, [{"at": 100_100}, {"at": 100_400}], since=0)["bypassed"] == 0
    # only the new turn is counted, but the call the first one took stays taken
    j = judge(quick, [{"at": 100_100}], since=0, new_after=100.2)
    assert (j["judged"], j["bypassed"]) == (1, 1)
    # a call that failed inside assemble() passed the history unchanged: not lean
    j = judge(turns[:1], [{"at": 100_500, "error": True}], since=50)
    assert j["bypassed"] == 1 and j["errors"] == 1
    # the plugin keeps 20 calls: older turns are not judged against a record it no longer has
    many = [{"at": (1000 + i) * 1000} for i in range(20)]
    assert judge(turns + [{"userAt": 1000.0, "replyAt": 1000.5}], many, since=0)["judged"] == 1


def test_stored_turns_skips_occds_own_file_era_seed():
    from occd.rotation.seed import ACK, SEED_MARK

    def m(role, text, t):
        return orjson.dumps({"type": "message", "id": f"x{t}", "timestamp": _iso(t),
                             "message": {"role": role, "content": [{"type": "text", "text": text}]}})
    lines = [m("user", SEED_MARK + " abc", 10), m("assistant", ACK, 11), m("user", "q", 20), m("assistant", "a", 21),
             m("user", "pending", 30)]
    (t,) = stored_turns(lines, lambda u, r: SEED_MARK in u and r == ACK)
    assert len(stored_turns(lines)) == 2
    assert abs(t["userAt"] - 20) < 0.01 and abs(t["replyAt"] - 21) < 0.01


def _assemble_with_the_plugin(session_id: str) -> None:
    """One assemble() of the real plugin, writing its stats where occd reads them."""
    script = ("const m = await import(process.env.PLUGIN);"
              "const e = m.createEngine({policyPath: process.env.POLICY, statsPath: process.env.STATS});"
              "const msgs = [{role: 'user', content: [{type: 'text', text: 'q'}], timestamp: 1}];"
              "await e.assemble({sessionId: process.env.SID, sessionKey: process.env.KEY, messages: msgs});")
    env = {**os.environ, "PLUGIN": str(REPO / "occd/lean/plugin/index.js"), "POLICY": str(lean.policy_path()),
           "STATS": str(lean.stats_path()), "SID": session_id, "KEY": KEY}
    p = subprocess.run([NODE, "--input-type=module", "-e", script], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _turn(path: Path, n: int, through_lean: bool, sid: str) -> None:
    leaf = orjson.loads(path.read_bytes().splitlines()[-1])["id"]
    t_user = time.time()
    u = {"type": "message", "id": f"lu{n:06d}", "parentId": leaf, "timestamp": _iso(t_user),
         "message": {"role": "user", "content": [{"type": "text", "text": f"question {n}"}], "timestamp": int(t_user * 1000)}}
    with open(path, "ab") as fh:
        fh.write(orjson.dumps(u) + b"\n")
    if through_lean:
        _assemble_with_the_plugin(sid)
    t_reply = time.time() + 0.01
    a = {"type": "message", "id": f"la{n:06d}", "parentId": u["id"], "timestamp": _iso(t_reply),
         "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}], "stopReason": "stop",
                     "timestamp": int(t_reply * 1000), "usage": {"input": 10, "output": 2, "totalTokens": 12}}}
    with open(path, "ab") as fh:
        fh.write(orjson.dumps(a) + b"\n")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_turns_that_bypass_assemble_are_named_and_fail_until_turns_go_through_again(fake_openclaw, isolated_env):  # noqa: F811
    from test_jobs import BIG, ctx_for, make_state

    state = make_state(isolated_env, {KEY: {**BIG, "seed": 1}}, window=100_000)
    lean.enable(None, state, yes=True)
    idx = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    sid, path = idx[KEY]["sessionId"], Path(idx[KEY]["sessionFile"])
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        assert run_cycle(ctx, ["scan", "lean"])["lean"][1]["turnedOn"] == 1
        time.sleep(0.05)
        # a turn through the plugin: judged, fine
        _turn(path, 1, True, sid)
        res = run_cycle(ctx, ["scan", "verify"])["verify"][1]
        assert (res["leanJudged"], res["leanBypassed"]) == (1, 0)
        assert led.open_problems() == []
        # the slot switched back behind occd's back: the next turn never reaches assemble()
        _turn(path, 2, False, sid)
        res = run_cycle(ctx, ["scan", "verify"])["verify"][1]
        assert (res["leanJudged"], res["leanBypassed"]) == (1, 1)
        (p,) = led.open_problems()
        assert p["code"] == "LEAN_BYPASSED" and p["subject"] == f"lean:main/{KEY}" and p["session_id"] == sid
        (a,) = led.history(kind="lean-check")
        assert a["outcome"] == "failed"
    stats = lean.stats_path().read_text()
    assert "question" not in stats and "answer" not in stats  # counts only
    env = {"OPENCLAW_STATE_DIR": str(state)}
    r = CliRunner().invoke(cli, ["status", "--check"], env=env)
    assert r.exit_code == 1 and "LEAN_BYPASSED" not in r.stderr and f"lean:main/{KEY}" in r.stderr
    r = CliRunner().invoke(cli, ["status"], env=env)
    assert f"PROBLEM lean:main/{KEY}" in r.stdout and "did not go through the lean view" in r.stdout
    out = json.loads(CliRunner().invoke(cli, ["status", "--json"], env=env).stdout)
    assert "did not go through" in out["lean"]["sessions"][KEY]["bypassed"]
    r = CliRunner().invoke(cli, ["doctor", "--json"], env=env)
    assert r.exit_code == 1
    (d,) = [x for x in json.loads(r.stdout)["checks"] if x["name"] == "problems"]
    assert d["status"] == "fail" and "lean:main/" in d["detail"]
    # the lean view is back: the next turn goes through assemble() again and the problem closes
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        time.sleep(0.6)  # a later turn, not one in the same instant as the bypassed one
        _turn(path, 3, True, sid)
        res = run_cycle(ctx, ["scan", "verify"])["verify"][1]
        assert (res["leanJudged"], res["leanBypassed"]) == (1, 0)
        assert led.open_problems() == []
    r = CliRunner().invoke(cli, ["status", "--check"], env=env)
    assert f"lean:main/{KEY}" not in r.stderr
