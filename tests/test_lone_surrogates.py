"""Issue 24 item 2: lone surrogate escapes (`"\\ud83d"`: valid JSON that Node's JSON.stringify writes when a string
is cut inside an emoji, and that OpenClaw's loader accepts). The class: a lone high, a lone low and a reversed pair,
in values and in keys, in a user message, a tool result, a label, and in sessions.json. occd parses what OpenClaw
parses, keeps the bytes (unchanged lines byte-identical, changed entries keep the escape), `info` does not call it
malformed, `edit` works, the daemon strips without failures, and the agent stays indexed. `--drop-malformed`
never breaks the parent chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from occd.transcript import jsontext
from tests.test_daemon_jobs import ctx_for, state_with

KEY = "agent:main:main"
VARIANTS = {"high": "\\ud83d", "low": "\\ude00", "reversed": "\\ude00\\ud83d", "high-at-end": "cut here \\ud83d"}


def occd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def _plant(path: Path, esc: str) -> list[bytes]:
    """Put `esc` into a user message, every tool result (a strip truncates some), a recent assistant text, an
    entry key and a new label entry; returns the planted lines (as written)."""
    lines = path.read_bytes().splitlines(keepends=True)
    e = esc.encode()
    done = {"user": False, "result": False}
    out = []
    for i, ln in enumerate(lines):
        if not done["user"] and b'"role":"user","content":"' in ln:
            ln = ln.replace(b'"role":"user","content":"', b'"role":"user","content":"' + e, 1)
            ln = ln.replace(b'{"type":"message",', b'{"type":"message","meta' + e + b'":1,', 1)
            done["user"] = True
        elif b'"role":"toolResult"' in ln and b'"text":"' in ln:  # every result: some are truncated, some removed
            ln = ln.replace(b'"text":"', b'"text":"' + e, 1)
            done["result"] = True
        out.append(ln)
    # the last assistant text (a kept turn: never changed by the strip)
    for i in range(len(out) - 1, 0, -1):
        if b'"role":"assistant"' in out[i] and b'"type":"text","text":"' in out[i]:
            out[i] = out[i].replace(b'"type":"text","text":"', b'"type":"text","text":"' + e, 1)
            break
    last = jsontext.loads(out[-1])
    label = {"type": "label", "id": "lab00001", "parentId": last["id"], "timestamp": last["timestamp"],
             "targetId": last["id"], "label": "LABEL"}
    out.append(json.dumps(label, separators=(",", ":")).replace("LABEL", "tag " + esc).encode() + b"\n")
    assert all(done.values())
    path.write_bytes(b"".join(out))
    return [ln for ln in out if e in ln]


@pytest.fixture
def planted(isolated_env, request):
    esc = request.param
    state = state_with(isolated_env, {KEY: {"turns": 40, "tools_per_turn": 3}}, window=150_000)
    sdir = state / "agents/main/sessions"
    (path,) = sdir.glob("*.jsonl")
    lines = _plant(path, esc)
    idx = sdir / "sessions.json"
    text = idx.read_text().replace('"model":', f'"label": "cut {esc}", "origin": {{"label": "x{esc}"}}, "model":', 1)
    idx.write_text(text)
    t = path.stat().st_mtime - 600
    os.utime(path, (t, t))
    return state, path, lines, esc


def test_loads_parses_what_json_parse_parses():
    for esc in VARIANTS.values():
        raw = f'{{"k{esc}":"v{esc}","n":[1,2]}}'.encode()
        o = jsontext.loads(raw)
        assert jsontext.dumps(o) == raw  # the same escapes back, valid UTF-8
        raw.decode("utf-8")
    for bad in (b'{"a":NaN}', b'{"a":Infinity}', b'\xef\xbb\xbf{}', b'{"a":"\xff"}', b'{"a":', b'{"a":"\\ud83"}'):
        with pytest.raises(ValueError):
            jsontext.loads(bad)


@pytest.mark.parametrize("planted", list(VARIANTS.values()), ids=list(VARIANTS), indirect=True)
@pytest.mark.slow
def test_info_list_edit_keep_the_bytes(planted):
    state, path, planted_lines, esc = planted
    before = path.read_bytes()
    r = occd("info", KEY, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert not info["analysis"].get("malformedLines") if "analysis" in info else "malformedLines" not in r.stdout, r.stdout
    for human in (["info", KEY], ["list"], ["sessions"], ["status"]):
        r = occd(*human)
        assert r.returncode == 0 and "malformed" not in r.stdout.lower() and "Traceback" not in r.stderr, (human, r)
    r = occd("list", "--json")
    assert r.returncode == 0 and len(json.loads(r.stdout)["sessions"]) == 1, r.stdout + r.stderr
    assert esc in r.stdout  # the JSON keeps the data, escaped as JSON does

    r = occd("edit", KEY, "--strip-tools=aggressive", "--force", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    after = path.read_bytes()
    assert after != before
    after.decode("utf-8")  # never bytes that are not UTF-8
    kept = set(after.splitlines(keepends=True))
    # every planted line the strip did not change is byte-identical; the changed one keeps its escape
    unchanged = [ln for ln in planted_lines if b'"role":"toolResult"' not in ln]
    assert len(unchanged) == 3 and all(ln in kept for ln in unchanged)
    results = [ln for ln in kept if b'"role":"toolResult"' in ln]
    changed = [ln for ln in results if ln not in set(before.splitlines(keepends=True))]
    assert changed and all(esc.encode() in ln for ln in results)  # truncated results keep the escape


@pytest.mark.oracle
@pytest.mark.parametrize("planted", ["\\ud83d", "\\ude00\\ud83d"], indirect=True)
def test_the_stripped_file_loads_in_openclaw(planted, oracle, tmp_path):
    state, path, _lines, _esc = planted
    orig = tmp_path / "orig.jsonl"
    orig.write_bytes(path.read_bytes())
    assert oracle.check(orig)["ok"]
    r = occd("edit", KEY, "--strip-tools=aggressive", "--force")
    assert r.returncode == 0, r.stderr
    assert oracle.check(path)["ok"] and oracle.compare(orig, path)["ok"]


@pytest.mark.parametrize("planted", ["\\ud83d"], indirect=True)
def test_daemon_strips_without_failures_and_the_agent_is_indexed(planted):
    from occd.jobs import run_cycle
    from occd.ledger import Ledger

    state, path, _lines, esc = planted
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        for _ in range(4):
            res = run_cycle(ctx, ["scan", "apply"])
        acts = led.history(kind="strip")
        assert [a["outcome"] for a in acts] == ["ok"], acts
        assert res["scan"][1].get("sessions", 1) >= 1
    assert esc.encode() in path.read_bytes()


def _chain(path: Path) -> tuple[bool, int]:
    """(the path from the leaf reaches the first entry, user messages on it): what a person sees."""
    objs = [jsontext.loads(ln) for ln in path.read_bytes().splitlines()[1:] if ln.strip()]
    objs = [o for o in objs if isinstance(o, dict) and "id" in o]
    by = {o["id"]: o for o in objs}
    users, cur, last = 0, objs[-1], None
    while cur is not None:
        users += (cur.get("message") or {}).get("role") == "user"
        last, cur = cur, by.get(cur.get("parentId"))
    return last is objs[0], users


@pytest.mark.parametrize("how", ["invalid-json", "torn-quote", "not-object", "unreadable-id"])
@pytest.mark.slow
def test_drop_malformed_never_breaks_the_parent_chain(isolated_env, how):
    state = state_with(isolated_env, {KEY: {"turns": 30, "tools_per_turn": 2}}, window=150_000)
    (path,) = (state / "agents/main/sessions").glob("*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    i = [n for n, ln in enumerate(lines) if b'"role":"user"' in ln][10]
    chain_before = _chain(path)
    assert chain_before[0]
    o = orjson.loads(lines[i])
    if how == "invalid-json":
        lines[i] = lines[i].rstrip(b"\n")[:-1] + b",}\n"          # a trailing comma: JSON.parse refuses it
    elif how == "torn-quote":
        lines[i] = lines[i][: len(lines[i]) // 2] + b"\n"
    elif how == "not-object":
        lines[i] = b"[" + lines[i].rstrip(b"\n") + b"]\n"
    else:
        lines[i] = lines[i][:lines[i].index(b'"id":"') + 8] + b"\n"   # cut inside its id: which entry was it?
    path.write_bytes(b"".join(lines))
    os.utime(path, (1, 1))
    r = occd("edit", KEY, "--strip-tools=aggressive", "--force", "--drop-malformed", "--json")
    if r.returncode == 0:
        # the entry is gone and its children hang on its parent: one fewer on the path, none lost before it
        assert _chain(path) == (True, chain_before[1] - 1), (how, _chain(path), chain_before)
        assert o["id"].encode() not in b"".join(ln for ln in path.read_bytes().splitlines() if b'"parentId"' in ln
                                                 and b'"parentId":"' + o["id"].encode() in ln)
    else:
        assert r.returncode == 1 and "parent" in (r.stdout + r.stderr), r.stdout + r.stderr
        assert b"".join(lines) == path.read_bytes()
    assert how != "invalid-json" or r.returncode == 0


@pytest.mark.parametrize("esc", ["\\ud83d", "\\ude00\\ud83d"])
@pytest.mark.slow
def test_a_session_key_with_a_lone_surrogate_is_indexed_recorded_and_stripped(isolated_env, esc):
    """The escape in a sessions.json key (and so in the ledger's session_key): the agent is indexed, the daemon's
    scan records it (SQLite cannot store a lone surrogate: it is kept as its escape), the strip happens."""
    state = state_with(isolated_env, {"agent:main:chat": {"turns": 40, "tools_per_turn": 3}}, window=150_000)
    idx = state / "agents/main/sessions/sessions.json"
    idx.write_text(idx.read_text().replace('"agent:main:chat"', f'"agent:main:chat{esc}"'))
    r = occd("run", "--once", "--act", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = occd("history", "--json")
    assert r.returncode == 0 and '"strip"' in r.stdout and '"ok"' in r.stdout and "failed" not in r.stdout, r.stdout
    r = occd("list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["sessions"][0]["key"] == "agent:main:chat" + json.loads(
        f'"{esc}"'), r.stdout


@pytest.mark.parametrize("planted", ["\\ud83d", "\\ude00"], indirect=True)
def test_rotation_and_clone_carry_the_escape(planted):
    """The seed quotes the last exchanges (which carry the escape); the index is rewritten with a label that
    carries it; a clone copies it: every file stays UTF-8 with the escape, never bytes that are not UTF-8."""
    state, path, _lines, esc = planted
    sdir = path.parent
    r = occd("clone", KEY, "--strip-tools=aggressive", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = occd("rotate", KEY, "--force", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    for p in [*sdir.glob("*.jsonl"), sdir / "sessions.json", *(sdir / "archive").glob("*.jsonl")]:
        data = p.read_bytes()
        data.decode("utf-8")
        for ln in data.splitlines():
            if ln.strip() and p.suffix == ".jsonl":
                jsontext.loads(ln)
    assert esc.encode() in (sdir / "sessions.json").read_bytes()
    new = json.loads(occd("list", "--json").stdout)["sessions"]
    seeded = [s for s in new if s["key"] == KEY]
    assert seeded and esc.encode() in Path(seeded[0]["path"]).read_bytes()
