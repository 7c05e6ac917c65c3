"""Shapes seen in real OpenClaw / Clawdbot / pi transcripts in the wild, reproduced with occd's own generator
(occd.transcript.synth; no one else's files): pi v1 files without ids, torn lines, a hand-truncated file with no
header, a header id other than the file name, tool results with no call, 100 compactions in one file, thousands
of entries, many images and signed thinking blocks, snapshots taken mid-run (an open call; a half-written last
line), and a run that crashed with its last call unanswered. occd must describe each truthfully, refuse what
it cannot clean safely, and write only what OpenClaw's own loader (the oracle) accepts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd.cleaner import plan_strip
from occd.cli.main import cli
from occd.transcript import analyze, check_invariants, rewrite, scan
from occd.transcript.synth import generate_transcript


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def state_with(home: Path, age_s: float = 3600, **opts) -> Path:
    """One indexed session made by synth with `opts`, last changed `age_s` ago. Returns the transcript."""
    sdir = home / ".openclaw" / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    info = generate_transcript(sdir, **opts)
    old = time.time() - age_s
    os.utime(info.path, (old, old))
    index = {"agent:main:main": {"sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000),
                                 "model": "claude-opus-4-6", "modelProvider": "anthropic"}}
    (sdir / "sessions.json").write_text(json.dumps(index))
    return info.path


def codes(info: dict) -> set:
    return {w["code"] for w in info["analysis"]["warnings"]}


def test_no_header_is_reported_and_refused(isolated_env):
    p = state_with(isolated_env, turns=12, cut_head=7)
    r = run("info", "--json")
    assert r.exit_code == 0
    info = json.loads(r.stdout)
    a = info["analysis"]
    assert a["headerValid"] is False and a["version"] is None and "no-header" in codes(info)
    r = run("info")
    assert "Warning:" in r.output and "new, empty session" in r.output
    before = p.read_bytes()
    r = run("edit", "agent:main:main", "--strip-tools", "--force")
    assert r.exit_code == 1 and "not a session header" in r.output
    assert p.read_bytes() == before


def test_v1_file_without_ids(isolated_env, oracle):
    p = state_with(isolated_env, turns=14, version=1, compactions=1, custom=True)
    info = json.loads(run("info", "--json").stdout)
    assert info["analysis"]["version"] == 1 and "old-format" in codes(info)
    assert "version 1 (no entry ids)" in run("info").output
    r = run("edit", "agent:main:main", "--strip-tools=aggressive", "--force", "--json")
    assert r.exit_code == 0, r.output
    assert scan(p).version == 3 and oracle.check(p)["ok"]


def test_orphan_results_are_reported_and_removed_in_stripped_turns(isolated_env, oracle):
    p = state_with(isolated_env, turns=30, orphan_results=3, plain_every=0)
    info = json.loads(run("info", "--json").stdout)
    assert info["analysis"]["orphanResults"] == 3 and "orphan-results" in codes(info)
    assert oracle.check(p)["orphanResults"] == 3
    r = run("edit", "agent:main:main", "--strip-tools=aggressive", "--force", "--json")
    assert r.exit_code == 0, r.output
    chk = oracle.check(p)  # the three were in the oldest turns, which the preset strips
    assert chk["ok"] and chk["orphanResults"] == 0


def test_header_id_other_than_the_file_name(isolated_env, oracle):
    p = state_with(isolated_env, turns=10, name="renamed-by-hand")
    hid = orjson.loads(p.read_bytes().splitlines()[0])["id"]
    info = json.loads(run("info", "--json").stdout)
    assert "header-id-mismatch" in codes(info)
    assert run("edit", "agent:main:main", "--strip-tools=aggressive", "--force").exit_code == 0
    assert orjson.loads(p.read_bytes().splitlines()[0])["id"] == hid and p.name == "renamed-by-hand.jsonl"
    assert oracle.check(p)["headerKept"]


@pytest.mark.parametrize("kind,malformed", [("glued", "invalid-json"), ("tail", "torn")])
def test_torn_lines(isolated_env, kind, malformed):
    p = state_with(isolated_env, turns=16, torn=kind)
    a = json.loads(run("info", "--json").stdout)["analysis"]
    assert [m["kind"] for m in a["malformedLines"]] == [malformed]
    if kind == "glued":  # the entry after the cut lost its parent: OpenClaw loses the history before it
        assert a["brokenParentLine"] is not None and "broken-parent" in {w["code"] for w in a["warnings"]}
    before = p.read_bytes()
    r = run("edit", "agent:main:main", "--strip-tools", "--force")
    assert r.exit_code == 1 and "malformed" in r.output and p.read_bytes() == before
    r = run("edit", "agent:main:main", "--strip-tools=aggressive", "--force", "--drop-malformed", "--json")
    assert r.exit_code == 0, r.output
    t = scan(p)
    assert not t.malformed and not t.missing_final_newline


def test_many_compactions_and_thousands_of_entries(tmp_path, oracle):
    info = generate_transcript(tmp_path / "big.jsonl", turns=1500, compactions=100, seed=17)
    t = scan(info.path)
    a = analyze(t)
    assert a["compactions"] == 100 and a["entries"] > 6000
    plan = plan_strip(t, 20, 50)
    out = tmp_path / "big.out.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    assert check_invariants(out, t) == []
    assert oracle.check(out)["ok"] and oracle.compare(info.path, out)["ok"]


def test_images_and_signed_thinking(tmp_path, oracle):
    info = generate_transcript(tmp_path / "rich.jsonl", turns=120, thinking=True, images=True, seed=23)
    t = scan(info.path)
    a = analyze(t)
    assert a["images"] >= 17 and a["signedThinkingBlocks"] >= 180
    plan = plan_strip(t, 10, 50)
    out = tmp_path / "rich.out.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    assert check_invariants(out, t) == [] and oracle.check(out)["ok"] and oracle.compare(info.path, out)["ok"]
    # user images are never touched: every user line with an image is byte-identical
    src_lines = set(info.path.read_bytes().splitlines())
    for ln in out.read_bytes().splitlines()[1:]:
        o = orjson.loads(ln)
        m = o.get("message") or {}
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            assert ln in src_lines


def test_crashed_run_is_cleaned_only_on_request_and_keeps_the_open_call(isolated_env, oracle):
    p = state_with(isolated_env, age_s=3600, turns=30, open_call=True, thinking=True)
    last_before = p.read_bytes().splitlines()[-1]
    info = json.loads(run("info", "--json").stdout)
    assert info["analysis"]["openCall"] in ("call", "result") and info["analysis"]["runState"] == "crashed"
    assert "crashed-run" in codes(info)
    r = run("edit", "agent:main:main", "--strip-tools", "--force")
    assert r.exit_code == 75 and "--crashed-run" in r.output
    r = run("edit", "agent:main:main", "--strip-tools=aggressive", "--crashed-run", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["changed"]
    assert p.read_bytes().splitlines()[-1] == last_before  # the open call, exactly as it was
    chk = oracle.check(p)
    assert chk["ok"] and chk["syntheticResults"] == 1  # OpenClaw patches the unanswered call itself


def test_recent_open_call_is_a_run_in_progress(isolated_env):
    p = state_with(isolated_env, age_s=120, turns=10, open_call=True)
    info = json.loads(run("info", "--json").stdout)
    assert info["analysis"]["runState"] == "mid-run" and "mid-run" in codes(info)
    before = p.read_bytes()
    r = run("edit", "agent:main:main", "--strip-tools", "--crashed-run")
    assert r.exit_code == 75 and "may still be running" in r.output and p.read_bytes() == before


def test_crashed_run_with_a_live_lock_is_refused(isolated_env):
    from statefactory import write_lock

    p = state_with(isolated_env, age_s=3600, turns=10, open_call=True)
    write_lock(Path(str(p) + ".lock"), os.getpid())
    before = p.read_bytes()
    r = run("edit", "agent:main:main", "--strip-tools", "--crashed-run")
    assert r.exit_code == 75 and p.read_bytes() == before
    assert json.loads(run("info", "--json").stdout)["analysis"]["runState"] == "running"


def test_daemon_leaves_a_crashed_run_alone(isolated_env):
    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.ledger import Ledger

    p = state_with(isolated_env, age_s=3600, turns=61, tools_per_turn=3, open_call=True)
    before = p.read_bytes()
    assert json.loads(run("info", "--json").stdout)["analysis"]["runState"] == "crashed"
    state = isolated_env / ".openclaw"
    with Ledger.open() as led:
        s = load_settings({"state_dir": str(state), "policy": {"mode": "act", "min_idle_minutes": 5,
                                                                "strip_at_context_percent": 1}})
        res = run_cycle(JobContext(settings=s, ledger=led, state_dir=state), ["scan", "apply"])
        assert res["apply"][1]["acted"] == 0 and res["apply"][1]["deferred"] == 1
    assert p.read_bytes() == before


@pytest.mark.parametrize("keep,pct", [(0, 0), (10, 50), (20, 100)])
def test_crashed_run_plan_leaves_the_last_turn_whatever_the_preset(tmp_path, keep, pct):
    info = generate_transcript(tmp_path / "c.jsonl", turns=25, plain_every=0, open_call=True, thinking=True)
    t = scan(info.path)
    with pytest.raises(Exception, match="in use"):
        plan_strip(t, keep, pct)
    plan = plan_strip(t, keep, pct, crashed_run=True)
    last_turn = t.turns()[-1]
    path = t.active_path()
    touched = plan.remove | set(plan.edits)
    assert not {e.line for e in path[last_turn.start:last_turn.end + 1]} & touched
    out = tmp_path / "c.out.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    assert check_invariants(out, t) == []
    assert info.open_call_id in {c for e in scan(out).entries for c in e.call_ids}
