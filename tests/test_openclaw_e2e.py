"""occd's OpenClaw readers against the real OpenClaw (offline, scripted model): what occd reads must be what
`openclaw sessions list --json` reports, in both storage eras; the index write and the gateway calls must work with
the real thing. Releases: OCCD_E2E_RELEASES (e2e_harness.releases)."""

from __future__ import annotations

import json
import time

import pytest

from e2e_harness import OpenClawHome, edge_releases, header_version, releases, require_e2e
from occd.errors import BusyError, OccdError
from occd.openclaw import context_window_for_session, list_agents, open_store, resolve_state_dir, transcript_lock, update_index
from occd.openclaw.dbstore import DbStore, gateway_status
from occd.openclaw.gateway import Gateway
from occd.transcript import scan

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _same(infos, listed, state):
    """occd's SessionInfo list vs `openclaw sessions list --json` sessions: same sessions, order, figures.
    (most releases leave compactionCount out of that listing; where a row has it, it must agree.)"""
    assert [(i.key, i.session_id) for i in infos] == [(s["key"], s["sessionId"]) for s in listed]
    for i, s in zip(infos, listed):
        if "compactionCount" in s:
            assert (i.compaction_count or 0) == (s["compactionCount"] or 0), s["key"]
        assert i.total_tokens == s.get("totalTokens"), s["key"]
        # OpenClaw lists the entry's contextTokens, else the window it resolves from the config (after a reset
        # the entry has none): occd's context_window_for_session gives the same figure
        assert context_window_for_session(state, "main", i) == s.get("contextTokens"), s["key"]
        assert i.updated_at == s["updatedAt"]
        assert i.model in (None, s.get("model"))  # none recorded (after a reset): OpenClaw shows the default


def _run_once_matches_sessions_list(oc) -> None:
    """`occd run --once` (observe mode: nothing written) records what `openclaw sessions list` shows: the same
    sessions, compaction counts and context tokens. (The database era's check is in test_rotation_e2e.)"""
    r = oc.occd("run", "--once", "--json")
    assert r.returncode == 0, r.stderr
    r = oc.occd("status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["agents"][0]["era"] == "file"
    ours = {s["sessionId"]: s for a in st["agents"] for s in a["biggest"]}
    theirs = oc.sessions_list()["sessions"]
    assert {s["sessionId"] for s in theirs} == set(ours)
    for s in theirs:
        o = ours[s["sessionId"]]
        assert (o["compactions"] or 0) == (s.get("compactionCount") or 0)
        if s.get("totalTokens") is not None:
            assert o["contextTokens"] == s["totalTokens"]


@pytest.mark.parametrize("version", releases("file"))
def test_file_era(tmp_path, version):
    require_e2e()
    with OpenClawHome(version, tmp_path) as oc:
        note = oc.workspace / "notes.txt"
        note.write_text("the secret is cardamom\n")
        oc.turn(f"READ {note}")
        oc.turn("plain question two")
        _run_once_matches_sessions_list(oc)
        state = resolve_state_dir(oc.env)
        assert state == oc.state_dir
        assert [(a.id, a.era) for a in list_agents(state)] == [("main", "file")]
        store = open_store(state, "main")
        infos = store.sessions()
        listed = oc.sessions_list()["sessions"]
        _same(infos, listed, state)
        assert not store.warnings
        info = infos[0]
        assert str(info.path) == str(store.sessions_dir / listed[0]["sessionFile"])  # absolute in 2026.7.x
        assert transcript_lock(info.path) is None                          # the run released its lock
        names = sorted(p.name for p in store.sessions_dir.iterdir())
        assert any(n.endswith(".trajectory.jsonl") for n in names)         # beside it, and not a session
        t = scan(info.path)
        assert not t.malformed and len(t.turns()) == 2
        assert sum(len(tr.call_ids or []) for tr in t.turns()) >= 1  # the READ turn made a real tool call

        # occd's locked atomic index write: OpenClaw sees it at once and keeps unknown fields on its next write
        def mark(d):
            d[info.key]["occdMarker"] = {"v": 1}
            d[info.key]["label"] = "occd-e2e"

        update_index(store.sessions_dir, mark)
        assert oc.sessions_list()["sessions"][0].get("label") in ("occd-e2e", None)
        oc.turn("plain question three")
        after = json.loads((store.sessions_dir / "sessions.json").read_text())[info.key]
        assert after["occdMarker"] == {"v": 1} and after["updatedAt"] > info.updated_at
        assert not (store.sessions_dir / "sessions.json.lock").exists()
        _same(open_store(state, "main").sessions(), oc.sessions_list()["sessions"], state)


@pytest.mark.parametrize("version", releases("db"))
def test_database_era_and_gateway(tmp_path, version):
    require_e2e()
    with OpenClawHome(version, tmp_path) as oc:
        oc.turn("plain question one")
        long = "long plain message: " + " ".join(f"word{i} alpha beta gamma" for i in range(300))
        oc.turn(long)  # ≥ 1024 bytes: 2026.9.6 stores the event zstd-compressed
        state = resolve_state_dir(oc.env)
        assert [(a.id, a.era) for a in list_agents(state)] == [("main", "db")]
        store = open_store(state, "main")
        assert isinstance(store, DbStore)
        infos = store.sessions()
        _same(infos, oc.sessions_list()["sessions"], state)
        assert not store.warnings, store.warnings
        schema = store.schema()
        assert schema["appVersion"] == version and not schema["warnings"], schema
        c = store.conn()
        if "event_zstd" in schema["columns"]["transcript_events"]:
            (zrows,) = c.execute("SELECT COUNT(*) FROM transcript_events WHERE event_zstd IS NOT NULL").fetchone()
            assert zrows >= 1
        lines = list(store.read_lines(infos[0]))
        assert not store.warnings
        p = tmp_path / "db.jsonl"
        p.write_bytes(b"".join(lines))
        t = scan(p)
        assert not t.malformed and len(t.turns()) == 2 and t.header.get("version") == header_version(version)
        assert any(long in ln.decode() for ln in lines)
        store.close()
        if version not in edge_releases("db"):
            return  # the gateway's calls are the same on every schema of the era: its first and newest release run them

        # the gateway calls occd makes in this era, against the real gateway
        gw = Gateway(state, openclaw_bin=oc.oc, env=oc.env, timeout=180)
        with pytest.raises(BusyError) as ei:
            gw.sessions_describe("agent:main:main")
        assert ei.value.code == "GATEWAY_DOWN"
        assert not gateway_status(state)["running"]
        oc.start_gateway()
        st = gateway_status(state)
        # 9.6 writes a gateway-owner lease with the port; 8.1 and 9.5 only the lock file (no port)
        assert st["running"] and st["port"] in ((oc.gateway_port,) if st["source"] == "lease" else (None,))
        key = "agent:main:main"
        d = gw.sessions_describe(key)["session"]
        assert d["sessionId"] == infos[0].session_id
        with pytest.raises(OccdError) as ei:
            gw.sessions_describe("agent:main:nope")
        assert ei.value.code == "SESSION_NOT_FOUND"
        assert gw.chat_send(key, "seed message hello", "occd-e2e-1")["status"] in ("started", "ok")
        end = time.monotonic() + 120
        while time.monotonic() < end:
            msgs = gw.chat_history(key)["messages"]
            if msgs and msgs[-1]["role"] == "assistant" and any(
                    m["role"] == "user" and "seed message hello" in json.dumps(m["content"]) for m in msgs):
                break
            time.sleep(2)
        else:
            pytest.fail("the chat.send turn did not finish")
        assert gw.chat_send(key, "seed message hello", "occd-e2e-1")["status"] == "ok"  # idempotent
        r = gw.sessions_compact(key)
        assert r["ok"] and r["compacted"]
        compacted = open_store(state, "main").sessions()
        _same(compacted, oc.sessions_list()["sessions"], state)
        assert compacted[0].compaction_count == 1  # occd sees OpenClaw's own count of the real compaction
        rows = gw.call("sessions.list", {}).get("sessions") or []
        row = next(r for r in rows if r.get("key") == key)
        assert row.get("compactionCount", 1) == 1 and row.get("sessionId") == compacted[0].session_id
        with pytest.raises(OccdError) as ei:
            gw.sessions_reset(key, "00000000-0000-7000-8000-000000000000")
        assert ei.value.code == "SESSION_CHANGED"
        reset = gw.sessions_reset(key, infos[0].session_id)
        assert reset["entry"]["sessionId"] == infos[0].session_id and reset["entry"]["compactionCount"] == 0
        after = open_store(state, "main").sessions()
        _same(after, oc.sessions_list()["sessions"], state)
        assert after[0].entry.get("lifecycleRevision") == reset["entry"]["lifecycleRevision"]
        oc.stop_gateway()
        assert not gateway_status(state)["running"]
