"""Issue 21 §2: did what occd did take effect? File era: after the next real turn, the figure OpenClaw reports
agrees with the strip's prediction within the stated tolerance; a large miss is recorded and shown by
`occd status SESSION`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.actions.verify_strip import TOLERANCE_RELATIVE, TOLERANCE_TOKENS, judge
from test_rotation import KEY, make_state


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def state(isolated_env):
    return make_state(Path(os.environ["OPENCLAW_STATE_DIR"]), turns=30, compactions=0)


def _strip(state) -> dict:
    r = run("edit", state.entry()["sessionId"], "--strip-tools=extreme", "--force")
    assert r.exit_code == 0, r.output
    from occd.ledger import Ledger

    with Ledger.open() as led:
        (a,) = led.history(kind="edit")
    return a


def _next_turn(path: Path, usage_total: int, text: str = "and now?") -> None:
    """OpenClaw's next real turn: a user message and the reply, appended with the reply's usage."""
    leaf = orjson.loads(path.read_bytes().splitlines()[-1])["id"]
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    u = {"type": "message", "id": "nextu001", "parentId": leaf, "timestamp": ts,
         "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}}
    a = {"type": "message", "id": "nexta001", "parentId": "nextu001", "timestamp": ts,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Here it is."}], "api": "anthropic-messages",
                     "provider": "anthropic", "model": "claude-opus-4-6", "stopReason": "stop", "timestamp": 2,
                     "usage": {"input": usage_total - 10, "output": 10, "cacheRead": 0, "cacheWrite": 0,
                               "totalTokens": usage_total,
                               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}}
    with open(path, "ab") as fh:
        fh.write(orjson.dumps(u) + b"\n" + orjson.dumps(a) + b"\n")


def test_judge_is_the_stated_tolerance():
    # predicted 10k after saving 7k; the turn added 1k: 25 % of (7k + 1k) + 2k = 4k either way
    j = judge(10_000, 1_000, 11_000 + 4_000, 7_000)
    assert j["agrees"] and j["tolerance"] == 4000 and j["expected"] == 11_000
    assert not judge(10_000, 1_000, 11_000 + 4001, 7_000)["agrees"]
    assert not judge(10_000, 1_000, 11_000 - 4001, 7_000)["agrees"]
    # the strip not seen at all: reported = the figure before + the turn = a miss of the whole saving
    assert not judge(10_000, 1_000, 17_000 + 1_000, 7_000)["agrees"]
    assert (TOLERANCE_RELATIVE, TOLERANCE_TOKENS) == (0.25, 2000)


def _cycle():
    r = run("run", "--once", "--json")
    assert r.exit_code == 0, r.output


def test_strip_whose_next_turn_agrees_is_recorded_ok(state):
    a = _strip(state)
    path = state.transcript()
    predicted = a["after"]["tokensAfterEstimate"]
    _next_turn(path, predicted + 40)
    _cycle()
    from occd.ledger import Ledger

    with Ledger.open() as led:
        (v,) = led.history(kind="verify-strip")
        assert v["outcome"] == "ok" and v["after"]["agrees"] and v["before"]["actionId"] == a["id"]
        assert led.open_problems() == []
    _cycle()  # verified once, not again
    with Ledger.open() as led:
        assert len(led.history(kind="verify-strip")) == 1


def test_strip_prediction_miss_is_recorded_and_shown_by_status_session(state):
    a = _strip(state)
    before, predicted = a["after"]["tokensBefore"], a["after"]["tokensAfterEstimate"]
    saved = before - predicted
    assert saved > 2 * TOLERANCE_TOKENS  # a strip OpenClaw ignored must show as a miss
    path = state.transcript()
    sid = state.entry()["sessionId"]
    # no turn yet: nothing to compare, nothing recorded
    _cycle()
    from occd.ledger import Ledger

    with Ledger.open() as led:
        assert led.history(kind="verify-strip") == []
    # OpenClaw reports the figure of before the strip: it never saw the stripped file
    _next_turn(path, before + 40)
    _cycle()
    with Ledger.open() as led:
        (v,) = led.history(kind="verify-strip")
        (p,) = led.open_problems()
    assert v["outcome"] == "failed" and not v["after"]["agrees"] and v["after"]["reported"] == before + 40
    assert p["code"] == "STRIP_PREDICTION_MISS" and p["severity"] == "warn" and p["session_id"] == sid
    r = run("status", sid)
    assert r.exit_code == 0 and "PROBLEM (STRIP_PREDICTION_MISS" in r.stdout and str(before + 40) in r.stdout
    out = json.loads(run("status", sid, "--json").stdout)
    (pj,) = out["problems"]
    assert pj["code"] == "STRIP_PREDICTION_MISS" and pj["details"]["predicted"] == predicted


# ---- issue 32 §1: a strip is compared with the next turn of the same file, or not at all --------------------------

def _verify_rows():
    from occd.ledger import Ledger

    with Ledger.open() as led:
        return led.history(kind="verify-strip"), led.open_problems()


def test_restore_with_no_turn_since_is_not_a_prediction_miss(state):
    """strip, restore (the old, bigger file is back), a cycle: no STRIP_PREDICTION_MISS, a skipped check that says
    why; a turn on the restored file later changes nothing."""
    sid = state.entry()["sessionId"]
    _strip(state)
    r = run("restore", sid, "--force")
    assert r.exit_code == 0, r.output
    _cycle()
    (v,), problems = _verify_rows()
    assert v["outcome"] == "skipped" and "replaced" in v["reason"] and problems == []
    _next_turn(state.transcript(), 150_000)
    _cycle()
    rows, problems = _verify_rows()
    assert len(rows) == 1 and problems == []
    r = run("status", sid)
    assert "STRIP_PREDICTION_MISS" not in r.stdout


def test_file_replaced_outside_occd_is_not_compared(state):
    """the stripped file swapped for another (a copy put back by hand): its bytes at the strip's end are not the
    stripped file's last line, so nothing is compared."""
    path = state.transcript()
    original = path.read_bytes()
    _strip(state)
    path.write_bytes(original)   # not through occd: no restore action in the ledger
    _next_turn(path, 150_000)
    _cycle()
    (v,), problems = _verify_rows()
    assert v["outcome"] == "skipped" and problems == []


def test_compaction_recorded_by_openclaw_after_the_strip_is_not_a_miss(state):
    """OpenClaw compacted after the strip (sessions.json's compactionCheckpoints) and the next reply reports the
    compacted figure: the check says it cannot compare instead of raising STRIP_PREDICTION_MISS."""
    a = _strip(state)
    sj = state.sessions / "sessions.json"
    data = json.loads(sj.read_text())
    entry = data[KEY]
    entry["compactionCount"] = entry.get("compactionCount", 0) + 1
    entry["compactionCheckpoints"] = [{"reason": "overflow-retry", "createdAt": int(time.time() * 1000),
                                       "tokensBefore": 120_000, "tokensAfter": 9_000}]
    sj.write_text(json.dumps(data))
    _next_turn(state.transcript(), 900)   # far below the prediction: the compacted context
    assert a["after"]["tokensAfterEstimate"] - 900 > 3 * TOLERANCE_TOKENS
    _cycle()
    (v,), problems = _verify_rows()
    assert v["outcome"] == "skipped" and "compacted" in v["reason"] and problems == []
