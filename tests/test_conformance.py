"""Conformance with OpenClaw's own transcript library (tests/oracle): sessions written by its writer,
stripped by occd with every preset, must load cleanly (no broken parent, no orphan results, no duplicate ids)
and show the same conversation. Note: the oracle's loader migrates v1/v2 files IN PLACE when it opens them,
so old-format files are always handed to it as copies.
"""

from __future__ import annotations

import json
import shutil

import pytest

from occd.cleaner import plan_strip
from occd.errors import BusyError
from occd.transcript import check_invariants, clone_header, rewrite, scan
from occd.transcript.synth import generate_transcript

pytestmark = pytest.mark.oracle

PRESETS = {"default": (20, 50), "aggressive": (10, 50), "extreme": (0, 0)}
ALL = ("--thinking", "--compactions", "2", "--branch", "--images", "--aborted", "--custom", "--big-results")


@pytest.fixture(scope="module")
def made(oracle, tmp_path_factory):
    d = tmp_path_factory.mktemp("oracle-made")
    return {
        "all": oracle.make(d / "a", *ALL, turns=45, tools=3, seed=7),
        "plain": oracle.make(d / "b", "--thinking", "--custom", turns=30, seed=3, plain_every=0),
        "open": oracle.make(d / "c", "--open-call", "--thinking", turns=12, seed=5, plain_every=0),
    }


def _strip(src, out, keep, pct):
    t = scan(src)
    plan = plan_strip(t, keep, pct)
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms())
    return t, plan


@pytest.mark.parametrize("kind", ["all", "plain"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_oracle_sessions_stripped(oracle, made, tmp_path, kind, preset):
    src = made[kind]
    out = tmp_path / f"{preset}.jsonl"
    t, plan = _strip(src, out, *PRESETS[preset])
    assert plan.changed
    assert check_invariants(out, t) == []
    before, after = oracle.check(src), oracle.check(out)
    assert after["ok"], after
    assert after["brokenParent"] is None and after["orphanResults"] == 0 and after["duplicateIds"] == 0
    assert after["syntheticResults"] == before["syntheticResults"] == 0
    assert after["contextChars"] < before["contextChars"]
    if preset == "extreme":
        assert after["toolCalls"] == 0 and after["roles"].get("toolResult", 0) == 0
    cmp = oracle.compare(src, out)
    assert cmp["ok"], cmp["diffs"]
    # a second run with the same preset changes nothing
    again = plan_strip(scan(out), *PRESETS[preset])
    assert not again.changed


def test_open_call_is_refused(oracle, made):
    assert oracle.check(made["open"])["syntheticResults"] == 1  # really a call without its result
    t = scan(made["open"])
    for keep, pct in PRESETS.values():
        with pytest.raises(BusyError):
            plan_strip(t, keep, pct)


def test_clone_is_accepted(oracle, made, tmp_path):
    t = scan(made["all"])
    plan = plan_strip(t, 10, 50)
    out = tmp_path / "clone.jsonl"
    with open(out, "wb") as fh:
        rewrite(t, fh, remove=plan.remove, edits=plan.transforms(), header=clone_header(t, "01a0f67a-3800-7000-8000-00000000c10e"))
    assert check_invariants(out, t, clone=True) == []
    assert oracle.check(out)["ok"]
    assert oracle.compare(made["all"], out, clone=True)["ok"]


def test_synth_output_passes_oracle(oracle, tmp_path):
    files = []
    variants = [dict(), dict(thinking=True, compactions=2, branch=True, images=True, aborted=True, custom=True,
                             big_results=True), dict(version=4, branch=True, custom=True),
                dict(target_bytes=300_000, compactions=1, branch=True, thinking=True)]
    for i, kw in enumerate(variants):
        files.append(generate_transcript(tmp_path / f"s{i}.jsonl", turns=25, seed=i + 11, **kw).path)
    p = oracle._run("check-session.mjs", *files)
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(rows) == len(files) and all(r["ok"] for r in rows), rows
    # our reading of the tree agrees with the loader's
    for f, r in zip(files, rows):
        t = scan(f)
        assert r["entries"] == len(t.entries) and r["pathLength"] == len(t.active_path())
        assert r["contextMessages"] == len(t.sent_entries())


@pytest.mark.parametrize("version", [1, 2])
def test_old_versions_stripped(oracle, tmp_path, version):
    info = generate_transcript(tmp_path / f"v{version}.jsonl", version=version, turns=20, compactions=1, custom=True,
                               branch=version == 2, thinking=True)
    out = tmp_path / "out.jsonl"
    t, plan = _strip(info.path, out, 5, 50)
    assert scan(out).version == 3
    copy = tmp_path / "orig-copy.jsonl"  # the oracle migrates (rewrites) old files it opens
    shutil.copy(info.path, copy)
    assert oracle.check(out)["ok"]
    cmp = oracle.compare(copy, out)
    assert cmp["ok"], cmp["diffs"]
