"""Issue 23 item 2: every token figure is bounded by what the model was sent. The savings' "context tokens
removed" counts context (the active branch since the last compaction), not bytes/4 of the whole file with its
compacted-away history and abandoned branches."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from occd.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _auto_strip(state: Path, sid: str, keep: int) -> None:
    """What the daemon's budget trigger does to one session (jobs.apply: edit_session with trigger auto)."""
    from occd.config import PresetConfig, load_settings
    from occd.ledger import Ledger

    s = load_settings({"state_dir": str(state)})
    from occd.actions.edit import edit_session

    with Ledger.open() as led:
        edit_session(s, ref=sid, trigger="auto", policy="strip_at_budget_percent", reason="test", ledger=led,
                     force=True, strip=("to-target", PresetConfig(keep_turns_with_tools=keep, truncate_percent=0)),
                     details={"compactionAvoided": True, "inputUsdPerMTok": 3.0})


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(8, 40), compactions=st.integers(0, 3), branch=st.booleans(), seed=st.integers(1, 50),
       keep=st.sampled_from([0, 2, 5]))
def test_removed_is_at_most_the_context_before(isolated_env, tmp_path_factory, turns, compactions, branch, seed,
                                               keep):
    from occd.transcript import context_tokens, scan
    from occd.transcript import synth
    from tests.statefactory import FileState

    base = tmp_path_factory.mktemp("s")
    os.environ["OCCD_HOME"] = str(base / "occd-home")
    os.environ["OPENCLAW_STATE_DIR"] = str(base / ".openclaw")
    fs = FileState(base / ".openclaw")
    made = fs.add_session(turns=turns, compactions=compactions, branch=branch, seed=seed, tools_per_turn=3,
                          big_results=True)
    before = context_tokens(scan(made.path))["tokens"]     # what the model was sent (usage + what follows it)
    sent_est = sum(e.est_tokens for e in scan(made.path).sent_entries())
    _auto_strip(base / ".openclaw", made.session_id, keep)
    r = run("stats", "--since", "1d", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    removed = sum(x["tokensRemoved"] for x in data["sessions"])
    assert 0 <= removed <= before, (removed, before, sent_est)
    assert data["total"]["tokensRemoved"] == removed


def test_compacted_away_history_is_not_counted(isolated_env):
    """A session whose compactions left most of the file out of the context: the strip removes lots of bytes,
    but the savings count only what left the context."""
    from occd.transcript import context_tokens, scan
    from tests.statefactory import FileState

    fs = FileState(isolated_env / ".openclaw")
    made = fs.add_session(turns=60, compactions=3, branch=True, seed=7, tools_per_turn=3, big_results=True)
    before = context_tokens(scan(made.path))["tokens"]
    size0 = made.path.stat().st_size
    _auto_strip(isolated_env / ".openclaw", made.session_id, 0)
    bytes_quarter = (size0 - made.path.stat().st_size) // 4
    data = json.loads(run("stats", "--json").stdout)
    removed = data["total"]["tokensRemoved"]
    assert removed <= before < bytes_quarter  # the old figure (bytes/4 of the whole file) exceeded the context
    human = run("stats").output
    assert "context tokens removed" in human or "TOKENS REMOVED" in human


def test_context_removed_rows():
    from occd.policy.savings import context_removed, summarize

    # the row a strip records: figure before, figure after (estimate)
    assert context_removed({"tokens": 50_000}, {"tokensBefore": 50_000, "tokensAfterEstimate": 20_000}) == 30_000
    # an after figure above the before figure never makes a negative or an over-the-bound figure
    assert context_removed({}, {"tokensBefore": 10, "tokensAfterEstimate": 40}) == 0
    # an old row with only the context estimates: bounded by the figure before
    assert context_removed({"tokens": 1000}, {"estimateBefore": 9000, "estimateAfter": 1000}) == 1000
    # sizes alone say nothing about the context
    assert context_removed({"size": 10_000_000}, {"sizeOriginal": 10_000_000, "sizeAfter": 100}) == 0
    rows = [{"kind": "strip", "outcome": "ok", "trigger": "auto", "agent_id": "main", "session_id": "s",
             "before": {"tokens": 180_000, "inputUsdPerMTok": 3.0},
             "after": {"sizeOriginal": 7_200_000, "sizeAfter": 3_200_000, "tokensBefore": 180_000,
                       "tokensAfterEstimate": 80_000}}]
    s = summarize(rows)
    assert s["total"]["tokensRemoved"] == 100_000  # not 1.0M = 4 MB / 4
    # the money (occd.policy.cost, issue 20) needs the prompt the model was sent: without it the row is unpriced
    assert s["total"]["unpriced"] == 1 and s["total"]["usdSaved"] == 0
    rows[0]["before"]["contextTokens"] = 180_000
    t = summarize(rows)["total"]
    # with the cache: each later request reads 100k fewer cached tokens (0.1 x input), over the horizon's turns;
    # never more than the removed tokens at the full input price on each of those turns
    assert t["unpriced"] == 0 and 0 < t["usdSaved"] <= 100_000 * 3.0 / 1e6 * 10
    assert abs(t["usdNet"] - (t["usdSaved"] - t["usdCacheWrites"] + t["usdCompactionsAvoided"])) < 1e-9
