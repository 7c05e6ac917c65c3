"""The cleaner commands end to end on a file-era state in tmp: list, info, edit, clone, restore."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.transcript import scan, synth


def make_state(home: Path, sessions: dict[str, dict] | None = None, agent: str = "main") -> Path:
    """A file-era OpenClaw state: agents/<agent>/sessions/sessions.json + transcripts made by synth."""
    state = home / ".openclaw"
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    index = {}
    old = time.time() - 3600
    for key, opts in (sessions or {"agent:main:main": {}}).items():
        opts = dict(opts)
        compactions = opts.pop("compaction_count", 0)
        info = synth.generate_transcript(sdir, **opts)
        os.utime(info.path, (old, old))
        index[key] = {"sessionId": info.id, "sessionFile": str(info.path), "updatedAt": int(old * 1000),
                      "compactionCount": compactions, "model": "claude-opus-4-6", "modelProvider": "anthropic",
                      "chatType": "direct", "someFutureField": {"kept": True}}
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return state


def run(*args, input=None):
    r = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return r


def only_session(state: Path, agent="main"):
    idx = json.loads((state / "agents" / agent / "sessions" / "sessions.json").read_text())
    (entry,) = idx.values()
    return entry["sessionId"], Path(entry["sessionFile"])


def test_list_json_and_human(isolated_env):
    make_state(isolated_env, {"agent:main:main": {"turns": 12, "seed": 3},
                              "agent:main:telegram:dm:42": {"turns": 4, "seed": 4}})
    r = run("list", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["sessions"]
    assert len(rows) == 2
    assert {row["key"] for row in rows} == {"agent:main:main", "agent:main:telegram:dm:42"}
    assert all(row["tokens"] and row["tokensSource"] == "usage" for row in rows)
    r = run("list")
    assert r.exit_code == 0 and "agent:main:main" in r.output


def test_edit_strips_keeps_backup_and_restore_undoes(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 40, "seed": 5, "thinking": True}})
    sid, path = only_session(state)
    original = path.read_bytes()
    os.chmod(path, 0o600)
    r = run("edit", sid[:8], "--strip-tools=aggressive", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["success"] and res["mode"] == "edit" and res["sessionId"] == sid
    st = res["statistics"]
    assert st["toolCallsRemoved"] > 0 and st["sizeAfter"] < st["sizeOriginal"]
    assert st["toolCallsOriginal"] == st["toolCallsRemoved"] + st["toolCallsTruncated"] + st["toolCallsPreserved"]
    backup = Path(res["backupPath"])
    assert backup.read_bytes() == original and backup.name == f"{path.stem}.backup.1.jsonl"
    assert (path.stat().st_mode & 0o777) == 0o600
    assert scan(path).session_id == sid
    # a second run with the same preset changes nothing and writes nothing
    before = path.read_bytes()
    r = run("edit", sid, "--strip-tools=aggressive", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["changed"] is False
    assert path.read_bytes() == before and not (path.parent / f"{path.stem}.backup.2.jsonl").exists()
    # restore puts the original back and keeps the edited version as a new backup (undoable)
    r = run("restore", sid[:10], "--json")
    assert r.exit_code == 0, r.output
    assert path.read_bytes() == original
    assert Path(json.loads(r.stdout)["backupPath"]).read_bytes() == before
    # backups are never listed as sessions
    rows = json.loads(run("list", "--json").stdout)["sessions"]
    assert [row["id"] for row in rows] == [sid]


def test_edit_records_in_ledger(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 30}})
    sid, _ = only_session(state)
    assert run("edit", "--strip-tools=extreme").exit_code == 2  # which session? never guessed
    assert run("edit", sid, "--strip-tools=extreme").exit_code == 0
    from occd.ledger import Ledger

    with Ledger.open() as led:
        acts = led.history(kind="edit")
    assert len(acts) == 1 and acts[0]["outcome"] == "ok" and acts[0]["trigger"] == "manual"
    assert acts[0]["backup_path"]


def test_extreme_leaves_no_tool_calls(isolated_env, oracle):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 25, "images": True, "compactions": 1,
                                                          "branch": True, "custom": True}})
    sid, path = only_session(state)
    orig = isolated_env / "orig.jsonl"
    orig.write_bytes(path.read_bytes())
    assert run("edit", sid, "--strip-tools=extreme").exit_code == 0
    chk = oracle.check(path)
    assert chk["ok"] and chk["toolCalls"] == 0 and chk["orphanResults"] == 0, chk
    cmp = oracle.compare(orig, path)
    assert cmp["ok"], cmp


def test_session_without_tools_is_byte_identical(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 8, "tools_per_turn": 0}})
    sid, path = only_session(state)
    before = path.read_bytes()
    r = run("edit", sid, "--strip-tools=extreme", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["changed"] is False
    assert path.read_bytes() == before


def test_clone_registers_new_session(isolated_env, oracle):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 20}})
    sid, path = only_session(state)
    before = path.read_bytes()
    r = run("clone", sid[:6], "--strip-tools", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["mode"] == "clone" and res["sourceSessionId"] == sid and res["clonedSessionId"] != sid
    new = Path(res["clonedSessionPath"])
    assert scan(new).header["parentSession"] == str(path)
    assert path.read_bytes() == before  # the source is never changed
    idx = json.loads((path.parent / "sessions.json").read_text())
    assert idx[res["registeredKey"]]["sessionId"] == res["clonedSessionId"]
    assert idx["agent:main:main"]["someFutureField"] == {"kept": True}
    assert oracle.compare(path, new, clone=True)["ok"]
    line = next(x for x in run("list").output.splitlines() if "occd-clone" in x)
    assert line.split()[0] in res["clonedSessionId"]  # the short form shown is a part of the id
    # --no-register: a file only
    r = run("clone", sid, "--no-register", "-o", str(isolated_env / "copy.jsonl"), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["registeredKey"] is None
    assert len(json.loads((path.parent / "sessions.json").read_text())) == 2


def test_busy_session_is_refused_with_75(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 10}})
    sid, path = only_session(state)
    os.utime(path)  # changed just now
    before = path.read_bytes()
    r = run("edit", sid, "--strip-tools")
    assert r.exit_code == 75 and "in use" in r.output
    assert path.read_bytes() == before
    assert run("edit", sid, "--strip-tools", "--force").exit_code == 0


def test_open_tool_call_is_refused_even_with_force(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 10, "open_call": True, "plain_every": 0}})
    sid, path = only_session(state)
    before = path.read_bytes()
    r = run("edit", sid, "--strip-tools", "--force")
    assert r.exit_code == 75
    assert path.read_bytes() == before


def test_malformed_lines_refused_unless_dropped(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 30}})
    sid, path = only_session(state)
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn')  # a torn last line after a crash
    os.utime(path, (time.time() - 3600,) * 2)
    before = path.read_bytes()
    r = run("edit", sid, "--strip-tools")
    assert r.exit_code == 1 and "Failed to parse session file (line" in r.output
    assert path.read_bytes() == before
    info = json.loads(run("info", sid, "--json").stdout)
    assert info["analysis"]["malformedLines"]
    r = run("edit", sid, "--strip-tools", "--drop-malformed", "--json")
    assert r.exit_code == 0, r.output
    assert b"torn" not in path.read_bytes() and b"torn" in Path(json.loads(r.stdout)["backupPath"]).read_bytes()


def test_a_rewrite_that_would_break_the_tree_is_refused(isolated_env, monkeypatch):
    """The safety net: the new file is scanned and checked before the rename. A rewrite that loses an entry other
    entries point at (a bug occd must never ship) is refused with INVARIANT_VIOLATION; the original, its mtime
    and the directory are left exactly as they were (no backup, no temp file)."""
    import occd.transcript

    state = make_state(isolated_env, {"agent:main:main": {"turns": 30}})
    sid, path = only_session(state)
    original, mtime = path.read_bytes(), path.stat().st_mtime_ns
    real = occd.transcript.rewrite

    def losing_a_parent(t, out, **kw):
        buf = io.BytesIO()
        real(t, buf, **kw)
        lines = buf.getvalue().splitlines(keepends=True)
        del lines[3]  # a message that the next entry names as its parent
        out.write(b"".join(lines))
        return sum(map(len, lines))

    monkeypatch.setattr(occd.transcript, "rewrite", losing_a_parent)
    r = run("edit", sid, "--strip-tools=extreme", "--json")
    assert r.exit_code == 1
    assert json.loads(r.stdout)["error"]["code"] == "INVARIANT_VIOLATION"
    assert path.read_bytes() == original and path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(["sessions.json", path.name])


def test_array_and_object_ids_do_not_crash(isolated_env):
    """Entries whose id or references are JSON arrays/objects (wrong types: they name no entry, as in OpenClaw's
    Map) are read and stripped like the rest: no traceback, the odd line kept byte for byte."""
    state = make_state(isolated_env, {"agent:main:main": {"turns": 30}})
    sid, path = only_session(state)
    last = scan(path).entries[-1].id
    odd = [b'{"type":"custom","id":{"x":1},"parentId":["p"],"customType":"odd","data":{}}',
           b'{"type":"label","id":["y"],"parentId":"%s","targetId":{"a":1},"label":"odd"}' % last.encode()]
    with open(path, "ab") as fh:
        fh.write(b"\n".join(odd) + b"\n")
    os.utime(path, (time.time() - 3600,) * 2)
    p = subprocess.run([sys.executable, "-m", "occd", "info", sid, "--json"], capture_output=True, text=True)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "occd", "edit", sid, "--strip-tools=extreme", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    after = path.read_bytes()
    assert all(line in after.split(b"\n") for line in odd)
    assert b'"toolCall"' not in after


@pytest.mark.parametrize("args,code,text", [
    (["info", "zzzz"], 1, "Session 'zzzz' not found"),
    (["edit", "zzzz", "--strip-tools"], 1, "Session 'zzzz' not found"),
    (["edit", "agent:main:main", "--strip-tools=nope"], 1, "Unknown preset 'nope'"),
    (["edit", "--strip-tools"], 2, "needs the session"),
    (["edit", "--strip-tools", "01a2ffff"], 2, "looks like a session id"),
    (["list", "--agent", "ghost"], 1, "Agent 'ghost' not found"),
    (["restore", "PLACEHOLDER"], 1, "No backup found"),
    (["edit", "--bogus"], 2, "No such option"),
])
def test_errors_are_one_line_with_exit_codes(isolated_env, args, code, text):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 5}})
    sid, _ = only_session(state)
    args = [sid if a == "PLACEHOLDER" else a for a in args]
    p = subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True)
    assert p.returncode == code, p.stderr
    assert text in p.stderr
    assert "Traceback" not in p.stderr


def test_ambiguous_prefix_lists_candidates(isolated_env):
    state = make_state(isolated_env, {"agent:main:a": {"session_id": "abc11111-0000-7000-8000-000000000001"},
                                      "agent:main:b": {"session_id": "abc22222-0000-7000-8000-000000000002"}})
    r = run("info", "abc", "--json")
    assert r.exit_code == 1
    err = json.loads(r.stdout)
    assert err["success"] is False and err["error"]["code"] == "AMBIGUOUS_SESSION"
    assert "abc11111" in err["error"]["hint"] and "abc22222" in err["error"]["hint"]


def test_database_era_refuses_writes(isolated_env):
    """A database-era agent (2026.8+) is read-only for occd: edit refuses and names OpenClaw's command."""
    from tests.statefactory import DbState

    st = DbState(isolated_env / ".openclaw")
    st.add_session("agent:main:main", session_id="0199aaaa-0000-7000-8000-000000000001")
    r = run("edit", "0199aaaa", "--strip-tools")
    assert r.exit_code == 1
    assert "openclaw sessions compact" in r.output or "database" in r.output


def test_session_key_names_its_agent(isolated_env):
    """`occd info agent:research:main` finds the session in agent research without --agent."""
    make_state(isolated_env, {"agent:research:main": {"turns": 6, "seed": 3}}, agent="research")
    (isolated_env / ".openclaw" / "agents" / "main" / "sessions").mkdir(parents=True)
    r = run("info", "agent:research:main", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["agent"] == "research"
