"""Provider-native compaction (OpenClaw 2026.10.2+ on OpenAI/Anthropic API-key routes): no `compaction` entry,
a `providerReplay` checkpoint on an assistant message (shape: openclaw/openclaw
src/agents/transcript-redact-replay.ts, isCompactionReplayCheckpoint). occd counts it as a compaction everywhere
(occd.transcript.compaction.is_compaction) and never hides or rewrites the message that carries it."""

from __future__ import annotations

import time

import orjson
import pytest

from occd.cleaner import plan_strip
from occd.openclaw.dbstore import loop_signals
from occd.policy.emergency import SPIRAL, detect, observations_from_signals, observe_entries
from occd.transcript import rewrite, scan
from occd.transcript.analysis import analyze
from occd.transcript.compaction import PROVIDER_COMPACTION_TYPES, is_compaction, provider_checkpoint
from occd.transcript.treebuilder import TreeBuilder
from statefactory import message

USED = {"input": 100, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 105}


def _replay(kind: str, n: int) -> dict:
    """A checkpoint as OpenClaw stores it on the owner message (fields from its own tests)."""
    out = {"v": 1, "type": kind, "id": f"cmp_{n}", "data": f"opaque-{n}", "provider": "openai",
           "api": "openai-responses", "model": "gpt-5"}
    if kind == "openai-responses-compaction":
        out["replayIndex"] = 1
    return out


def _events(plan: str, kind: str = "anthropic-compaction") -> list[dict]:
    """"t": a turn; "p": a turn whose reply carries a provider checkpoint; "c": OpenClaw's compaction entry."""
    out, parent = [], None
    for n, step in enumerate(plan):
        if step == "c":
            out.append({"type": "compaction", "id": f"c{n}", "parentId": parent, "summary": "s",
                        "firstKeptEntryId": parent, "tokensBefore": 9, "timestamp": "2026-11-25T10:00:00.000Z"})
            parent = f"c{n}"
            continue
        out.append(message("user", f"q{n}", id=f"u{n}", parent=parent))
        a = message("assistant", f"a{n}", id=f"a{n}", parent=f"u{n}", usage=USED)
        if step == "p":
            a["message"]["providerReplay"] = _replay(kind, n)
        out.append(a)
        parent = f"a{n}"
    return out


def _lines(events):
    head = {"type": "session", "version": 4, "id": "s", "timestamp": "2026-11-25T09:00:00.000Z", "cwd": "/w"}
    return [orjson.dumps(e) + b"\n" for e in [head, *events]]


@pytest.mark.parametrize("kind", sorted(PROVIDER_COMPACTION_TYPES))
def test_the_one_definition(kind):
    (u, a) = _events("p", kind)
    assert is_compaction(a) and provider_checkpoint(a["message"]) == kind and not is_compaction(u)
    assert is_compaction({"type": "compaction"})
    other = dict(a, message=dict(a["message"], providerReplay={"type": "openai-responses-reasoning"}))
    assert not is_compaction(other)  # replay state that is not a compaction checkpoint
    user = dict(u, message=dict(u["message"], providerReplay=_replay(kind, 1)))
    assert not is_compaction(user)  # only an assistant message owns one


@pytest.mark.parametrize("kind", sorted(PROVIDER_COMPACTION_TYPES))
def test_spiral_detection_counts_provider_checkpoints(kind):
    """The database era's signals and the file era's observations: the same spiral either way."""
    ev = _events("tttpppt", kind)
    sig = loop_signals(_lines(ev))
    assert sig["compactions"] == 3 and sig["compactionsPerTurn"][-4:] == [1, 1, 1, 0]
    assert sig["lastReply"]["text"] == "a6"  # a checkpoint message is still a reply
    em = detect(observations_from_signals(sig), time.time())
    assert em is not None and em.kind == SPIRAL
    mixed = loop_signals(_lines(_events("ttcptpc", kind)))
    assert mixed["compactions"] == 4
    assert len([e for e in ev if is_compaction(e)]) == 3


@pytest.mark.parametrize("kind", sorted(PROVIDER_COMPACTION_TYPES))
def test_the_file_era_budget_facts_count_them(tmp_path, kind):
    """occd.jobs.budget reads a transcript slim and marks checkpoints; the file era's spiral detection and the
    last compaction's time see them."""
    from occd.jobs.budget import _parse

    p = tmp_path / "s.jsonl"
    p.write_bytes(b"".join(_lines(_events("tttpppt", kind))))
    entries = _parse(p)
    obs = observe_entries(entries)
    plain = observe_entries(_parse_plain(tmp_path, "ttttttt"))
    assert obs != plain
    em = detect(obs, time.time())
    assert em is not None and em.kind == SPIRAL
    assert [e["id"] for e in entries if e.get("_compaction")] == ["a3", "a4", "a5"]


def _parse_plain(tmp_path, plan):
    from occd.jobs.budget import _parse

    p = tmp_path / "plain.jsonl"
    p.write_bytes(b"".join(_lines(_events(plan))))
    return _parse(p)


def test_occd_info_counts_them(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(b"".join(_lines(_events("tpcp"))))
    assert analyze(scan(p))["compactions"] == 3


def _tool_transcript(tmp_path, checkpoint_turn: int | None):
    b = TreeBuilder()
    b.model()
    turns = [b.tool_turn(f"turn {i}", calls=2, thinking=True) for i in range(6)]
    src = b.write(tmp_path / f"s{checkpoint_turn}.jsonl")
    if checkpoint_turn is not None:  # the turn's final reply carries the provider's checkpoint
        lines = src.read_bytes().splitlines(keepends=True)
        target = turns[checkpoint_turn]["final"]
        for i, ln in enumerate(lines[1:], 1):
            o = orjson.loads(ln)
            if o.get("id") == target:
                o["message"]["providerReplay"] = _replay("openai-responses-compaction", 1)
                lines[i] = orjson.dumps(o) + b"\n"
        src.write_bytes(b"".join(lines))
    return src, turns


def test_the_strip_planner_never_touches_a_checkpoint_or_what_it_was_made_from(tmp_path):
    base, turns = _tool_transcript(tmp_path, None)
    plain = plan_strip(scan(base), 2, 0)
    assert plain.changed and plain.tool_calls_removed == 8  # without a checkpoint turns 1-4 lose their calls
    src, turns = _tool_transcript(tmp_path, 2)
    t = scan(src)
    plan = plan_strip(t, 2, 0)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    before, after = src.read_bytes().splitlines(), set(out.read_bytes().splitlines())
    ids = [i for x in turns[:3] for i in [x["call_msg"], *x["results"], x["final"]]]
    for i in ids:  # turns 1-3 (up to the checkpoint's owner) stay byte-identical
        line = next(ln for ln in before if f'"id":"{i}"'.encode() in ln)
        assert line in after, i
    assert b"providerReplay" in out.read_bytes()
    assert plan.tool_calls_removed == 2  # only turn 4 (after the checkpoint, outside the newest 2) is stripped
    assert analyze(scan(out))["compactions"] == 1
