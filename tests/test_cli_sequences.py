"""Issue 23, items 4, 5, 7 and 9: command sequences as a user types them — the id a table shows works in every
command (history, rotate --undo), dry runs write nothing (refused ones neither), a rotation undone gives the
index entry and the transcript's times back exactly, and a clone written outside OpenClaw's state is not one of
the agent's sessions."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from occd.cli.main import cli
from tests.statefactory import FileState


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def jrun(*args):
    r = run(*args, "--json")
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def _state(home: Path, **kw) -> tuple[FileState, object]:
    fs = FileState(home / ".openclaw")
    return fs, fs.add_session(turns=kw.pop("turns", 30), seed=kw.pop("seed", 3), tools_per_turn=2, **kw)


def _shown_id(cmd: tuple[str, ...], sid: str) -> str:
    """The id a table of `cmd` shows for session `sid`."""
    out = run(*cmd).output
    for line in out.splitlines():
        for w in line.split():
            if len(w) >= 4 and w in sid and not sid.startswith(w):
                return w
    raise AssertionError(f"{sid} not shown by {cmd}:\n{out}")


# ---- item 4: one id resolution ---------------------------------------------------------------------------------

def test_history_takes_the_id_the_tables_show(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    shown = _shown_id(("list",), s.session_id)
    in_history = _shown_id(("history",), s.session_id)
    for ref in (shown, in_history, s.session_id[9:23], s.session_id, s.key):
        r, data = jrun("history", "--session", ref)
        assert r.exit_code == 0 and data["total"] == 1, (ref, r.output)
        assert data["actions"][0]["sessionId"] == s.session_id
        assert "No actions recorded" not in run("history", "--session", ref).output
    r, data = jrun("history", "--session", "ffff-ffff-nothing")   # issue 32 §11: not found, as info says
    assert r.exit_code == 1 and data["error"]["code"] == "SESSION_NOT_FOUND"


def test_history_ambiguous_part_lists_the_matches(isolated_env):
    fs = FileState(isolated_env / ".openclaw")
    a = fs.add_session("agent:main:a", session_id="01a20771-bb86-7d1a-8000-000000000001", turns=4)
    b = fs.add_session("agent:main:b", session_id="01a20771-bb86-7d1a-8000-000000000002", turns=4)
    for s in (a, b):
        assert run("edit", s.session_id, "--strip-tools=extreme", "--force").exit_code == 0
    r = run("history", "--session", "bb86-7d1a")
    assert r.exit_code == 1 and a.session_id in r.stderr and b.session_id in r.stderr


def test_rotate_undo_takes_the_old_or_new_id_from_status_rotations(isolated_env):
    for which in ("old", "new"):
        home = isolated_env / which
        os.environ["OPENCLAW_STATE_DIR"] = str(home / ".openclaw")
        os.environ["OCCD_HOME"] = str(home / "occd-home")
        fs, s = _state(home, compaction_count=4)
        r, res = jrun("rotate", s.key, "--force")
        assert r.exit_code == 0, r.output
        rot = run("status", "--rotations").output
        sid = s.session_id if which == "old" else res["newSessionId"]
        shown = next(w for line in rot.splitlines() for w in line.split() if w in sid and not sid.startswith(w)
                     and len(w) >= 4)
        r = run("rotate", "--undo", shown)
        assert r.exit_code == 0, (which, shown, rot, r.output)
        assert fs.read_index()[s.key]["sessionId"] == s.session_id


# ---- item 5: dry runs write nothing --------------------------------------------------------------------------

def _tree(*roots: Path) -> dict:
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for n in files + dirs:
                if n.endswith("-shm"):
                    continue  # SQLite's shared-memory index: every reader of a WAL database writes its read marks
                p = Path(dirpath) / n
                st = p.lstat()
                out[str(p)] = (st.st_size, st.st_mtime_ns, p.read_bytes() if p.is_file() else None)
    return out


def test_dry_runs_write_nothing_even_when_refused(isolated_env, tmp_path):
    fs, s = _state(isolated_env, compaction_count=4)
    idle = fs.add_session("agent:main:idle", turns=20, seed=4)
    assert run("edit", idle.session_id, "--strip-tools", "--force").exit_code == 0  # a ledger exists
    running = fs.add_session("agent:main:running", turns=20, seed=5, open_call=True)
    fs.lock_transcript(running.path)
    torn = fs.add_session("agent:main:torn", turns=20, seed=6, torn="glued")
    roots = (isolated_env, tmp_path / "occd-home", tmp_path / "runtime")
    status0 = run("status", "--json").stdout
    before = _tree(*roots)
    cases = [
        (("edit", running.session_id, "--strip-tools", "--crashed-run", "--dry-run"), 75),  # a run holds its lock
        (("edit", running.session_id, "--strip-tools", "--crashed-run", "--dry-run", "--json"), 75),
        (("edit", torn.session_id, "--strip-tools", "--dry-run"), 1),       # refused: a malformed line
        (("edit", running.session_id, "--strip-tools", "--dry-run"), None),
        (("edit", s.session_id, "--strip-tools", "--dry-run"), 0),
        (("edit", s.session_id, "--strip-tools=extreme", "--dry-run", "--json"), 0),
        (("edit", idle.session_id, "--strip-tools", "--dry-run"), 0),     # nothing left to strip
        (("rotate", s.key, "--dry-run"), 0),
        (("rotate", s.key, "--dry-run", "--json"), 0),
        (("rotate", running.key, "--dry-run"), None),
        (("service", "install", "--dry-run"), None),
        (("service", "uninstall", "--dry-run"), None),
    ]
    for args, code in cases:
        r = CliRunner().invoke(cli, list(args))
        if code is not None:
            assert r.exit_code == code, (args, r.output)
        after = _tree(*roots)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        assert not changed, (args, changed)
    assert run("status", "--json").stdout == status0
    r, data = jrun("history")
    assert {a["sessionId"] for a in data["actions"]} == {idle.session_id}


# ---- item 7: rotate --undo gives everything back ---------------------------------------------------------------

def test_rotate_then_undo_gives_the_index_entry_and_the_file_times_back(isolated_env):
    fs, s = _state(isolated_env, compaction_count=4,
                   entry={"totalTokens": 123_456, "totalTokensFresh": True, "inputTokens": 99, "label": "mine",
                          "contextBudgetStatus": {"estimatedPromptTokens": 150_000}})
    past = time.time() - 7200
    os.utime(s.path, (past - 50, past))
    st0 = os.stat(s.path)
    entry0 = fs.read_index()[s.key]
    assert run("rotate", s.key, "--force").exit_code == 0
    assert fs.read_index()[s.key]["sessionId"] != s.session_id
    time.sleep(0.01)
    r = run("rotate", "--undo", s.key)
    assert r.exit_code == 0, r.output
    assert fs.read_index()[s.key] == entry0                       # every field: tokens, updatedAt, ...
    st1 = os.stat(s.path)
    assert (st1.st_mtime_ns, st1.st_atime_ns) == (st0.st_mtime_ns, st0.st_atime_ns)
    listed = json.loads(run("list", "--json").stdout)["sessions"]
    row = next(x for x in listed if x["id"] == s.session_id)
    assert row["tokens"] == 123_456


# ---- item 9: a clone outside OpenClaw's state ------------------------------------------------------------------

def test_clone_written_outside_the_state_is_not_one_of_the_agents_sessions(isolated_env, tmp_path):
    fs, s = _state(isolated_env)
    assert run("run", "--once").exit_code == 0
    st0 = json.loads(run("status", "--json").stdout)
    assert st0["agents"][0]["sessions"] == 1
    out = tmp_path / "elsewhere" / "x.jsonl"
    out.parent.mkdir()
    r = run("clone", s.session_id, "-o", str(out), "--no-register")
    assert r.exit_code == 0 and out.exists(), r.output
    for _ in range(2):  # right after the clone, and after the daemon's next scan
        st = json.loads(run("status", "--json").stdout)
        (agent,) = st["agents"]
        assert agent["sessions"] == 1, agent
        assert [b["sessionId"] for b in agent["biggest"]] == [s.session_id]
        assert run("run", "--once").exit_code == 0
    # a clone in the agent's own folder is one of its sessions
    r, data = jrun("clone", s.session_id)
    assert r.exit_code == 0
    assert json.loads(run("status", "--json").stdout)["agents"][0]["sessions"] == 2
