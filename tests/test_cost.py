"""The prompt-cache cost model (occd.policy.cost), "act only when it pays", and the net savings in `occd stats`."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from occd.cli.main import cli
from occd.config import PolicySettings
from occd.ledger import Ledger
from occd.policy import budget as b
from occd.policy import cost, savings
from occd.policy.strip import decide_budget_strip
from occd.policy.types import SessionState
from test_lean import fake_openclaw  # noqa: F401 - the fixture: a fake OpenClaw with the plugin installable

NOW = 1_800_000_000.0
SONNET = cost.Prices(input=3.0, cacheRead=0.3, cacheWrite=3.75, output=15.0, source="test")
SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


# ---- prices ---------------------------------------------------------------------------------------------------

def test_prices_from_openclaw_config_then_litellm_then_defaults():
    cfg = {"models": {"providers": {"p": {"models": [
        {"id": "m1", "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}},
        {"id": "m2", "cost": {"input": 2}}]}}}}
    p = cost.prices(cfg, "p/m1")
    assert (p.input, p.cacheRead, p.cacheWrite, p.output, p.source) == (3.0, 0.3, 3.75, 15.0, "openclaw")
    p = cost.prices(cfg, "m2")  # cache prices derived from the input price with the usual ratios
    assert p.source == "openclaw" and abs(p.cacheRead - 0.2) < 1e-12 and abs(p.cacheWrite - 2.5) < 1e-12
    table = {"gpt-x": {"input_cost_per_token": 1.25e-6, "cache_read_input_token_cost": 1.25e-7,
                       "output_cost_per_token": 1e-5}}
    p = cost.prices(cfg, "gpt-x", table)
    assert p.source == "litellm" and abs(p.input - 1.25) < 1e-9 and abs(p.cacheRead - 0.125) < 1e-9
    assert abs(p.output - 10.0) < 1e-9
    p = cost.prices(None, "unknown", table)
    assert p.source == "default" and p.input == cost.DEFAULT_PRICES["input"]


def test_the_real_litellm_price_map_prices_a_known_model_with_its_cache_prices():
    table = savings.litellm_table({})
    p = cost.prices(None, "claude-sonnet-4-5", table)
    if p.source == "litellm":  # the installed map knows the model: its cache prices, not the derived ones
        assert p.cacheRead < p.input < p.cacheWrite
    assert cost.prices(None, "gpt-4o-mini", table).source == "litellm"


def test_cache_lifetime_setting_per_provider_and_model():
    ttls = {"default": 300, "anthropic": 3600, "openai/gpt-5": 600}
    assert cost.cache_ttl(ttls, "anthropic", "claude") == 3600
    assert cost.cache_ttl(ttls, "openai", "gpt-5") == 600
    assert cost.cache_ttl(ttls, "openai", "gpt-4") == 300
    assert cost.cache_ttl({}, None, None) == cost.DEFAULT_TTL_S
    assert cost.cache_warm(NOW - 100, NOW, 300) and not cost.cache_warm(NOW - 400, NOW, 300)


# ---- one rewrite ----------------------------------------------------------------------------------------------

def test_rewrite_effect_by_hand():
    # 100k prompt, 40k removed, 10k prefix kept, 5 turns, warm: write (100-40-10)k x (3.75-0.3) = 0.1725,
    # saving 5 x 40k x 0.3 = 0.06: net -0.1125 (it does not pay)
    e = cost.rewrite_effect(100_000, 40_000, SONNET, prefix_kept_tokens=10_000, turns=5, warm=True)
    assert abs(e.writeUsd - 0.1725) < 1e-9 and abs(e.savedUsd - 0.06) < 1e-9 and abs(e.netUsd + 0.1125) < 1e-9
    assert not cost.pays(e)
    assert cost.pays(e, prevents_compaction=True) and cost.pays(e, prevents_block=True)
    # the cache expired: the next prompt is a write anyway: 40k x 3.75 + 4 x 40k x 0.3 = 0.198
    cold = cost.rewrite_effect(100_000, 40_000, SONNET, prefix_kept_tokens=10_000, turns=5, warm=False)
    assert abs(cold.netUsd - 0.198) < 1e-9 and cost.pays(cold)
    # a prevented compaction: summary call over the history + its output + the rebuilt prompt as a write
    c = cost.rewrite_effect(100_000, 40_000, SONNET, prefix_kept_tokens=10_000, turns=5, warm=True,
                            prevents_compaction=True, compaction_history_tokens=108_000, summary_tokens=2000)
    assert abs(c.compactionUsd - (108_000 * 3 + 2000 * 15 + 60_000 * 3.45) / 1e6) < 1e-9
    assert c.netUsd > 0
    # runs of 12 calls: 13 requests a turn, each reading 40k fewer: 5 x 13 x 40k x 0.3 = 0.78 saved; it pays now
    runs = cost.rewrite_effect(100_000, 40_000, SONNET, prefix_kept_tokens=10_000, turns=5, warm=True,
                               requests_per_turn=13)
    assert abs(runs.savedUsd - 0.78) < 1e-9 and abs(runs.writeUsd - e.writeUsd) < 1e-12 and cost.pays(runs)
    for odd in (None, 0, 0.5, float("nan"), float("inf"), True, "13"):
        assert cost.rewrite_effect(100_000, 40_000, SONNET, prefix_kept_tokens=10_000, turns=5,
                                   requests_per_turn=odd).savedUsd == e.savedUsd, odd  # 1 request a turn


def test_a_strip_is_priced_with_the_sessions_requests_a_turn_and_the_record_keeps_them():
    """The decision's figure (budget.ContextEstimate.requests_per_turn: the messages with calls of the newest three
    turns with tools, plus the answer) goes into the ledger's cost record, and the savings report prices it so."""
    from occd.policy import budget, savings

    run = budget.TurnEstimate(total=30_000, tools=28_000, has_tools=True, calls=tuple((1, 7_000) for _ in range(4)))
    together = budget.TurnEstimate(total=30_000, tools=28_000, has_tools=True, calls=((4, 28_000),))
    plain = budget.TurnEstimate(total=500, tools=0, has_tools=False)
    assert budget.ContextEstimate(turns=(run, plain, run)).requests_per_turn() == 5
    assert budget.ContextEstimate(turns=(together, run, together, together)).requests_per_turn() == (5 + 2 + 2) / 3
    assert budget.ContextEstimate(turns=(run, together, together, together)).requests_per_turn() == 2  # newest 3
    assert budget.ContextEstimate(turns=(plain,)).requests_per_turn() == 1
    details = {"predictedPromptTokens": 100_000, "removedTokens": 40_000, "overheadTokens": 10_000,
               "promptBudget": 108_000, "growthTokens": 30_000, "requestsPerTurn": 5}
    econ = cost.Economics(prices=SONNET)
    eff, rec = cost.strip_verdict(details, econ, last_activity=100.0, now=110.0, prevents_compaction=False)
    assert rec["requestsPerTurn"] == 5 and abs(eff.savedUsd - 1 * 5 * 40_000 * 0.3 / 1e6) < 1e-9  # H = 1 turn left
    again, _ = savings.strip_effect({"cost": rec}, 40_000)
    assert abs(again.savedUsd - eff.savedUsd) < 1e-12
    old = {k: v for k, v in rec.items() if k != "requestsPerTurn"}  # a record from before: one request a turn
    assert abs(savings.strip_effect({"cost": old}, 40_000)[0].savedUsd - eff.savedUsd / 5) < 1e-12


@settings(max_examples=300, deadline=None)
@given(P=st.integers(0, 2_000_000), R=st.integers(0, 3_000_000), bk=st.integers(0, 3_000_000),
       H=st.integers(1, 50), warm=st.booleans(), prevents=st.booleans())
def test_rewrite_effect_stays_within_its_physical_bounds(P, R, bk, H, warm, prevents):
    e = cost.rewrite_effect(P, R, SONNET, prefix_kept_tokens=bk, turns=H, warm=warm, prevents_compaction=prevents)
    assert 0 <= e.removedTokens <= e.promptTokens == P              # never more removed than the model was sent
    assert 0 <= e.prefixKeptTokens <= P - e.removedTokens
    # the write is at most the whole rest of the prompt at the write premium; the saving at most R on H turns
    assert e.writeUsd <= P * (SONNET.cacheWrite - SONNET.cacheRead) / 1e6 + 1e-12
    assert 0 <= e.savedUsd <= H * e.removedTokens * SONNET.cacheRead / 1e6 + 1e-12
    assert abs(e.netUsd - (e.savedUsd + e.compactionUsd - e.writeUsd)) < 1e-9
    if not warm:
        assert e.netUsd >= 0 and cost.pays(e)  # after the cache expired a rewrite is free
    if not prevents:
        assert e.compactionUsd == 0
    # the net can never beat sending nothing at all of R for H turns at the full input price plus the compaction
    assert e.netUsd <= H * e.removedTokens * SONNET.cacheWrite / 1e6 + e.compactionUsd + 1e-9


def test_turns_until_the_next_compaction():
    assert cost.turns_until(108_000, 80_000, 10_000, 10) == 3
    assert cost.turns_until(108_000, 20_000, 1_000, 10) == 10      # capped
    assert cost.turns_until(108_000, 120_000, 10_000, 10) == 1     # past it: the next turn
    assert cost.turns_until(None, 1, 1, 7) == 7


# ---- act only when it pays (the budget strip) ------------------------------------------------------------------

def _state(last):
    return SessionState(agent="main", session_key="agent:main:main", session_id="s1", last_activity=last)


def _decide(last_activity, predicted, growth, econ=cost.Economics(prices=SONNET, ttl_s=300)):
    # an earlier trigger than the default (80% of the budget at the check two runs ahead): a strip that is not
    # urgent, whose timing the prices decide
    pol = PolicySettings(mode="act", min_idle_minutes=0, strip_at_budget_percent=80)
    p = b.Prediction(predicted, 108_000, growth, 9_500, "session")
    tgt = b.StripTarget(2, 50_000, 54_000, predicted - 50_000)
    return decide_budget_strip(_state(last_activity), pol, now=NOW, prediction=p, target=tgt, economics=econ)


def test_a_strip_that_does_not_pay_waits_for_the_cache_to_expire_or_the_compaction_to_come_close():
    # 81.5% two runs ahead, growth 1k: the compaction is 30 turns away; with a warm cache the rewrite of
    # ~17.5k tokens at the write premium costs more than 10 turns of 27k fewer cache reads
    d = _decide(NOW - 30, 86_000, 1_000)
    assert d.deferred and not d.act and "does not pay" in d.reason
    eff = d.details["cost"]["effect"]
    assert eff["writeUsd"] > eff["savedUsd"] and eff["netUsd"] < 0
    assert d.details["cost"]["warm"] is True and d.details["cost"]["prices"]["source"] == "test"
    # the same session quiet longer than the cache lifetime: the rewrite is free, it acts
    d = _decide(NOW - 400, 86_000, 1_000)
    assert d.act and d.details["cost"]["warm"] is False and d.details["cost"]["effect"]["netUsd"] > 0
    # the compaction within 3 turns (growth 10k): it prevents one, it acts even with a warm cache
    d = _decide(NOW - 30, 86_000, 10_000)
    assert d.act and d.details["cost"]["preventsCompaction"] is True
    # without economics (the lean job; the setting off) the old behaviour
    d = _decide(NOW - 30, 86_000, 1_000, econ=None)
    assert d.act and "cost" not in d.details


# ---- the ledger and `occd stats` ------------------------------------------------------------------------------

def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_stats_show_net_savings_negative_when_negative_and_the_assumptions(isolated_env):
    now = time.time()
    warm_loss = {"predictedPromptTokens": 100_000, "promptBudget": 108_000, "growthTokens": 1_000,
                 "overheadTokens": 10_000, "compactionAvoided": False,
                 "cost": {"prices": SONNET.as_dict(), "warm": True, "promptTokens": 100_000, "prefixKeptTokens": 10_000,
                          "turns": 5, "preventsCompaction": False}}
    with Ledger.open() as led:
        # 40k tokens removed of the 100k the model was sent
        led.record_action("strip", "main", SID, "agent:main:main", trigger="auto", policy="strip_at_budget_percent",
                          reason="r", outcome="ok", before=warm_loss,
                          after={"tokensBefore": 100_000, "tokensAfterEstimate": 60_000}, now=now - 100)
    s = run("stats", "--json")
    assert s.exit_code == 0, s.output
    data = json.loads(s.stdout)
    data = data.get("data", data)
    t = data["total"]
    assert t["strips"] == 1 and t["tokensRemoved"] == 40_000
    assert abs(t["usdNet"] - (-0.1125)) < 1e-6  # the hand-computed figure above: negative
    a = data["assumptions"]
    assert a["priceSources"] == ["test"] and a["turnsAssumed"] == 10 and a["cacheTtlSeconds"] == {"default": 300.0}
    assert a["defaultPrices"]["cacheWrite"] == 3.75
    out = run("stats").output
    assert "net -$0.11" in out, out
    assert "Saved in the last 7 days" in run("status").output
    assert "-$0.11" in run("status").output


def test_tokens_removed_never_exceed_the_prompt_the_model_was_sent(isolated_env):
    now = time.time()
    with Ledger.open() as led:
        # the context figure says 250k were removed (a stale figure); the model was being sent 60k
        led.record_action("strip", "main", SID, "agent:main:main", trigger="auto", policy="p", reason="r",
                          outcome="ok", before={"predictedPromptTokens": 60_000, "inputUsdPerMTok": 3.0},
                          after={"tokensBefore": 250_000, "tokensAfterEstimate": 0}, now=now)
        rows = led.history(limit=10)
    t = savings.summarize(rows)["total"]
    assert t["tokensRemoved"] == 60_000
    # removing everything the model was sent: no cache write is left to pay, the saving is 60k reads x 10 turns
    assert abs(t["usdNet"] - 10 * 60_000 * 0.3 / 1e6) < 1e-9


def test_lean_moves_are_priced_from_what_the_plugin_reported(isolated_env):
    now = time.time()
    with Ledger.open() as led:
        led.record_action("lean-move", "main", SID, "agent:main:main", trigger="auto", policy="lean", reason="r",
                          outcome="ok", before={"predictedPromptTokens": 58_000, "removedTokens": 30_000,
                                                "cost": {"prefixKeptTokens": 20_000, "turns": 6, "warm": True,
                                                         "prices": SONNET.as_dict()}}, now=now)
        rows = led.history(limit=10)
    t = savings.summarize(rows)["total"]
    assert t["leanMoves"] == 1 and t["unpriced"] == 0
    want = 6 * 30_000 * 0.3 / 1e6 - (58_000 - 30_000 - 20_000) * 3.45 / 1e6
    assert abs(t["usdNet"] - want) < 1e-9


def test_the_lean_job_records_each_boundary_move_the_plugin_reported_once(fake_openclaw, isolated_env):
    from test_jobs import BIG, ctx_for, make_state

    from occd import lean
    from occd.jobs import run_cycle

    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}}, window=100_000)
    lean.enable(None, state, yes=True)
    move = {"at": 1, "turns": 6, "charsBefore": 232_000, "charsAfter": 112_000, "prefixChars": 40_000}
    lean.stats_path().write_text(json.dumps({"version": 1, "sessions": {"agent:main:main": {
        "sessionId": "s-x", "boundaryMoves": 2, "lastMove": move, "charsIn": 300_000, "charsOut": 112_000}}}))
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "lean"])
        assert res["lean"][1]["boundaryMoves"] == 1, res
        (a,) = led.history(kind="lean-move")
        assert a["session_key"] == "agent:main:main" and a["after"]["boundaryMoves"] == 2
        b = a["before"]
        assert b["predictedPromptTokens"] == 58_000 and b["removedTokens"] == 30_000
        assert b["cost"]["prefixKeptTokens"] == 10_000 <= b["predictedPromptTokens"] - b["removedTokens"]
        assert run_cycle(ctx, ["scan", "lean"])["lean"][1]["boundaryMoves"] == 0  # the same move: not again
        t = savings.summarize(led.history(limit=100))["total"]
    assert t["leanMoves"] == 1 and t["unpriced"] == 0
    # 10 turns x 30k fewer reads - (58k - 30k - 10k) written at the premium, at the prices recorded with it
    p = b["cost"]["prices"]
    want = (10 * 30_000 * p["cacheRead"] - 18_000 * (p["cacheWrite"] - p["cacheRead"])) / 1e6
    assert abs(t["usdNet"] - want) < 1e-9
    assert "(it pays" not in a["reason"] and a["before"]["cost"]["warm"] is True  # a plugin that gives no reason
    # a move after the cache expired (the plugin's "cold"): recorded as such, with no cache write premium to pay
    cold = {**move, "at": 2, "why": "cold", "requests": 5}
    lean.stats_path().write_text(json.dumps({"version": 1, "sessions": {"agent:main:main": {
        "sessionId": "s-x", "boundaryMoves": 3, "lastMove": cold, "charsIn": 300_000, "charsOut": 112_000}}}))
    with Ledger.open() as led:
        assert run_cycle(ctx_for(state, led, mode="act"), ["scan", "lean"])["lean"][1]["boundaryMoves"] == 1
        newest = led.history(kind="lean-move")[0]
        assert newest["before"]["cost"]["warm"] is False and "the prompt cache had expired" in newest["reason"], newest
        assert newest["before"]["cost"]["requestsPerTurn"] == 5 and "requestsPerTurn" not in a["before"]["cost"]
        t2 = savings.summarize(led.history(limit=100))["total"]
    assert t2["leanMoves"] == 2 and t2["usdNet"] > t["usdNet"] + 5 * 10 * 30_000 * p["cacheRead"] / 1e6


def test_the_savings_line_adds_up_whatever_the_sign_of_the_cache_writes():
    """status/stats print net = saved + compactions - cache writes; a rewrite after the cache expired makes the next
    write smaller (a negative writes term): the line must not read "- cache writes -$0.52" while adding it."""
    import re

    from occd.cli.status_cmd import _savings_line

    for writes in (0.276, -0.52):
        sv = {"strips": 2, "rotations": 0, "leanMoves": 0, "unpriced": 0, "tokensRemoved": 150_000,
              "compactionsAvoided": 1, "usdSaved": 0.04, "usdCompactionsAvoided": 3.05, "usdCacheWrites": writes,
              "usdNet": 0.04 + 3.05 - writes}
        line = _savings_line(sv)
        assert "-$" not in line.split("net ", 1)[1].split(")", 1)[0].split("saved", 1)[1], line
        net, saved, comp, sign, w = re.search(
            r"net \$([\d.]+) .*saved \$([\d.]+) \+ compactions \$([\d.]+) ([-+]) (?:smaller )?cache writes \$([\d.]+)",
            line).groups()
        total = float(saved) + float(comp) + (float(w) if sign == "+" else -float(w))
        assert abs(total - float(net)) < 0.011, line
