"""The context figure (occd.openclaw.figure): zero-usage replies, OpenClaw's own numbers, one figure in every command
after occd rewrites a session, like-with-like before/after, one percent rounding."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.openclaw.figure import (Figure, RewriteMark, compaction_point, percent, percent_text, session_figure,
                         stale_estimate)
from occd.transcript import context_tokens, context_tokens_from_tail, scan, summarize_range, synth
from occd.transcript.treebuilder import TreeBuilder


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def write_state(home: Path, builders: dict, entries: dict | None = None, agent: str = "main") -> Path:
    """A file-era state whose transcripts are TreeBuilders (or synth options), indexed in sessions.json."""
    state = home / ".openclaw"
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    old = time.time() - 3600
    index = {}
    for key, b in builders.items():
        if isinstance(b, dict):
            info = synth.generate_transcript(sdir, **b)
            sid, p = info.id, info.path
        else:
            sid = b.header["id"]
            p = b.write(sdir / f"{sid}.jsonl")
        os.utime(p, (old, old))
        index[key] = {"sessionId": sid, "sessionFile": str(p), "updatedAt": int(old * 1000), "compactionCount": 0,
                      "model": "claude-opus-4-6", "modelProvider": "anthropic", **(entries or {}).get(key, {})}
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return state


def measured_session(last: str, sid="01a0f67a-3800-7000-8000-0000000000aa") -> TreeBuilder:
    """A session measured at 50,010 tokens by its last real reply, then a user message answered by `last`
    (a mirror reply, an injected one, or OpenClaw's overflow notice), all with all-zero usage."""
    b = TreeBuilder(sid)
    b.model()
    b.tool_turn("build it", calls=2)
    b.user("and deploy")
    b.assistant("deploying now", usage=50_000)
    b.user("status?")
    if last == "overflow":
        b.overflow_notice()
    else:
        b.mirror("Deployed. All green.", model=last)
    return b


# ---------------------------------------------------------------------------------------------------------
# 2. zero-usage replies are not measurements
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("last", ["delivery-mirror", "gateway-injected", "overflow"])
def test_zero_usage_reply_is_skipped_everywhere(isolated_env, last):
    b = measured_session(last)
    state = write_state(isolated_env, {"agent:main:telegram:dm:42": b})
    p = next((state / "agents/main/sessions").glob("*.jsonl"))
    t = scan(p)
    ct = context_tokens(t)
    # the last real usage (50,000 + 10 output) plus the estimate of the two messages after it
    trailing = sum(e.est_tokens for e in t.sent_entries()[-2:])
    assert ct["source"] == "usage" and ct["usageTokens"] == 50_010 and ct["tokens"] == 50_010 + trailing
    # the same from the cheap readers: the tail (list, discovery) and the daemon's incremental summary
    assert context_tokens_from_tail(p) == (50_010 + trailing, "usage")
    assert summarize_range(p).tokens == 50_010 + trailing
    info = json.loads(run("info", "--json").stdout)
    assert info["context"]["tokens"] == 50_010 + trailing and info["context"]["source"] == "usage"
    (row,) = json.loads(run("list", "--json").stdout)["sessions"]
    assert row["tokens"] == 50_010 + trailing and row["tokensSource"] == "usage"


def test_only_zero_usage_falls_back_to_the_estimate(isolated_env):
    b = TreeBuilder()
    b.model()
    b.user("hello")
    b.overflow_notice()
    state = write_state(isolated_env, {"agent:main:main": b})
    p = next((state / "agents/main/sessions").glob("*.jsonl"))
    t = scan(p)
    est = sum(e.est_tokens for e in t.sent_entries())
    assert context_tokens(t)["source"] == "estimate" and context_tokens_from_tail(p) == (est, "estimate")
    info = json.loads(run("info", "--json").stdout)
    assert (info["context"]["tokens"], info["context"]["source"]) == (est, "estimate")


def test_index_zero_total_is_not_a_figure(isolated_env):
    """sessions.json totalTokens 0 (a reset, or a mirror-only run) is no measurement either."""
    b = measured_session("delivery-mirror")
    write_state(isolated_env, {"agent:main:main": b},
                {"agent:main:main": {"totalTokens": 0, "totalTokensFresh": True}})
    (row,) = json.loads(run("list", "--json").stdout)["sessions"]
    assert row["tokensSource"] == "usage" and row["tokens"] > 50_010


def test_zero_usage_in_the_database_era_discovery():
    from occd.relevance.discovery import _oc_usage

    mirror = {"type": "message", "message": {"role": "assistant", "usage": dict(TreeBuilder.ZERO_USAGE)}}
    assert _oc_usage(mirror) is None


# ---------------------------------------------------------------------------------------------------------
# the figure function, pure
# ---------------------------------------------------------------------------------------------------------

CBS = {"schemaVersion": 1, "source": "pre-prompt-estimate", "route": "fits", "shouldCompact": False,
       "estimatedPromptTokens": 91_000, "contextTokenBudget": 128_000, "promptBudgetBeforeReserve": 108_000,
       "reserveTokens": 16_384, "effectiveReserveTokens": 20_000, "remainingPromptBudgetTokens": 17_000}


def test_preference_order():
    fresh = {"totalTokens": 120_000, "totalTokensFresh": True, "contextBudgetStatus": CBS}
    f = session_figure(transcript=(100_000, "usage"), entry=fresh, window=128_000)
    assert (f.tokens, f.source) == (120_000, "usage")                       # OpenClaw's fresh total first
    assert (f.compact_at, f.compact_at_source, f.to_compaction) == (108_000, "openclaw", -12_000)
    assert f.openclaw_estimate == 91_000 and f.should_compact is False and f.route == "fits"
    f = session_figure(transcript=(100_000, "usage"), entry={"totalTokens": 120_000}, window=128_000)
    assert (f.tokens, f.source) == (100_000, "usage")                       # a stale total loses to the file
    f = session_figure(transcript=(30_000, "estimate"), entry={"contextBudgetStatus": CBS})
    assert (f.tokens, f.source, f.window) == (91_000, "openclaw-estimate", 128_000)
    f = session_figure(transcript=(30_000, "estimate"), entry={}, window=200_000)
    assert (f.tokens, f.source, f.compact_at, f.compact_at_source) == (30_000, "estimate", 180_000, "default")
    f = session_figure(entry={"totalTokens": 5})
    assert (f.tokens, f.source) == (5, "index")
    # after occd's rewrite: the estimate, and OpenClaw's figures (as old as the usage) are not used
    f = session_figure(transcript=(100_000, "usage"), entry=fresh, window=128_000, after_rewrite=40_000)
    assert (f.tokens, f.source, f.stale_usage, f.measured) == (40_000, "estimate", True, 120_000)
    assert f.openclaw_estimate is None and f.should_compact is None and f.compact_at == 108_000
    # a status recorded for another session id (a reset in place) is not this session's
    f = session_figure(entry={"contextBudgetStatus": {**CBS, "sessionId": "other"}}, session_id="mine")
    assert f.source is None and f.compact_at is None


def test_compaction_point_follows_openclaw_defaults():
    assert compaction_point(200_000) == 180_000
    assert compaction_point(128_000) == 108_000     # the closed loop's 108k budget on a 128k window
    assert compaction_point(16_000) == 8_000        # at least min(8000, window / 2) is left for the prompt
    assert compaction_point(200_000, reserve=40_000) == 160_000
    assert compaction_point(None) is None


def test_one_percent_rounding():
    # list showed 41% and info 42% for the same session: both now round the same one-decimal value half up
    assert percent(41_460, 100_000) == 41.5 and percent_text(percent(41_460, 100_000)) == "42%"
    assert percent(41_449, 100_000) == 41.4 and percent_text(41.4) == "41%"
    assert percent(1, 3) == 33.3 and percent(None, 5) is None and percent(5, 0) is None
    assert Figure(59_250, "usage", 100_000).percent == 59.3


def test_stale_estimate_reads_only_what_was_appended(tmp_path):
    b = measured_session("delivery-mirror")
    p = b.write(tmp_path / "s.jsonl")
    size = p.stat().st_size
    mark = RewriteMark(size, 12_345)
    assert stale_estimate(p, mark) == 12_345
    with open(p, "ab") as fh:  # OpenClaw appends a user message and a mirror reply: still no measurement
        fh.write(orjson.dumps({"type": "message", "id": "u9", "parentId": b.leaf, "timestamp": "x",
                               "message": {"role": "user", "content": "x" * 400}}) + b"\n")
    assert stale_estimate(p, mark) == 12_345 + 100
    with open(p, "ab") as fh:  # a real reply measures the file again
        fh.write(orjson.dumps({"type": "message", "id": "a9", "parentId": "u9", "timestamp": "x",
                               "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                                           "usage": {"input": 9000, "output": 5, "totalTokens": 9005},
                                           "stopReason": "stop"}}) + b"\n")
    assert stale_estimate(p, mark) is None
    assert stale_estimate(p, RewriteMark(p.stat().st_size + 1, 1)) is None  # shorter than occd left it: replaced
    assert stale_estimate(p, None) is None


# ---------------------------------------------------------------------------------------------------------
# 3. one figure everywhere after occd rewrites a session
# ---------------------------------------------------------------------------------------------------------

def figures(sid: str) -> dict:
    """The session's figure as every command and MCP report it."""
    from occd.relevance.mcp_server import session_list_tool

    out = {}
    (row,) = [r for r in json.loads(run("list", "--json").stdout)["sessions"] if r["id"] == sid]
    out["list"] = (row["tokens"], row["tokensSource"])
    c = json.loads(run("info", sid, "--json").stdout)["context"]
    out["info"] = (c["tokens"], c["source"])
    (s,) = [s for a in json.loads(run("status", "--json").stdout)["agents"] for s in a["biggest"]
            if s["sessionId"] == sid]
    out["status"] = (s["contextTokens"], s["tokensSource"])
    (d,) = [d for d in json.loads(run("sessions", "--json").stdout)["sessions"] if d["id"] == sid]
    out["sessions"] = (d["contextTokens"], d["contextSource"])
    (m,) = [m for m in session_list_tool()["sessions"] if m["id"] == sid]
    out["mcp"] = (m["contextTokens"], m["contextSource"])
    return out


def test_after_edit_every_command_shows_the_same_figure(isolated_env):
    state = write_state(isolated_env, {"agent:main:main": {"turns": 40, "tools_per_turn": 3, "seed": 5}})
    sdir = state / "agents/main/sessions"
    p = next(sdir.glob("*.jsonl"))
    sid = p.stem
    usage = context_tokens(scan(p))
    # OpenClaw's index carries its own fresh figure of the (pre-strip) file, as after every run
    idx = json.loads((sdir / "sessions.json").read_text())
    idx["agent:main:main"].update(totalTokens=usage["usageTokens"], totalTokensFresh=True)
    (sdir / "sessions.json").write_text(json.dumps(idx))
    dry = json.loads(run("edit", sid, "--strip-tools", "--dry-run", "--json").stdout)["statistics"]
    r = run("edit", sid, "--strip-tools", "--json")
    st = json.loads(r.stdout)["statistics"]
    assert dry["tokensAfterEstimate"] == st["tokensAfterEstimate"]  # --dry-run shows the same figure
    assert st["tokensBefore"] == usage["usageTokens"] and st["tokensBeforeSource"] == "usage"
    # like with like: the measured figure minus what the chars/4 estimate says was removed
    assert st["tokensAfterEstimate"] == st["tokensBefore"] - (st["estimateBefore"] - st["estimateAfter"])
    after = st["tokensAfterEstimate"]
    assert after < st["tokensBefore"]
    assert set(figures(sid).values()) == {(after, "estimate")}
    # the daemon's scan (a process that had seen the old file) agrees, and records nothing new
    from occd.jobs import JobContext, run_cycle
    from occd.config import load_settings
    from occd.ledger import Ledger

    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(state)}), ledger=led, state_dir=state)
        run_cycle(ctx, ["scan"])
        (o,) = [o for o in led.latest_observations() if o["session_id"] == sid]
        assert (o["context_tokens"], o["tokens_source"]) == (after, "estimate")
    # a mirror reply appended by OpenClaw is no measurement: still the estimate (plus what it adds)
    t = scan(p)
    with open(p, "ab") as fh:
        fh.write(orjson.dumps({"type": "message", "id": "m1", "parentId": t.leaf.id, "timestamp": "x",
                               "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * 40}],
                                           "provider": "openclaw", "model": "delivery-mirror",
                                           "usage": dict(TreeBuilder.ZERO_USAGE), "stopReason": "stop"}}) + b"\n")
    f = figures(sid)
    assert {k: v for k, v in f.items() if k != "status"} == dict.fromkeys(["list", "info", "sessions", "mcp"],
                                                                           (after + 10, "estimate"))
    # restore: the file's own usage again, at once (the mirror reply appended since would be dropped: the user
    # says so, and it stays in a pinned backup)
    r = run("restore", sid, "--force", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["code"] == "NEWER_ENTRIES"
    r = run("restore", sid, "--force", "--discard-newer", "--json")
    assert r.exit_code == 0, r.output
    assert set(figures(sid).values()) == {(usage["usageTokens"], "usage")}


def test_clone_without_strip_saves_nothing_and_a_stripped_clone_is_an_estimate(isolated_env):
    write_state(isolated_env, {"agent:main:main": {"turns": 30, "tools_per_turn": 2, "seed": 8}})
    sid = json.loads(run("list", "--json").stdout)["sessions"][0]["id"]
    plain = json.loads(run("clone", sid, "--json").stdout)
    st = plain["statistics"]
    assert st["tokensAfterEstimate"] == st["tokensBefore"] and st["estimateAfter"] == st["estimateBefore"]
    assert set(figures(plain["clonedSessionId"]).values()) == {(st["tokensBefore"], "usage")}
    r = run("clone", sid, "--strip-tools=aggressive", "--json")
    assert r.exit_code == 0, r.output
    stripped = json.loads(r.stdout)
    st2 = stripped["statistics"]
    assert st2["tokensAfterEstimate"] < st2["tokensBefore"]
    assert set(figures(stripped["clonedSessionId"]).values()) == {(st2["tokensAfterEstimate"], "estimate")}
    # the source is untouched: its own usage
    (row,) = [r for r in json.loads(run("list", "--json").stdout)["sessions"] if r["id"] == sid]
    assert (row["tokens"], row["tokensSource"]) == (st["tokensBefore"], "usage")


def test_human_output_shows_compaction_distance_and_like_for_like(isolated_env):
    write_state(isolated_env, {"agent:main:main": {"turns": 30, "tools_per_turn": 2, "seed": 9}},
                {"agent:main:main": {"contextBudgetStatus": {**CBS, "estimatedPromptTokens": 50_000}}})
    r = run("info")
    assert "Compaction:" in r.output and "before OpenClaw compacts (at 108k, OpenClaw's recorded budget)" in r.output
    r = run("list")
    assert "TO COMPACT" in r.output
    r = run("edit", "agent:main:main", "--strip-tools", "--dry-run", "--force")
    assert "Tokens:" in r.output and "→ ~" in r.output and "dry run" in r.output


def test_daemon_that_saw_the_old_file_keeps_the_post_edit_figure(isolated_env):
    """A running daemon scanned the session (usage), then a person ran `occd edit`: the daemon's next scan reads
    the new file's tail, whose last usage is stale, and must keep occd's post-edit figure, not go back to it."""
    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.ledger import Ledger

    state = write_state(isolated_env, {"agent:main:main": {"turns": 40, "tools_per_turn": 3, "seed": 6}})
    sid = json.loads(run("list", "--json").stdout)["sessions"][0]["id"]
    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(state)}), ledger=led, state_dir=state)
        run_cycle(ctx, ["scan"])
        (o,) = led.latest_observations()
        assert o["tokens_source"] == "usage"
        st = json.loads(run("edit", sid, "--strip-tools", "--json").stdout)["statistics"]
        for _ in range(2):
            run_cycle(ctx, ["scan"])
            (o,) = led.latest_observations()
            assert (o["context_tokens"], o["tokens_source"]) == (st["tokensAfterEstimate"], "estimate")
