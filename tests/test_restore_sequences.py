"""Issue 23, items 1 and 3: restore never drops newer turns, and every command shows the restored file's figure
at once (edit → restore → restore --backup 2), in sequences as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from click.testing import CliRunner

from occd.cli.main import cli
from tests.statefactory import FileState, message


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def jrun(*args):
    r = run(*args, "--json")
    return r, json.loads(r.stdout) if r.stdout.strip() else None


def append_turns(path: Path, n: int, usage: int = 30_000) -> None:
    """n turns as OpenClaw appends them: a user message and the reply (with usage), chained to the leaf."""
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    parent = last.get("id")
    with open(path, "ab") as fh:
        for i in range(n):
            u = message("user", f"new question {i}", id=f"nu{i:06d}", parent=parent)
            a = message("assistant", f"new answer {i}", id=f"na{i:06d}", parent=u["id"],
                        usage={"input": usage + i, "output": 10, "cacheRead": 0, "cacheWrite": 0,
                               "totalTokens": usage + i + 10})
            fh.write(orjson.dumps(u) + b"\n" + orjson.dumps(a) + b"\n")
            parent = a["id"]


def _session(home: Path):
    fs = FileState(home / ".openclaw")
    return fs, fs.add_session(turns=40, seed=5, tools_per_turn=2)


# ---- item 1 -----------------------------------------------------------------------------------------------

def test_restore_refuses_to_drop_turns_added_since_the_backup(isolated_env):
    fs, s = _session(isolated_env)
    sid = s.session_id
    assert run("edit", sid, "--strip-tools", "--force").exit_code == 0
    append_turns(s.path, 4)                                  # OpenClaw: 4 turns on the stripped session
    live = s.path.read_bytes()
    r = run("restore", sid, "--backup", "1", "--force")      # --force is about idleness only
    assert r.exit_code == 1
    assert "4 turn(s)" in r.stderr and "8 entries" in r.stderr and "--discard-newer" in r.stderr
    assert s.path.read_bytes() == live                       # nothing changed
    r, data = jrun("restore", sid, "--force")                # the newest backup is backup 1 too
    assert r.exit_code == 1 and data["error"]["code"] == "NEWER_ENTRIES"
    assert s.path.read_bytes() == live
    # the user names what happens to them
    r, data = jrun("restore", sid, "--backup", "1", "--force", "--discard-newer")
    assert r.exit_code == 0, r.output
    assert data["discardedTurns"] == 4 and data["discardedEntries"] == 8 and data["backupPinned"]
    pinned = Path(data["backupPath"])
    assert pinned.read_bytes() == live and ".pinned." in pinned.name
    b = json.loads(run("backups", sid, "--json").stdout)["backups"]
    assert any(x["pinned"] and x["path"] == str(pinned) for x in b)
    assert "pinned" in run("backups", sid).output
    # later edits and restores rotate the pool of backups out; the pinned one stays
    for _ in range(8):
        assert run("edit", sid, "--strip-tools=extreme", "--force").exit_code == 0
        assert run("restore", sid, "--force").exit_code == 0
    assert pinned.read_bytes() == live
    b = json.loads(run("backups", sid, "--json").stdout)["backups"]
    assert sum(1 for x in b if not x["pinned"]) == 5 and sum(1 for x in b if x["pinned"]) == 1
    # pruning (the daemon's daily job prunes with the same function) never removes it
    from occd.actions.backups import prune

    prune(s.path, 0)
    assert pinned.read_bytes() == live
    assert [x["pinned"] for x in json.loads(run("backups", sid, "--json").stdout)["backups"]] == [True]
    # and the turns are there to be had back
    r = run("restore", sid, "--backup", pinned.name.split(".backup.")[1].split(".")[0], "--force")
    assert r.exit_code == 0 and s.path.read_bytes() == live


def test_restore_without_newer_turns_needs_no_flag(isolated_env):
    fs, s = _session(isolated_env)
    sid = s.session_id
    assert run("edit", sid, "--strip-tools", "--force").exit_code == 0
    assert run("restore", sid, "--force").exit_code == 0            # the stripped entries are not "newer"
    assert run("restore", sid, "--backup", "2", "--force").exit_code == 0
    names = [Path(x["path"]).name for x in json.loads(run("backups", sid, "--json").stdout)["backups"]]
    assert not any(".pinned." in n for n in names)


# ---- item 3 -----------------------------------------------------------------------------------------------

def _figures(sid: str) -> dict:
    """(tokens, source) of session `sid` as list, info, status and sessions show it (--json)."""
    out = {}
    row = next(x for x in json.loads(run("list", "--json").stdout)["sessions"] if x["id"] == sid)
    out["list"] = (row["tokens"], row["tokensSource"])
    ctx = json.loads(run("info", sid, "--json").stdout)["context"]
    out["info"] = (ctx["tokens"], ctx["source"])
    st = json.loads(run("status", "--json").stdout)
    row = next(x for a in st["agents"] for x in a["biggest"] if x["sessionId"] == sid)
    out["status"] = (row["contextTokens"], row["tokensSource"])
    row = next(x for x in json.loads(run("sessions", "--json").stdout)["sessions"] if x["id"] == sid)
    out["sessions"] = (row["contextTokens"], row["contextSource"])
    return out


def test_restore_refreshes_the_figure_everywhere(isolated_env):
    fs, s = _session(isolated_env)
    sid = s.session_id
    assert run("run", "--once").exit_code == 0   # the daemon has scanned it (status and sessions have it)
    start = _figures(sid)
    assert {v[1] for v in start.values()} == {"usage"}
    r, e = jrun("edit", sid, "--strip-tools=aggressive", "--force")
    stripped = e["statistics"]["tokensAfterEstimate"]
    after_edit = _figures(sid)
    assert set(after_edit.values()) == {(stripped, "estimate")}, after_edit
    assert run("restore", sid, "--force").exit_code == 0
    assert set(_figures(sid).values()) == {start["list"]}        # the original, measured again
    assert run("restore", sid, "--backup", "2", "--force").exit_code == 0
    again = _figures(sid)
    assert set(again.values()) == {(stripped, "estimate")}, again  # the stripped file: its estimate, not the stale usage
    assert "~" in run("list").output
