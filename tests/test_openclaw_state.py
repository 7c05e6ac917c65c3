"""State dir resolution, config, context windows, agents and eras (occd.openclaw.state)."""

from __future__ import annotations

import json
import os

import pytest

from occd.errors import OccdError
from occd.openclaw import context_window, get_agent, list_agents, load_openclaw_config, open_store, resolve_state_dir
from occd.openclaw.state import config_path, detect_era, parse_version, release_evidence
from statefactory import DbState, FileState


@pytest.mark.parametrize("env,existing,expected", [
    ({"OPENCLAW_STATE_DIR": "/srv/oc"}, [".openclaw"], "/srv/oc"),
    ({"OPENCLAW_STATE_DIR": "  /srv/oc  "}, [], "/srv/oc"),                         # trimmed
    ({"OPENCLAW_STATE_DIR": "~/custom"}, [], "{home}/custom"),                     # ~ = home
    ({"OPENCLAW_STATE_DIR": "~/custom", "OPENCLAW_HOME": "/oc-home"}, [], "/oc-home/custom"),
    ({"OPENCLAW_STATE_DIR": "rel/dir"}, [], "{cwd}/rel/dir"),                      # made absolute
    ({"OPENCLAW_STATE_DIR": "", "CLAWDBOT_STATE_DIR": "/legacy"}, [], "/legacy"),  # empty = unset
    ({"CLAWDBOT_STATE_DIR": "~/cb"}, [".openclaw"], "{home}/cb"),
    ({}, [".openclaw", ".clawdbot"], "{home}/.openclaw"),
    ({}, [".clawdbot", ".moltbot"], "{home}/.clawdbot"),
    ({}, [".moltbot", ".moldbot"], "{home}/.moldbot"),                             # first in OpenClaw's order
    ({}, [".moltbot"], "{home}/.moltbot"),
    ({}, [], "{home}/.openclaw"),
    ({"OPENCLAW_HOME": "~/sub"}, [], "{home}/sub/.openclaw"),                      # OPENCLAW_HOME's own ~ is HOME
])
def test_state_dir_matrix(tmp_path, env, existing, expected):
    home = tmp_path / "h"
    home.mkdir()
    for name in existing:
        (home / name).mkdir()
    want = expected.format(home=str(home), cwd=os.getcwd())
    assert str(resolve_state_dir({"HOME": str(home), **env})) == want


def test_state_dir_legacy_dirs_are_looked_up_under_openclaw_home(tmp_path):
    oc_home = tmp_path / "och"
    (oc_home / ".clawdbot").mkdir(parents=True)
    assert resolve_state_dir({"HOME": str(tmp_path / "h"), "OPENCLAW_HOME": str(oc_home)}) == oc_home / ".clawdbot"


def test_explicit_state_dir_wins(tmp_path):
    assert resolve_state_dir({"OPENCLAW_STATE_DIR": "/a", "HOME": str(tmp_path)}, state_dir="~/x") == tmp_path / "x"


def test_config_path_and_json5(tmp_path):
    state = tmp_path / "s"
    state.mkdir()
    assert config_path(state, {}) == state / "openclaw.json"
    (state / "moltbot.json").write_text("{}")
    assert config_path(state, {}) == state / "moltbot.json"          # legacy name when it is the one there
    (state / "openclaw.json").write_text("// comment\n{agents: {defaults: {contextTokens: 1234,},},}\n")
    assert config_path(state, {}) == state / "openclaw.json"
    assert load_openclaw_config(state, {})["agents"]["defaults"]["contextTokens"] == 1234
    other = tmp_path / "elsewhere.json"
    other.write_text('{"gateway": {"port": 1}}')
    assert load_openclaw_config(state, {"OPENCLAW_CONFIG_PATH": str(other)}) == {"gateway": {"port": 1}}
    assert load_openclaw_config(state, {"CLAWDBOT_CONFIG_PATH": str(other)}) == {"gateway": {"port": 1}}


@pytest.mark.parametrize("text", ["{agents: ", "not json at all", '{"a": 1,,}'])
def test_bad_config_is_a_clear_error(tmp_path, text):
    (tmp_path / "openclaw.json").write_text(text)
    with pytest.raises(OccdError) as ei:
        load_openclaw_config(tmp_path, {})
    assert ei.value.code == "OPENCLAW_CONFIG" and "openclaw.json" in ei.value.message and "\n" not in ei.value.message


def test_missing_or_empty_config_is_empty(tmp_path):
    assert load_openclaw_config(tmp_path, {}) == {}
    (tmp_path / "openclaw.json").write_text("  \n")
    assert load_openclaw_config(tmp_path, {}) == {}


def test_context_window_order(tmp_path):
    cfg = {"models": {"providers": {"a": {"models": [{"id": "m1", "contextWindow": 100_000}]},
                                    "b": {"models": [{"id": "m1", "contextWindow": 50_000},
                                                     {"id": "m2", "contextWindow": 64_000}]}}},
           "agents": {"defaults": {"contextTokens": 90_000}}}
    assert context_window(tmp_path, model="m1", provider="b", config=cfg) == 50_000
    assert context_window(tmp_path, model="m1", config=cfg) == 100_000
    assert context_window(tmp_path, model="b/m2", config=cfg) == 64_000           # provider/model spelling
    assert context_window(tmp_path, model="unknown", config=cfg) == 90_000         # agents.defaults.contextTokens
    assert context_window(tmp_path, model="unknown", config={}) == 200_000
    # no model recorded (a session reset in place): the agent's configured model, as OpenClaw lists it
    cfg["agents"]["defaults"]["model"] = {"primary": "b/m2"}
    assert context_window(tmp_path, config=cfg) == 64_000
    cfg["agents"]["list"] = [{"id": "w", "model": "a/m1"}]
    assert context_window(tmp_path, agent="w", config=cfg) == 100_000
    # the agent's model catalog comes first
    cat = tmp_path / "agents" / "main" / "agent"
    cat.mkdir(parents=True)
    (cat / "models.json").write_text(json.dumps({"providers": {"b": {"models": [{"id": "m1", "contextWindow": 7}]}}}))
    assert context_window(tmp_path, agent="main", model="m1", provider="b", config=cfg) == 7


def test_agents_eras_and_unknown_agent(tmp_path):
    state = tmp_path / ".openclaw"
    fs = FileState(state)
    fs.add_session(turns=2)
    (state / "agents" / "idle").mkdir()
    (state / "agents" / "idle" / "sessions").mkdir()
    DbState(state, app_version="2026.7.1")  # a global db without a db-era release in it
    db = DbState(state)
    db.connect("dbagent").close()
    agents = {a.id: a.era for a in list_agents(state)}
    assert agents == {"dbagent": "db", "idle": "empty", "main": "file"}
    with pytest.raises(OccdError) as ei:
        get_agent(state, "nope")
    assert ei.value.code == "AGENT_NOT_FOUND" and ei.value.message == "Agent 'nope' not found"
    assert "dbagent, idle, main" in ei.value.hint


def test_trajectory_and_archives_alone_are_not_file_era(tmp_path):
    d = tmp_path / "agents" / "x" / "sessions"
    d.mkdir(parents=True)
    for name in ("a.trajectory.jsonl", "a.jsonl.reset.2026-01-01T00-00-00.000Z", "b.backup.1.jsonl", "c.jsonl.lock"):
        (d / name).write_text("{}\n")
    (d / "archive").mkdir()
    (d / "archive" / "old.jsonl").write_text("{}\n")
    assert detect_era(d.parent) == "empty"


def test_needs_migration_signals(tmp_path):
    state = tmp_path / ".openclaw"
    fs = FileState(state)
    fs.add_session(turns=2)
    assert get_agent(state, "main").era == "file"
    # 1) a 2026.8+ release touched the config: it refuses to run until doctor imports the files
    (state / "openclaw.json").write_text(json.dumps({"meta": {"lastTouchedVersion": "2026.9.6"}}))
    assert release_evidence(state).text == "2026.9.6"
    assert get_agent(state, "main").era == "needs-migration"
    # the 2026.7.x extended-stable line is still the file era
    (state / "openclaw.json").write_text(json.dumps({"meta": {"lastTouchedVersion": "2026.7.35"}}))
    assert get_agent(state, "main").era == "file"
    # 2) the global state database names a db-era release
    DbState(state, app_version="2026.8.1")
    assert release_evidence(state).source == "state-db" and get_agent(state, "main").era == "needs-migration"
    # 3) the agent database exists beside unimported files
    state2 = tmp_path / "s2"
    FileState(state2).add_session(turns=1)
    DbState(state2, app_version="2026.7.1").connect("main").close()
    store = open_store(state2, "main")
    assert store.era == "needs-migration"
    store.sessions()
    assert any("openclaw doctor --fix" in w for w in store.warnings)


def test_parse_version():
    assert parse_version("OpenClaw 2026.9.6 (eb377ac)") == (2026, 9, 6)
    assert parse_version("garbage") is None


def test_missing_and_unreadable_state_dir(tmp_path):
    with pytest.raises(OccdError) as ei:
        list_agents(tmp_path / "none")
    assert ei.value.code == "STATE_NOT_FOUND"
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OccdError) as ei:
        list_agents(f)
    assert ei.value.code == "STATE_UNREADABLE"
    assert list_agents(tmp_path) == []  # a state dir without agents/


def _doctor_fix_735_db(agent_dir):
    """What 2026.7.35's `openclaw doctor --fix` leaves: agent/openclaw-agent.sqlite at schema 1, auth profiles and a
    memory index, no session tables."""
    import sqlite3

    (agent_dir / "agent").mkdir(parents=True, exist_ok=True)
    c = sqlite3.connect(agent_dir / "agent" / "openclaw-agent.sqlite")
    c.executescript("""
        CREATE TABLE schema_meta (meta_key TEXT PRIMARY KEY, role TEXT, schema_version INTEGER);
        INSERT INTO schema_meta VALUES ('primary', 'agent', 1);
        CREATE TABLE auth_profiles (id TEXT PRIMARY KEY, provider TEXT, profile_json TEXT);
        CREATE TABLE memory_index (path TEXT PRIMARY KEY, hash TEXT, updated_at INTEGER);
        PRAGMA user_version = 1;""")
    c.commit()
    c.close()


def test_agent_db_without_session_tables_beside_sessions_json_is_the_file_era(tmp_path):
    """Issue 19: the era is what holds the sessions. 7.35's doctor --fix database (no session tables) beside a
    sessions.json is the file era, and occd acts on it (no needs-migration note)."""
    state = tmp_path / ".openclaw"
    FileState(state).add_session(turns=2)
    (state / "openclaw.json").write_text(json.dumps({"meta": {"lastTouchedVersion": "2026.7.35"}}))
    _doctor_fix_735_db(state / "agents" / "main")
    assert get_agent(state, "main").era == "file"
    store = open_store(state, "main")
    assert store.era == "file" and not store.notes
    assert len(store.sessions()) == 1
    # the same database before the first session: no sessions anywhere yet
    bare = tmp_path / "bare"
    (bare / "agents" / "main").mkdir(parents=True)
    _doctor_fix_735_db(bare / "agents" / "main")
    assert get_agent(bare, "main").era == "empty"
    # the same database with session tables is an import in progress: still needs-migration
    import sqlite3

    c = sqlite3.connect(state / "agents" / "main" / "agent" / "openclaw-agent.sqlite")
    c.execute("CREATE TABLE session_nodes (session_key TEXT PRIMARY KEY)")
    c.commit()
    c.close()
    assert get_agent(state, "main").era == "needs-migration"


def test_unreadable_agent_db_beside_sessions_counts_as_holding_sessions(tmp_path):
    state = tmp_path / ".openclaw"
    FileState(state).add_session(turns=1)
    (state / "agents" / "main" / "agent").mkdir(parents=True, exist_ok=True)
    (state / "agents" / "main" / "agent" / "openclaw-agent.sqlite").write_bytes(b"not a database at all" * 100)
    assert get_agent(state, "main").era == "needs-migration"
