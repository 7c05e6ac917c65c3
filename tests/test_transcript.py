"""Unit tests of the transcript engine on small hand-written files."""

from __future__ import annotations

import io
import os
import stat

import orjson
import pytest

from occd.errors import BusyError, NotFoundError, ParseError, WriteError
from occd.transcript import (analyze, atomic_write, check_invariants, clone_header, context_tokens,
                             context_tokens_from_tail, rewrite, scan, summarize_range)
from occd.transcript.synth import generate_transcript
from occd.transcript.treebuilder import TreeBuilder


def _lines(p):
    return p.read_bytes().split(b"\n")


def test_synth_counts_match_scan(tmp_path):
    info = generate_transcript(tmp_path, turns=12, thinking=True, custom=True, images=True, seed=3)
    t = scan(info.path)
    a = analyze(t)
    assert a["entries"] == info.entries and a["fileSize"] == info.size == info.path.stat().st_size
    assert a["toolCalls"] == info.tool_calls == a["toolResults"]
    assert a["turns"] == info.turns == 12
    assert t.leaf.id == info.leaf_id
    # same arguments, same bytes
    again = generate_transcript(tmp_path / "again.jsonl", turns=12, thinking=True, custom=True, images=True, seed=3)
    assert again.path.read_bytes() == info.path.read_bytes()


def test_target_bytes(tmp_path):
    info = generate_transcript(tmp_path / "big.jsonl", target_bytes=600_000, compactions=1, branch=True)
    assert 600_000 * 0.99 <= info.size < 600_000 * 1.2
    t = scan(info.path)
    assert analyze(t)["compactions"] == 1 and analyze(t)["branchSummaries"] == 1


def test_active_path_turns_and_branch(tmp_path):
    b = TreeBuilder()
    b.model()
    t1 = b.tool_turn("one", calls=2)
    b.user("plain")
    b.assistant("plain answer")
    t3 = b.tool_turn("three")
    # go back to the first turn's final answer and continue there
    b.branch_summary(t1["final"])
    t4 = b.tool_turn("four")
    p = b.write(tmp_path / "s.jsonl")
    t = scan(p)
    path = t.active_path()
    ids = [e.id for e in path]
    assert t3["user"] not in ids and t1["user"] in ids and t4["final"] == ids[-1]
    turns = t.turns(path)
    assert [len(x.call_ids) for x in turns] == [2, 1]
    a = analyze(t)
    assert a["branches"] == 1 and a["turns"] == 2 and a["turnsWithTools"] == 2
    assert a["messagesByRole"]["user"] == 4


def test_malformed_lines_recorded_and_preserved(tmp_path):
    b = TreeBuilder()
    b.model()
    b.tool_turn()
    b.raw(b"{not json")
    b.raw(b"[1,2,3]")
    b.raw(b'{"type":"custom","x":"\xff\xfe"}')
    b.raw(b"")
    b.raw(b'{"type":"x","big":"' + b"a" * 5000 + b'"}')
    b.user("after")
    data = b.to_bytes() + b'{"type":"message","id":"torn'  # crash in the middle of an append
    p = tmp_path / "m.jsonl"
    p.write_bytes(data)
    t = scan(p, max_line_bytes=4096)
    kinds = {m.lineno: m.kind for m in t.malformed}
    assert kinds == {7: "invalid-json", 8: "not-object", 9: "non-utf8", 11: "too-long", 13: "torn"}
    assert analyze(t)["malformedLines"][0] == {"line": 7, "kind": "invalid-json"}
    out = io.BytesIO()
    rewrite(t, out)  # nothing to change: byte-identical, plus the newline the torn line lacked
    assert out.getvalue() == data + b"\n"
    out = io.BytesIO()
    rewrite(t, out, drop_malformed=True)
    got = out.getvalue()
    assert b"not json" not in got and b"\xff" not in got and b"torn" not in got and b"aaaa" not in got
    assert got.endswith(b"\n") and b"\n\n" in got  # the blank line (harmless, OpenClaw skips it) is kept
    assert all(orjson.loads(x) for x in got.splitlines() if x)
    assert check_invariants(p)  # the original has problems ...
    q = tmp_path / "clean.jsonl"
    q.write_bytes(got)
    assert check_invariants(q) == []  # ... the dropped version has none


def test_valid_last_line_without_newline_is_an_entry(tmp_path):
    b = TreeBuilder()
    b.model()
    leaf = b.user("no newline at the end")
    p = tmp_path / "n.jsonl"
    p.write_bytes(b.to_bytes()[:-1])
    t = scan(p)
    assert t.malformed == [] and t.missing_final_newline and t.leaf.id == leaf
    out = io.BytesIO()
    rewrite(t, out)
    assert out.getvalue() == b.to_bytes()
    assert "file does not end with a newline" in check_invariants(t)


@pytest.mark.parametrize("self_loop", [True, False])
def test_parent_cycle_is_detected(tmp_path, self_loop):
    b = TreeBuilder()
    b.add("model_change", {"provider": "a", "modelId": "m"}, eid="aaaaaaaa", parent="bbbbbbbb" if not self_loop else "aaaaaaaa")
    b.add("message", {"message": {"role": "user", "content": "x", "timestamp": 1}}, eid="bbbbbbbb", parent="aaaaaaaa")
    p = b.write(tmp_path / "c.jsonl")
    with pytest.raises(ParseError) as ei:
        scan(p)
    assert ei.value.details["cycle"]
    t = scan(p, check_cycles=False)
    with pytest.raises(ParseError):
        t.active_path()
    assert any("cycle" in x for x in check_invariants(t))


def test_duplicate_ids_later_wins(tmp_path):
    b = TreeBuilder()
    b.add("model_change", {"provider": "a", "modelId": "m"}, eid="00000001")
    b.add("message", {"message": {"role": "user", "content": "first", "timestamp": 1}}, eid="00000002")
    b.add("message", {"message": {"role": "user", "content": "dup", "timestamp": 2}}, eid="00000002", parent="00000001")
    b.add("message", {"message": {"role": "assistant", "content": [{"type": "text", "text": "a"}], "stopReason": "stop"}},
          eid="00000003", parent="00000002")
    t = scan(b.write(tmp_path / "d.jsonl"))
    assert t.duplicate_ids == ["00000002"]
    assert [e.lineno for e in t.active_path()] == [2, 4, 5]
    assert analyze(t)["duplicateIds"] == 1


def test_v1_migration(tmp_path):
    info = generate_transcript(tmp_path / "v1.jsonl", version=1, turns=8, compactions=1, custom=True, seed=2)
    raw = info.path.read_bytes()
    assert b'"id":"' not in raw.split(b"\n", 2)[1]  # really v1: entries have no ids
    t = scan(info.path)
    assert t.version == 1 and t.needs_migration
    ids = [e.id for e in t.entries]
    assert len(set(ids)) == len(ids) and all(len(i) == 8 for i in ids)
    assert [e.parent for e in t.entries] == [None] + ids[:-1]
    comp = next(e for e in t.entries if e.type == "compaction")
    assert t.get(comp.first_kept).role == "user"
    assert analyze(t)["messagesByRole"].get("custom", 0) > 0  # hookMessage read as custom
    out = io.BytesIO()
    rewrite(t, out)
    lines = out.getvalue().splitlines()
    hdr = orjson.loads(lines[0])
    assert hdr["version"] == 3 and hdr["id"] == info.id
    objs = [orjson.loads(x) for x in lines[1:]]
    assert [o["id"] for o in objs] == ids
    c = next(o for o in objs if o["type"] == "compaction")
    assert c["firstKeptEntryId"] == comp.first_kept and "firstKeptEntryIndex" not in c
    assert b"hookMessage" not in out.getvalue()
    q = tmp_path / "v3.jsonl"
    q.write_bytes(out.getvalue())
    t3 = scan(q)
    assert t3.version == 3 and [e.id for e in t3.entries] == ids and check_invariants(q) == []


def test_v2_hookmessage_and_v4(tmp_path):
    info = generate_transcript(tmp_path / "v2.jsonl", version=2, turns=10, custom=True, branch=True)
    t = scan(info.path)
    assert t.version == 2
    out = io.BytesIO()
    rewrite(t, out)
    got = out.getvalue()
    assert b"hookMessage" not in got and b'"role":"custom"' in got
    # only the header and the hookMessage lines changed
    changed = [i for i, (x, y) in enumerate(zip(info.path.read_bytes().splitlines(), got.splitlines())) if x != y]
    assert changed and changed[0] == 0
    assert all(b"custom" in got.splitlines()[i] for i in changed[1:])
    v4 = generate_transcript(tmp_path / "v4.jsonl", version=4, turns=6)
    t4 = scan(v4.path)
    assert t4.version == 4 and not t4.needs_migration and len(t4.entries[0].id) == 36


def test_empty_sessions(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"")
    t = scan(p)
    assert t.empty and analyze(t)["empty"] and context_tokens(t)["source"] == "empty"
    assert context_tokens_from_tail(p) == (0, "empty")
    assert check_invariants(p) == []
    p.write_bytes(b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n')
    t = scan(p)
    assert t.empty and t.header_ok and analyze(t)["turns"] == 0
    assert context_tokens_from_tail(p) == (0, "empty")
    with pytest.raises(NotFoundError):
        scan(tmp_path / "missing.jsonl")


def test_context_tokens_rules(tmp_path):
    b = TreeBuilder()
    b.model()
    b.user("x" * 400)
    b.assistant("y", usage=5000)                       # usable: 5010
    b.user("z" * 40)                                   # +10
    b.assistant("aborted", usage=9000, stop="aborted")  # skipped for usage, still estimated (+2)
    p = b.write(tmp_path / "u.jsonl")
    t = scan(p)
    ct = context_tokens(t)
    assert ct == {"tokens": 5010 + 10 + 2, "source": "usage", "usageTokens": 5010, "trailingTokens": 12}
    assert context_tokens_from_tail(p) == (5022, "usage")
    assert context_tokens_from_tail(p, window=64) == (5022, "usage")  # block boundaries inside lines
    # no totalTokens: input + output + cacheRead + cacheWrite
    b2 = TreeBuilder()
    b2.user("q")
    a, _ = b2.assistant("r", usage=None)
    b2.lines[-1]["message"]["usage"] = {"input": 100, "output": 20, "cacheRead": 300, "cacheWrite": 4}
    t2 = scan(b2.write(tmp_path / "u2.jsonl"))
    assert context_tokens(t2)["tokens"] == 424
    # no usage at all: an estimate
    b3 = TreeBuilder()
    b3.user("a" * 41)
    b3.assistant("b" * 8, usage=None)
    p3 = b3.write(tmp_path / "u3.jsonl")
    assert context_tokens(scan(p3)) == {"tokens": 11 + 2, "source": "estimate", "usageTokens": 0, "trailingTokens": 13}
    assert context_tokens_from_tail(p3) == (13, "estimate")
    assert context_tokens_from_tail(p3, window=16, max_bytes=32) == (None, "unknown")


def test_context_tokens_respect_compaction(tmp_path):
    b = TreeBuilder()
    b.model()
    u1 = b.user("old " * 100)
    b.assistant("old answer", usage=50000)
    u2 = b.user("kept")
    b.compaction(u2)
    b.user("new question")
    p = b.write(tmp_path / "c.jsonl")
    t = scan(p)
    sent = t.sent_entries()
    assert sent[0].type == "compaction" and [e.id for e in sent[1:]] == [u2, t.leaf.id]
    assert u1 not in [e.id for e in sent]
    assert context_tokens(t)["source"] == "estimate"


def test_incremental_summary_merges(tmp_path):
    info = generate_transcript(tmp_path / "s.jsonl", turns=10, compactions=1)
    full = summarize_range(info.path)
    assert full.end == info.size and full.compactions == 1 and full.entries == info.entries
    # append two more turns (as the writer would) and a torn half line
    data = info.path.read_bytes()
    extra = b"\n".join(generate_lines(9)) + b"\n"
    with open(info.path, "ab") as fh:
        fh.write(extra + b'{"type":"mess')
    inc = full.merge(summarize_range(info.path, full.end))
    assert inc.end == len(data) + len(extra)  # the torn tail is left for the next scan
    scratch = tmp_path / "whole.jsonl"
    scratch.write_bytes(data + extra)
    whole = summarize_range(scratch)
    assert inc.to_json() == whole.to_json()
    assert inc.tokens == context_tokens_from_tail(scratch)[0]
    with pytest.raises(ValueError):
        full.merge(summarize_range(info.path, full.end + 1))


def generate_lines(seed):
    buf = io.BytesIO()
    generate_transcript(buf, turns=2, seed=seed)
    return buf.getvalue().splitlines()[1:]  # without the header


def test_atomic_write_keeps_mode_and_detects_change(tmp_path):
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"old\n")
    os.chmod(p, 0o640)
    st = os.stat(p)
    expect = (st.st_size, st.st_mtime_ns, st.st_ino)
    assert atomic_write(p, lambda fh: fh.write(b"new\n"), expect_stat=expect) == 4
    assert p.read_bytes() == b"new\n" and stat.S_IMODE(os.stat(p).st_mode) == 0o640
    # the source changed after it was read: BusyError, original kept, no temp left
    st = os.stat(p)
    expect = (st.st_size, st.st_mtime_ns, st.st_ino)
    with open(p, "ab") as fh:
        fh.write(b"appended\n")
    with pytest.raises(BusyError):
        atomic_write(p, lambda fh: fh.write(b"newer\n"), expect_stat=expect)
    assert p.read_bytes() == b"new\nappended\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.jsonl"]


def test_atomic_write_oserror_becomes_write_error(tmp_path):
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"keep\n")

    def boom(fh):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteError) as ei:
        atomic_write(p, boom)
    assert "Failed to write" in ei.value.message and "disk space" in ei.value.hint
    assert p.read_bytes() == b"keep\n" and [x.name for x in tmp_path.iterdir()] == ["a.jsonl"]
    with pytest.raises(WriteError):
        atomic_write(tmp_path / "no-such-dir" / "x.jsonl", lambda fh: fh.write(b"x"))


def test_clone_header(tmp_path):
    info = generate_transcript(tmp_path, turns=3)
    t = scan(info.path)
    h = clone_header(t, "new-id")
    out = io.BytesIO()
    rewrite(t, out, header=h)
    lines = out.getvalue().splitlines()
    hdr = orjson.loads(lines[0])
    assert hdr["id"] == "new-id" and hdr["parentSession"] == str(info.path) and hdr["cwd"] == t.header["cwd"]
    assert lines[1:] == info.path.read_bytes().splitlines()[1:]
    q = tmp_path / "clone.jsonl"
    q.write_bytes(out.getvalue())
    assert check_invariants(q, t, clone=True) == []
    assert check_invariants(q, t) == ["header id changed: %s -> new-id" % info.id]


def test_invariants_find_broken_refs(tmp_path):
    b = TreeBuilder()
    b.model()
    u = b.user("x")
    b.label("deadbeef")
    b.compaction("cafebabe")
    b.result("toolu_9999")  # orphan
    b.add("message", {"message": {"role": "user", "content": "y", "timestamp": 1}}, parent="feedface")
    probs = check_invariants(b.write(tmp_path / "b.jsonl"))
    text = "\n".join(probs)
    assert "targetId deadbeef" in text and "firstKeptEntryId cafebabe" in text and "parentId feedface" in text
    del u


def test_iter_objects_keeps_only_json_objects():
    from occd.transcript import iter_objects

    lines = [b'{"type":"session","id":"s"}\n', b"\n", b"   ", b"not json\n", b"[1, 2]\n", b"null\n", b'"text"\n',
             b'{"type":"message","id":"a"}', '{"id":"b"}', b'{"id":"c"']
    assert [o.get("id") for o in iter_objects(lines)] == ["s", "a", "b"]
    assert list(iter_objects([])) == []
    it = iter_objects(iter([b'{"n":1}', b'{"n":2}']))  # lazy: a stream is read as it is consumed
    assert next(it) == {"n": 1}
