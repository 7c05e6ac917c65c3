"""Savings (tokens, compactions avoided, money), `occd stats`, and `occd status` showing the running daemon's
mode and the sessions in an emergency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from click.testing import CliRunner

from occd.cli.main import cli
from occd.ledger import Ledger
from occd.policy import savings

SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_price_from_openclaw_config_then_litellm_map():
    cfg = {"models": {"providers": {"fake": {"models": [{"id": "m1", "cost": {"input": 3, "output": 15}}]}}}}
    assert savings.price_from_openclaw(cfg, "m1") == 3.0
    assert savings.price_from_openclaw(cfg, "fake/m1") == 3.0
    assert savings.price_from_openclaw(cfg, "other") is None
    cache = {"savings.litellm": {"gpt-x": {"input_cost_per_token": 2.5e-6}}}
    assert savings.input_price_per_mtok(cfg, "gpt-x", cache) == 2.5
    assert savings.input_price_per_mtok(cfg, "m1", cache) == 3.0      # OpenClaw's config first
    assert savings.input_price_per_mtok(None, "nothing-known", cache) is None


def test_litellm_cost_map_is_read_without_importing_litellm():
    code = ("import sys; from occd.policy import savings as s; p = s.litellm_cost_file(); "
            "print(p is not None and p.endswith('.json'), 'litellm' in sys.modules, "
            "s.price_from_litellm('gpt-4o-mini') is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.split()
    assert out == ["True", "False", "True"]


def _strip(led, now, *, size_before, size_after, price=None, avoided=False, emergency=None, dry_run=False,
           outcome="ok", trigger="auto", session=SID):
    before = {"size": size_before, "compactionAvoided": avoided, "inputUsdPerMTok": price}
    if emergency:
        before["emergency"] = emergency
    led.record_action("strip", "main", session, "agent:main:main", trigger=trigger, policy="strip_at_budget_percent",
                      reason="r", outcome=outcome, dry_run=dry_run, before=before,
                      after={"sizeOriginal": size_before, "sizeAfter": size_after,
                             # the context figures a strip records (issue 23: savings count context, not bytes)
                             "tokensBefore": size_before // 4, "tokensAfterEstimate": size_after // 4}, now=now)


def test_savings_summary_counts_only_real_automatic_strips(isolated_env):
    now = time.time()
    with Ledger.open() as led:
        led.record_observations([dict(agent="main", session_id=SID, session_key="agent:main:main", era="file",
                                      compaction_count=0, context_tokens=1000, tokens_source="usage",
                                      context_window=20_000, size=100)], now=now - 200)
        _strip(led, now - 100, size_before=400_000, size_after=40_000, price=3.0, avoided=True)
        _strip(led, now - 90, size_before=100_000, size_after=60_000, emergency="BLOCKED", avoided=True)
        _strip(led, now - 80, size_before=100_000, size_after=0, dry_run=True)            # observe mode
        _strip(led, now - 70, size_before=100_000, size_after=0, outcome="failed")
        _strip(led, now - 60, size_before=100_000, size_after=0, trigger="manual")
        _strip(led, now - 10 * 86400, size_before=100_000, size_after=0)                   # too old for 7d
        # the first strip's next turn ran without a compaction; the second's has not come yet (issue 30.4)
        first = led.history(kind="strip", since=now - 101, limit=100)[-1]
        led.record_action("verify-strip", "main", SID, "agent:main:main", trigger="auto", outcome="ok",
                          before={"actionId": first["id"]}, after={"nextTurnCompacted": False}, now=now - 50)
        rows = led.history(limit=100)
    s = savings.summarize([r for r in rows if r["ts"] >= now - 7 * 86400])["total"]
    assert s["strips"] == 2 and s["tokensRemoved"] == 90_000 + 10_000
    assert s["compactionsAvoided"] == 1 and s["awaitingNextTurn"] == 1 and s["emergencies"] == 1
    # no prompt size recorded with these strips: counted, not priced (tests/test_cost.py prices them)
    assert s["unpriced"] == 2 and s["usdNet"] == 0
    r = run("stats", "--since", "7d", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    total = data.get("total") or data.get("data", {}).get("total")
    assert total["strips"] == 2 and total["tokensRemoved"] == 100_000
    r = run("stats")
    assert r.exit_code == 0 and "100k context tokens removed by 2 strips" in r.output
    r = run("status")
    assert r.exit_code == 0 and "Saved in the last 7 days" in r.output and "BLOCKED" in r.output
    assert run("stats", "--since", "soon").exit_code == 2


def test_compaction_avoided_rule():
    d = {"predictedPromptTokens": 80_000, "growthTokens": 10_000, "promptBudget": 108_000, "predictedAfter": 50_000}
    assert savings.compaction_avoided(d, 3)          # 80k + 3 x 10k >= 108k, and 50k + 10k < 108k
    assert not savings.compaction_avoided({**d, "predictedPromptTokens": 70_000}, 3)
    assert not savings.compaction_avoided({**d, "predictedAfter": 100_000}, 3)
    assert not savings.compaction_avoided({}, 3)


def test_status_shows_the_running_daemons_mode(isolated_env):
    from occd.runtime.lock import InstanceLock
    from occd.runtime.statusfile import write_status

    now = time.time()
    with Ledger.open() as led:
        led.record_observations([dict(agent="main", session_id=SID, session_key="agent:main:main", era="file",
                                      compaction_count=0, context_tokens=1000, tokens_source="usage",
                                      context_window=20_000, size=100)], now=now)
    data = json.loads(run("status", "--json").stdout)
    assert data["agents"][0]["mode"] == "observe" and data["agents"][0]["modeSource"] == "config"
    lock = InstanceLock().acquire()
    try:
        write_status({"pid": os.getpid(), "started": now, "mode": "act", "agentModes": {"main": "act"}})
        data = json.loads(run("status", "--json").stdout)
        assert data["daemon"]["running"] and data["agents"][0]["mode"] == "act"
        assert data["agents"][0]["modeSource"] == "daemon"
        assert "act mode" in run("status").output
    finally:
        lock.release()
