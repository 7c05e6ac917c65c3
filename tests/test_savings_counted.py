"""Issue 30.4: count only what was saved. A compaction counts as avoided only when the next turn ran without one;
money for avoided compactions only where the count is non-zero; a strip undone by `occd restore`, a rotation by
`occd rotate --undo`, saves nothing; `occd stats`, `occd status`, `occd history` and their --json agree."""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd.actions.verify_strip import next_turn
from occd.cli.main import cli
from occd.jobs import run_cycle
from occd.ledger import Ledger
from occd.policy import savings
from test_budget_jobs import _ctx, _state

SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
PRICED = {"promptTokens": 90_000, "prices": {"input": 3.0, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15.0},
          "warm": False, "turns": 5, "prefixKeptTokens": 20_000, "summaryTokens": 2000}


def run(*args):
    return CliRunner().invoke(cli, list(args))


def _data(r) -> dict:
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    return d.get("data", d)


def _line(o: dict) -> bytes:
    return orjson.dumps(o) + b"\n"


def _msg(i: str, role: str, usage: int | None = None) -> dict:
    m = {"role": role, "content": [{"type": "text", "text": f"{role} {i}"}]}
    if usage:
        m["usage"] = {"input": usage, "output": 5, "totalTokens": usage + 5}
    return {"type": "message", "id": i, "message": m}


def test_next_turn_sees_a_compaction_anywhere_in_the_turn(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(_line({"type": "session", "id": "x"}))
    off = p.stat().st_size
    assert next_turn(p, off) is None
    with open(p, "ab") as fh:
        fh.write(_line(_msg("u1", "user")) + _line(_msg("a1", "assistant", 10_000)))
    t = next_turn(p, off)
    assert t["reported"] == 10_005 and not t["compactedInTurn"] and not t["turnEnded"]
    with open(p, "ab") as fh:  # the run goes on: many tool calls, then OpenClaw compacts inside it
        fh.write(_line(_msg("a2", "assistant", 60_000)) + _line({"type": "compaction", "id": "c1", "summary": "s"}))
    assert next_turn(p, off)["compactedInTurn"]
    q = tmp_path / "q.jsonl"
    q.write_bytes(_line({"type": "session", "id": "x"}))
    with open(q, "ab") as fh:  # a clean turn, then the next one begins (and compacts: not this turn's)
        fh.write(_line(_msg("u1", "user")) + _line(_msg("a1", "assistant", 10_000)) + _line(_msg("u2", "user"))
                 + _line({"type": "compaction", "id": "c1", "summary": "s"}))
    t = next_turn(q, off)
    assert t["turnEnded"] and not t["compactedInTurn"]


def _append_turn(path: Path, *, compact: bool) -> None:
    """OpenClaw's next turn after the strip: a question, a tool loop's reply, (a compaction inside the run,) the
    answer."""
    leaf = orjson.loads(path.read_bytes().splitlines()[-1])["id"]
    lines = [_msg("nu1", "user"), _msg("na1", "assistant", 30_000)]
    if compact:
        lines.append({"type": "compaction", "id": "nc1", "summary": "S", "firstKeptEntryId": "nu1",
                      "tokensBefore": 41_000})
    lines.append(_msg("na2", "assistant", 31_000))
    for o in lines:
        o.update(parentId=leaf, timestamp=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))
        leaf = o["id"]
    with open(path, "ab") as fh:
        fh.write(b"".join(_line(o) for o in lines))


@pytest.mark.parametrize("compact", [False, True])
def test_a_strip_counts_a_compaction_avoided_only_when_its_next_turn_ran_without_one(isolated_env, compact):
    state, path = _state(isolated_env, turns=3)   # OpenClaw predicted to compact within the next turns
    with Ledger.open() as led:
        ctx = _ctx(state, led, mode="act")
        run_cycle(ctx, ["scan", "apply"])
        (a,) = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
        assert a["before"]["compactionAvoided"] and a["before"]["compactionCount"] == 0
        s = savings.summarize(led.history(limit=1000))["total"]
        assert s["compactionsAvoided"] == 0 and s["awaitingNextTurn"] == 1    # predicted is not saved
        assert s["usdCompactionsAvoided"] == 0
        _append_turn(path, compact=compact)
        run_cycle(ctx, ["scan", "verify"])
        (v,) = led.history(kind="verify-strip")
        assert v["before"]["actionId"] == a["id"] and v["after"]["nextTurnCompacted"] is compact
        s = savings.summarize(led.history(limit=1000))["total"]
    assert s["awaitingNextTurn"] == 0 and s["compactionsAvoided"] == (0 if compact else 1)
    assert (s["usdCompactionsAvoided"] > 0) is (not compact)          # money for a compaction only where one counts


def test_a_restored_strip_keeps_no_savings(isolated_env):
    state, path = _state(isolated_env, turns=3)
    with Ledger.open() as led:
        run_cycle(_ctx(state, led, mode="act"), ["scan", "apply"])
        (a,) = [x for x in led.history(kind="strip") if x["outcome"] == "ok"]
    before = _data(run("stats", "--json"))["total"]
    assert before["strips"] == 1 and before["tokensRemoved"] > 0
    r = run("restore", SID, "--force")
    assert r.exit_code == 0, r.output
    with Ledger.open() as led:
        (rs,) = led.history(kind="restore")
        assert rs["after"]["undoes"] == [a["id"]]
    after = _data(run("stats", "--json"))["total"]
    assert after["strips"] == 0 and after["undone"] == 1 and after["tokensRemoved"] == 0 and after["usdNet"] == 0
    (h,) = [x for x in _data(run("history", "--json"))["actions"] if x["kind"] == "strip"]
    assert h["saved"]["undone"] and h["saved"]["tokensRemoved"] == 0
    assert "undone" in run("stats").output


def _rotation(led, now, rid: int, *, session="old1") -> int:
    return led.record_action("rotate", "main", session, "agent:main:main", trigger="auto",
                             policy="rotate_at_compactions", reason="r", outcome="ok",
                             before={"promptTokens": 90_000, "cost": {**PRICED, "preventsCompaction": True}},
                             after={"seedTokens": 5_000, "rotationId": rid}, now=now)


def test_rotations_count_a_compaction_only_once_its_new_session_ran_a_clean_turn_and_undo_withdraws(isolated_env):
    now = time.time()
    with Ledger.open() as led:
        _rotation(led, now - 300, 1, session="old1")
        _rotation(led, now - 200, 2, session="old2")
        _rotation(led, now - 100, 3, session="old3")
        # the third is undone (`occd rotate --undo`): an older record without `undoes` is matched too
        led.record_action("rotate-undo", "main", "old3", "agent:main:main", outcome="ok",
                          after={"rotationId": 3}, now=now - 50)
        rows = led.history(limit=100)
    s = savings.summarize(rows)["total"]
    # nothing verified yet: no compaction counted, and no money for one (issue: 0 avoided yet $0.26 for them)
    assert s["rotations"] == 2 and s["undone"] == 1 and s["compactionsAvoided"] == 0
    assert s["usdCompactionsAvoided"] == 0 and s["awaitingNextTurn"] == 2
    s = savings.summarize(rows, rotation_turns={1: True, 2: False, 3: True})["total"]
    assert s["compactionsAvoided"] == 1 and s["usdCompactionsAvoided"] > 0 and s["awaitingNextTurn"] == 0
    one = savings.summarize(rows, rotation_turns={1: True})["sessions"]
    by = {r["sessionId"]: r for r in one}
    assert by["old1"]["usdCompactionsAvoided"] > 0 and by["old2"]["usdCompactionsAvoided"] == 0
    assert by["old3"]["usdNet"] == 0 and by["old3"]["undone"] == 1


def test_stats_status_and_history_add_up(isolated_env):
    """Every figure `occd stats --json` shows is the sum of `occd history --json`'s per-action `saved`, and
    `occd status --json`'s savings7d is the same sum; the text forms print the same numbers."""
    now = time.time()
    with Ledger.open() as led:
        led.record_observations([dict(agent="main", session_id=SID, session_key="agent:main:main", era="file",
                                      compaction_count=0, context_tokens=1000, tokens_source="usage",
                                      context_window=100_000, size=100)], now=now - 900)
        ids = []
        for i, (tb, ta) in enumerate([(90_000, 40_000), (80_000, 50_000), (70_000, 30_000), (60_000, 55_000)]):
            ids.append(led.record_action(
                "strip", "main", SID, "agent:main:main", trigger="auto", policy="strip_at_budget_percent",
                reason=f"strip {i}", outcome="ok", backup_path=f"/b/{i}",
                before={"tokens": tb, "compactionAvoided": True, "predictedPromptTokens": tb + 20_000,
                        "promptBudget": 108_000, "growthTokens": 8_000, "overheadTokens": 20_000,
                        "cost": {**PRICED, "promptTokens": tb + 20_000, "preventsCompaction": True}},
                after={"tokensBefore": tb, "tokensAfterEstimate": ta}, now=now - 800 + 100 * i))
        # strip 0: clean next turn; strip 1: compacted anyway; strip 2: undone by a restore; strip 3: waiting
        for aid, compacted in ((ids[0], False), (ids[1], True)):
            led.record_action("verify-strip", "main", SID, "agent:main:main", trigger="auto", outcome="ok",
                              before={"actionId": aid}, after={"nextTurnCompacted": compacted}, now=now - 300)
        led.record_action("restore", "main", SID, "agent:main:main", outcome="ok",
                          after={"restoredFrom": "/b/2", "undoes": [ids[2]]}, now=now - 250)
        _rotation(led, now - 200, 9, session="old9")
        led.record_action("lean-move", "main", SID, "agent:main:main", trigger="auto", outcome="ok",
                          before={"removedTokens": 12_000, "cost": {**PRICED, "preventsCompaction": True}}, now=now - 100)
    stats = _data(run("stats", "--json"))["total"]
    status = _data(run("status", "--json"))["savings7d"]
    hist = [a["saved"] for a in _data(run("history", "--json"))["actions"] if "saved" in a]
    assert len(hist) == 6
    assert stats == status
    assert stats["strips"] == 3 and stats["undone"] == 1 and stats["rotations"] == 1 and stats["leanMoves"] == 1
    assert stats["compactionsAvoided"] == 1 and stats["awaitingNextTurn"] == 2       # strip 3 and the rotation
    for k in ("tokensRemoved", "compactionsAvoided", "awaitingNextTurn", "emergencies"):
        assert stats[k] == sum(h[k] for h in hist), k
    for k in savings.MONEY:
        assert stats[k] == pytest.approx(sum(h[k] for h in hist), abs=1e-6), k
    assert sum(1 for h in hist if h["undone"]) == stats["undone"]
    # only the one counted compaction is paid: the lean move and the unverified ones add no compaction money
    one = [h for h in hist if h["compactionsAvoided"]]
    assert stats["usdCompactionsAvoided"] == pytest.approx(one[0]["usdCompactionsAvoided"], abs=1e-6)
    assert stats["usdCompactionsAvoided"] > 0
    text = run("stats").output
    assert f"{stats['tokensRemoved'] // 1000}k context tokens removed by 3 strips" in text.replace("\n", " ")
    assert "1 compaction avoided (2 more awaiting the next turn)" in " ".join(text.split())
    assert f"net ${stats['usdNet']:.2f}" in text
    st = " ".join(run("status").output.split())
    assert f"net ${stats['usdNet']:.2f}" in st and "1 undone" in st
