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


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), branch=st.booleans(), compactions=st.integers(0, 3),
       preset=st.sampled_from([(20, 50), (3, 100), (0, 0), (5, 33)]))
def test_byte_level_edits_match_parse_and_apply(tmp_path, seed, branch, compactions, preset):
    """Lines the rewrite changes on the bytes (prepared lines, spliced parentIds) are exactly what parsing every
    edited line, applying the edit and serializing it gives (a plain mapping has no `prepared`)."""
    src = tmp_path / f"s{seed}.jsonl"
    generate_transcript(src, turns=24, thinking=True, compactions=compactions, branch=branch, seed=seed)
    t = scan(src)
    plan = plan_strip(t, *preset)
    fast, slow = io.BytesIO(), io.BytesIO()
    rewrite(t, fast, remove=plan.remove, edits=plan.transforms())
    rewrite(scan(src, prepare_strip=False), slow, remove=plan.remove,
            edits={line: ed.apply for line, ed in plan.edits.items()})
    assert fast.getvalue() == slow.getvalue()


_ids = st.one_of(st.none(), st.text(min_size=0, max_size=10))
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                     max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(etype=st.text(max_size=12), eid=_ids, parent=_ids, rest=st.dictionaries(st.text(max_size=10), _json, max_size=4),
       new=_ids, newline=st.booleans())
@pytest.mark.slow
def test_splice_parent_is_parse_set_serialize(etype, eid, parent, rest, new, newline):
    """splice_parent either declines (None) or gives a line that parses to the entry with the new parentId, with
    the key order kept and every other byte unchanged."""
    import orjson

    from occd.transcript.rewrite import splice_parent

    obj = {"type": etype, "id": eid, "parentId": parent}
    obj.update({k: v for k, v in rest.items() if k not in obj})
    raw = orjson.dumps(obj) + (b"\n" if newline else b"")
    out = splice_parent(raw, new)
    if out is None:
        return
    assert out.endswith(b"\n")
    expect = dict(obj, parentId=new)
    assert orjson.loads(out) == expect and list(orjson.loads(out)) == list(expect)
    assert out == orjson.dumps(expect) + b"\n"  # compact input: the same bytes a re-serialization gives


@pytest.mark.parametrize("line", [
    b'{"type":"message","id":"a","parentId":"p","message":{"parentId":"q"}}\n',      # nested key of that name
    b'{"type":"message","id":"a","parentId":"p","parentId":"q"}\n',                  # duplicate key
    b'{"type": "message", "id": "a", "parentId": "p"}\n',                             # not compact
    b'{"id":"a","type":"message","parentId":"p"}\n',                                  # another key order
    b'{"type":"message","id":"a\\"","parentId":"p"}\n',                               # escapes in the prefix
    b'{"type":"message","id":"a","parentId":"p","text":"x\\"parentId"}\n',            # the name inside a string
    b'{"type":"message","id":"a","parentId":"p","text":"caf\\u00e9"}\n',               # an escape: re-serialize
])
def test_splice_parent_declines_other_shapes(line):
    from occd.transcript.rewrite import splice_parent

    assert splice_parent(line, "new") is None


def test_splice_parent_keeps_the_other_bytes():
    from occd.transcript.rewrite import splice_parent

    line = b'{"type":"message","id":"a","parentId":"p","message":{"content":"caf\xc3\xa9","n":1.0e2}}'
    assert splice_parent(line, "b") == b'{"type":"message","id":"a","parentId":"b","message":{"content":"caf\xc3\xa9","n":1.0e2}}\n'
    assert splice_parent(line, None) == b'{"type":"message","id":"a","parentId":null,"message":{"content":"caf\xc3\xa9","n":1.0e2}}\n'


def test_escaped_non_ascii_is_re_serialized_when_touched(tmp_path):
    """A touched line is written with non-ASCII text unescaped (the issue's rule for re-serialized entries): a
    reparented line with \\u escapes is parsed and re-serialized, not spliced; untouched lines keep theirs."""
    src = tmp_path / "s.jsonl"
    lines = [
        b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}',
        b'{"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{"role":"user","content":"d\\u00e9j\\u00e0"}}',
        b'{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"stopReason":"toolUse"}}',
        b'{"type":"message","id":"r1","parentId":"a1","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1",'
        b'"toolName":"read","content":[{"type":"text","text":"x"}],"isError":false}}',
        b'{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":'
        b'[{"type":"text","text":"caf\\u00e9"}],"stopReason":"stop"}}',
    ]
    src.write_bytes(b"\n".join(lines) + b"\n")
    t = scan(src)
    plan = plan_strip(t, 0, 0)
    buf = io.BytesIO()
    rewrite(t, buf, remove=plan.remove, edits=plan.transforms())
    out = buf.getvalue().splitlines()
    assert out[1] == lines[1]  # untouched: byte for byte, escapes and all
    assert out[2] == '{"type":"message","id":"a2","parentId":"u1","timestamp":"t","message":{"role":"assistant",' \
        '"content":[{"type":"text","text":"café"}],"stopReason":"stop"}}'.encode()
