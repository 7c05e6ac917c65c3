"""The strip's prepared lines (EntryMeta.stripped / EntryEdit.base, made during the scan so the rewrite does not
parse those lines again) give exactly the bytes the parse-and-apply path gives."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from occd.cleaner import plan_strip
from occd.transcript import rewrite, scan
from occd.transcript.synth import generate_transcript


def _rewritten(path, keep, pct, prepare):
    t = scan(path, prepare_strip=prepare)
    plan = plan_strip(t, keep, pct)
    buf = io.BytesIO()
    n = rewrite(t, buf, remove=plan.remove, edits=plan.transforms())
    assert n == len(buf.getvalue())
    return plan, buf.getvalue()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), thinking=st.booleans(), compactions=st.integers(0, 3), branch=st.booleans(),
       images=st.booleans(), custom=st.booleans(), aborted=st.booleans(),
       preset=st.sampled_from([(20, 50), (10, 50), (0, 0), (3, 100), (1, 0), (5, 33)]))
def test_prepared_lines_match_parse_and_apply(tmp_path, seed, thinking, compactions, branch, images, custom, aborted,
                                              preset):
    src = tmp_path / f"s{seed}.jsonl"
    generate_transcript(src, turns=24, thinking=thinking, compactions=compactions, branch=branch, images=images,
                        custom=custom, aborted=aborted, seed=seed)
    plan_a, with_prepared = _rewritten(src, *preset, prepare=True)
    plan_b, without = _rewritten(src, *preset, prepare=False)
    assert with_prepared == without
    assert plan_a.edits == plan_b.edits and plan_a.remove == plan_b.remove


@pytest.mark.parametrize("version", [1, 2])
def test_old_versions_never_use_prepared_lines(tmp_path, version):
    """v1/v2 lines are migrated on the way, so they are parsed; nothing is prepared for them."""
    src = tmp_path / "old.jsonl"
    generate_transcript(src, turns=12, thinking=True, seed=7, version=version)
    t = scan(src)
    assert all(e.stripped is None for e in t.entries)
