"""OpenClaw after 2026.9.6, met on paper (tests/docschemas.py builds its databases from OpenClaw's documents):
agent schemas 24–26 are read and acted on; a schema occd was not shown (newer than 26, markers disagreeing, a
documented table missing) is read and NOTHING is done for that agent, and `status`, `status --check` and
`doctor` say so with the schema, the release and what to do; cold transcripts are read from their archives."""

from __future__ import annotations

import json
import time
import os
import sys

import pytest
from click.testing import CliRunner

from docschemas import DocDbState
from occd.cli.main import cli
from occd.errors import OccdError
from occd.openclaw import open_store
from occd.openclaw.dbstore import DbStore
from occd.openclaw.gateway import Gateway
from statefactory import DbState, message, open_rw


def _turns(n: int, tag: str = "t", big: int = 0) -> list[dict]:
    out, parent = [], None
    for i in range(n):
        out.append(message("user", f"question {tag}{i}", id=f"{tag}u{i}", parent=parent))
        out.append(message("assistant", f"answer {tag}{i} " + "x" * big, id=f"{tag}a{i}", parent=f"{tag}u{i}",
                           usage={"input": 100, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 105}))
        parent = f"{tag}a{i}"
    return out


@pytest.mark.parametrize("schema", [24, 25, 26])
def test_documented_schemas_are_read_and_acted_on(tmp_path, schema):
    db = DocDbState(tmp_path / ".openclaw", schema=schema)
    sid = db.add_session("agent:main:main", events=_turns(3, big=2000), compress=True,
                         entry={"compactionCount": 4, "totalTokens": 9000,
                                "skillsSnapshot": {"prompt": "p", "skills": []}, "systemPromptReport": {"x": 1}})
    c = open_rw(db.db_path())
    assert c.execute("PRAGMA user_version").fetchone()[0] == schema
    if schema >= 24:  # the snapshot fields left entry_json (PR #160358)
        assert "skillsSnapshot" not in c.execute("SELECT entry_json FROM session_nodes").fetchone()[0]
        assert c.execute("SELECT COUNT(*) FROM session_entry_snapshots").fetchone()[0] == 2
    if schema >= 26:  # derived columns filled from the JSON, compressed rows included
        roles = [r[0] for r in c.execute("SELECT message_role FROM transcript_events WHERE seq > 0 ORDER BY seq")]
        assert roles == ["user", "assistant"] * 3
        assert c.execute("SELECT COUNT(*) FROM transcript_events WHERE event_zstd IS NOT NULL").fetchone()[0] == 3
    c.close()
    store = open_store(db.state_dir, "main")
    (info,) = store.sessions()
    assert info.session_id == sid and info.compaction_count == 4 and info.total_tokens == 9000
    s = store.schema()
    assert (s["level"], s["actionable"], s["verified"], s["userVersion"]) == ("known", True, False, schema)
    assert s["meta"]["schemaVersion"] == schema and s["meta"]["agentId"] == "main"
    lines = store.read_lines(info)
    assert len(lines) == 7 and b"answer t2" in lines[-1] and store.warnings == []
    from occd.openclaw.dbschema import ensure_actionable
    from occd.openclaw.health import check_stores

    ensure_actionable(db.state_dir, "main")  # no exception: occd acts here
    (chk,) = check_stores(db.state_dir, probe_cli=False)
    assert chk.status == "ok" and f"schema {schema}" in chk.detail and "documents" in chk.detail


def _bump(db_path, version: int, meta: bool = True) -> None:
    c = open_rw(db_path)
    c.execute(f"PRAGMA user_version = {version}")
    if meta:
        c.execute("UPDATE schema_meta SET schema_version = ? WHERE meta_key = 'primary'", (version,))
    c.commit()
    c.close()


def _unverified_cases(tmp_path):
    """(name, state dir, expected words): a future 29, a real-looking 9.6 bumped to 29 (only user_version, as
    a hand edit would), markers disagreeing, schema 24 claimed without its table."""
    out = []
    f = DocDbState(tmp_path / "f" / ".openclaw", schema=29)
    f.add_session("agent:main:main", events=_turns(2))
    out.append(("future", f.state_dir, ["schema 29 (2026.12.1)", "newer than any schema occd knows (19–26)"]))
    b = DbState(tmp_path / "b" / ".openclaw")
    b.add_session("agent:main:main", events=_turns(2), compress=True)
    _bump(b.db_path(), 29, meta=False)
    out.append(("bumped", b.state_dir, ["schema 29 (2026.9.6)", "newer than any schema occd knows"]))
    m = DbState(tmp_path / "m" / ".openclaw")
    m.add_session("agent:main:main", events=_turns(2))
    _bump(m.db_path(), 21, meta=False)
    out.append(("markers", m.state_dir, ["schema 21 (2026.9.6)", "two schema markers disagree"]))
    t = DbState(tmp_path / "t" / ".openclaw")
    t.add_session("agent:main:main", events=_turns(2))
    _bump(t.db_path(), 24)
    out.append(("table", t.state_dir, ["schema 24 (2026.9.6)", "should have session_entry_snapshots"]))
    return out


def test_unverified_schemas_are_read_and_named(tmp_path):
    from occd.openclaw.dbschema import ensure_actionable
    from occd.openclaw.health import check_stores

    for name, state, words in _unverified_cases(tmp_path):
        store = DbStore(state, "main")
        assert len(store.sessions()) == 1 and len(store.read_lines(store.sessions()[0])) == 5, name  # read
        assert store.schema()["level"] == "unverified" and not store.actionable, name
        store.close()
        (chk,) = check_stores(state, probe_cli=False)
        assert chk.status == "fail", name
        for w in words + ["acts on nothing", "no gateway call"]:
            assert w in chk.detail, (name, w, chk.detail)
        assert "update occd" in chk.hint and "openclaw sessions compact" in chk.hint
        with pytest.raises(OccdError) as ei:
            ensure_actionable(state, "main")
        assert ei.value.code == "SCHEMA_UNVERIFIED" and words[0] in ei.value.message


FAKE_OC = r"""#!/usr/bin/env python3
import json, os, sys
state = os.environ.get("OPENCLAW_STATE_DIR", ".")
open(os.path.join(state, "calls.log"), "a").write(json.dumps(sys.argv[1:]) + "\n")
if "--version" in sys.argv:
    print("OpenClaw 2026.11.5 (abc1234)"); sys.exit(0)
print(json.dumps({"ok": True, "session": {"sessionId": "x", "status": "done"}, "compacted": True}))
"""


def _fake_cli(tmp_path, monkeypatch):
    p = tmp_path / "bin" / "openclaw"
    p.parent.mkdir(exist_ok=True)
    p.write_text(FAKE_OC.replace("/usr/bin/env python3", sys.executable))
    p.chmod(0o755)
    monkeypatch.setenv("OCCD_OPENCLAW_BIN", str(p))
    return p


def _calls(state) -> list[list[str]]:
    f = state / "calls.log"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_the_gateway_refuses_every_call_for_an_unverified_agent(tmp_path, monkeypatch):
    _fake_cli(tmp_path, monkeypatch)
    for name, state, words in _unverified_cases(tmp_path):
        gw = Gateway(state)
        for act in (lambda: gw.sessions_compact("agent:main:main"),
                    lambda: gw.sessions_reset("agent:main:main", "x"),
                    lambda: gw.chat_send("agent:main:main", "hi", "k1"),
                    lambda: gw.sessions_describe("agent:main:main")):
            with pytest.raises(OccdError) as ei:
                act()
            assert ei.value.code == "SCHEMA_UNVERIFIED" and words[0] in ei.value.message, name
        assert _calls(state) == [], name  # not one CLI call
    known = DocDbState(tmp_path / "k" / ".openclaw", schema=26)
    known.add_session("agent:main:main", events=_turns(1))
    Gateway(known.state_dir).sessions_compact("agent:main:main")  # a known schema: the call goes out
    assert _calls(known.state_dir) == [["sessions", "compact", "agent:main:main", "--json"]]


def _busy_state(state_dir, schema: int | None):
    """One session far past its compaction point and compacting every turn (a spiral): the daemon in act mode
    compacts or rotates it. schema None: a real-looking 2026.9.6 database."""
    db = DbState(state_dir) if schema is None else DocDbState(state_dir, schema=schema)
    events = []
    parent = None
    for i in range(8):
        events += [message("user", f"q{i}", id=f"u{i}", parent=parent),
                   {"type": "compaction", "id": f"c{i}", "parentId": f"u{i}", "timestamp": "2026-11-23T00:00:00.000Z",
                    "summary": "s", "firstKeptEntryId": f"u{i}", "tokensBefore": 120000},
                   message("assistant", f"a{i}", id=f"a{i}", parent=f"c{i}",
                           usage={"input": 120000, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120005})]
        parent = f"a{i}"
    # in use: ten minutes ago (a session idle for longer than policy.active_within_hours is left alone)
    db.add_session("agent:main:main", events=events, updated_at=int((time.time() - 600) * 1000),
                   entry={"compactionCount": 40, "totalTokens": 126000, "totalTokensFresh": True,
                          "contextTokens": 128000,  # the last eight compactions within the hour
                          "compactionCheckpoints": [{"reason": "threshold",
                                                     "createdAt": int((time.time() - 60 * (8 - i)) * 1000)}
                                                    for i in range(8)]})
    return db


@pytest.mark.parametrize("bump", [False, True])
def test_the_daemon_acts_on_nothing_for_an_unverified_agent(isolated_env, tmp_path, monkeypatch, bump):
    """The same spiralling session: on the real-looking 9.6 database the daemon (act mode) calls OpenClaw; bumped
    to schema 29 it makes no call at all, and status / status --check / doctor name the schema."""
    state = isolated_env / ".openclaw"
    db = _busy_state(state, None)
    if bump:
        _bump(db.db_path(), 29)
    _fake_cli(tmp_path, monkeypatch)
    r = CliRunner().invoke(cli, ["run", "--once", "--act", "--json"])
    assert r.exit_code == 0, r.output
    acted = [c for c in _calls(state) if "--version" not in c]
    if not bump:
        assert acted, "the known schema should have been acted on (else this test proves nothing)"
        return
    assert acted == []
    r = CliRunner().invoke(cli, ["status"])
    assert "schema 29 (2026.9.6) is unverified" in r.output and "acts on nothing" in r.output
    r = CliRunner().invoke(cli, ["status", "--check", "--json"])
    assert r.exit_code == 1
    probs = json.loads(r.stdout)  # (the one error line goes to stderr)
    codes = [p["code"] for p in (probs.get("data") or probs).get("problems", [])] if isinstance(probs, dict) else []
    assert "SCHEMA_UNVERIFIED" in codes or "SCHEMA_UNVERIFIED" in r.output
    r = CliRunner().invoke(cli, ["doctor", "--check", "openclaw-db"])
    assert r.exit_code == 1
    line = next(ln for ln in r.output.splitlines() if "openclaw-db:main" in ln)
    assert line.startswith("FAIL") and "schema 29" in line and "acts on nothing" in line


# ------------------------------------------------------------------------------------------------------------
# Cold transcripts
# ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("storage", ["file", "sqlite"])
def test_a_cold_session_is_read_from_its_archive(tmp_path, storage):
    db = DocDbState(tmp_path / ".openclaw", schema=26)
    db.add_session("agent:main:hot", events=_turns(1, "h"))
    sid, path = db.add_cold_session("agent:main:cold", events=_turns(4, "c"), storage=storage)
    assert (path is not None) == (storage == "file")
    c = open_rw(db.db_path())
    assert c.execute("SELECT COUNT(*) FROM transcript_events WHERE session_id = ?", (sid,)).fetchone()[0] == 0
    c.close()
    before = path.read_bytes() if path else None
    store = open_store(db.state_dir, "main")
    info = store.resolve("agent:main:cold")
    assert info.size and info.size > 500  # the archive's raw bytes, not the 0 of its missing hot rows
    lines = store.read_lines(info)
    assert len(lines) == 9 and b'"type":"session"' in lines[0] and b"answer c3" in lines[-1]
    assert store.is_cold(info) and not store.is_cold(store.resolve("agent:main:hot"))
    store.close()
    if path:  # read-only: the archive is untouched and still cold
        assert path.read_bytes() == before


@pytest.mark.parametrize("damage", ["flip", "delete", "count"])
def test_a_damaged_cold_archive_is_named_never_empty(tmp_path, damage):
    db = DocDbState(tmp_path / ".openclaw", schema=26)
    sid, path = db.add_cold_session("agent:main:cold", events=_turns(2, "c"), storage="file")
    if damage == "flip":
        b = bytearray(path.read_bytes())
        b[len(b) // 2] ^= 0x01
        path.write_bytes(bytes(b))
    elif damage == "delete":
        os.unlink(path)
    else:
        c = open_rw(db.db_path())
        c.execute("UPDATE session_transcript_cold_archives SET event_count = 9")
        c.commit()
        c.close()
    store = open_store(db.state_dir, "main")
    with pytest.raises(OccdError) as ei:
        store.read_lines(store.resolve("agent:main:cold"))
    assert ei.value.code == "COLD_ARCHIVE_UNREADABLE" and sid in ei.value.message
    assert {"flip": "sha256", "delete": "No such file", "count": "the row says 9"}[damage] in ei.value.message


def test_occd_never_asks_chat_history_of_a_cold_session(tmp_path, monkeypatch):
    _fake_cli(tmp_path, monkeypatch)
    db = DocDbState(tmp_path / ".openclaw", schema=26)
    db.add_session("agent:main:hot", events=_turns(1, "h"))
    db.add_cold_session("agent:main:cold", events=_turns(2, "c"), storage="sqlite")
    gw = Gateway(db.state_dir)
    with pytest.raises(OccdError) as ei:
        gw.chat_history("agent:main:cold")
    assert ei.value.code == "COLD_SESSION" and _calls(db.state_dir) == []  # chat.history restores: never called
    gw.chat_history("agent:main:hot")
    assert [c[:3] for c in _calls(db.state_dir)] == [["gateway", "call", "chat.history"]]
