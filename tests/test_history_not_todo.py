"""Issue 29.5: history is not a to-do list. On a state of several agents whose sessions compacted in the past and
then went idle, the first `occd run --once --act` rotates and strips none of them; a session in use counts only
the compactions that happened while occd watched (or within policy.active_within_hours); `occd status` says how
many idle sessions occd leaves alone and what acts on them on request."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from occd.config import load_settings
from occd.ledger import Ledger
from occd.policy.rotation import compactions_counted
from occd.policy.types import SessionState, in_use
from test_daemon_jobs import state_with

DAY = 86400
AGENTS = ("main", "coder", "ops")


def _age(state: Path, agent: str, days: float, compactions: int) -> None:
    """Every session of the agent: last used `days` ago, `compactions` compactions back then."""
    sdir = state / "agents" / agent / "sessions"
    idx = json.loads((sdir / "sessions.json").read_text())
    t = time.time() - days * DAY
    for e in idx.values():
        e.update(updatedAt=int(t * 1000), compactionCount=compactions,
                 compactionCheckpoints=[{"reason": "threshold", "createdAt": int((t - 600 * i) * 1000)}
                                        for i in range(compactions)])
        os.utime(e["sessionFile"], (t, t))
    (sdir / "sessions.json").write_text(json.dumps(idx, indent=2))


def _history_state(home: Path) -> Path:
    state = None
    for n, agent in enumerate(AGENTS):
        # windows small enough that every one of them is over the strip threshold too
        state = state_with(home, {f"agent:{agent}:s{i}": {"turns": 30, "seed": 10 * n + i, "compaction_count": 5}
                                  for i in range(4)}, agent=agent, window=20_000)
        _age(state, agent, 30, 5)
    return state


def _files(state: Path) -> dict:
    return {p: p.read_bytes() for p in state.glob("agents/*/sessions/*.jsonl")}


def test_the_first_act_cycle_on_a_months_old_history_touches_nothing(isolated_env):
    state = _history_state(isolated_env)
    before, index = _files(state), {a: (state / f"agents/{a}/sessions/sessions.json").read_text() for a in AGENTS}
    r = CliRunner().invoke(cli, ["run", "--once", "--act", "--json"])
    assert r.exit_code == 0, r.output
    with Ledger.open() as led:
        done = [a for a in led.history(limit=10_000) if a["kind"] in ("rotate", "strip", "compact", "lean")
                and a["outcome"] == "ok" and not a["dry_run"]]
        assert done == []
        assert len(led.latest_observations()) == 12  # seen, and left alone
    assert _files(state) == before
    assert {a: (state / f"agents/{a}/sessions/sessions.json").read_text() for a in AGENTS} == index
    # status says how many idle sessions occd leaves alone and the command that acts on one on request
    r = CliRunner().invoke(cli, ["status", "--json"])
    data = json.loads(r.stdout)
    data = data.get("data", data)
    idle = {a["id"]: a["idle"] for a in data["agents"]}
    assert all(i["sessions"] == 4 and i["activeWithinHours"] == 72 for i in idle.values()), idle
    text = CliRunner().invoke(cli, ["status"]).output
    assert "left alone: 4 idle sessions" in text and "occd rotate SESSION --dry-run" in text


def test_a_session_in_use_counts_only_the_compactions_occd_saw(isolated_env):
    key = "agent:main:main"
    state = state_with(isolated_env, {key: {"turns": 8, "compaction_count": 4}})
    _age(state, "main", 20, 4)  # four compactions 20 days ago ...
    p = state / "agents/main/sessions/sessions.json"
    idx = json.loads(p.read_text())
    old_id = idx[key]["sessionId"]
    idx[key]["updatedAt"] = int((time.time() - 3600) * 1000)  # ... and used an hour ago
    os.utime(idx[key]["sessionFile"], (time.time() - 3600,) * 2)
    p.write_text(json.dumps(idx, indent=2))
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    assert json.loads(p.read_text())[key]["sessionId"] == old_id  # the old compactions do not count
    idx = json.loads(p.read_text())
    idx[key]["compactionCount"] = 7  # three more while occd watches
    p.write_text(json.dumps(idx, indent=2))
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    assert json.loads(p.read_text())[key]["sessionId"] != old_id
    with Ledger.open() as led:
        (a,) = [x for x in led.history(kind="rotate") if x["outcome"] == "ok"]
        assert "3 compactions" in a["reason"]


def test_in_use_and_the_compactions_a_rotation_counts():
    now = 10 * DAY
    pol = load_settings({}).policy
    assert pol.active_within_hours == 72
    s = SessionState(agent="a", session_key="k", session_id="s", last_activity=now - 71 * 3600)
    assert in_use(s, 72, now)
    assert not in_use(SessionState(agent="a", session_key="k", session_id="s", last_activity=now - 30 * DAY), 72, now)
    assert not in_use(SessionState(agent="a", session_key="k", session_id="s"), 72, now)  # unknown: not in use
    w = 72 * 3600
    assert compactions_counted(5, 5, [now - 20 * DAY], now=now, window_s=w) == 0        # all before occd watched
    assert compactions_counted(7, 4, [], now=now, window_s=w) == 3                       # three while it watched
    assert compactions_counted(5, 5, [now - 3600, now - 7200], now=now, window_s=w) == 2  # two within the window
    assert compactions_counted(5, None, [], now=now, window_s=w) == 0


def test_the_idle_archive_is_bounded_per_cycle(isolated_env):
    """Idle sessions are the idle-archive's: a handful per agent and run (occd.jobs.score.ARCHIVES_PER_CYCLE),
    each recorded; the next run takes the next ones."""
    from occd.jobs import JobContext
    from occd.jobs import score as score_job
    from test_relevance import make_file_agent

    now = time.time()
    state = isolated_env / ".openclaw"
    make_file_agent(state, "main", [
        {"sid": "active", "users": ["refactor the webhook handler"], "cwd": str(isolated_env), "mtime": now - 60},
        *[{"sid": f"old-{i}", "users": [f"plan the holiday rota {i}"], "cwd": str(isolated_env),
           "mtime": now - 30 * DAY} for i in range(5)]])
    s = load_settings({"policy": {"mode": "act"}})
    with Ledger.open() as led:
        ctx = JobContext(settings=s, ledger=led, state_dir=state, clock=lambda: now)
        out = score_job.run(ctx)
        assert out["archived"] == score_job.ARCHIVES_PER_CYCLE == 3 and out["held"] == 2, out
        out = score_job.run(ctx)
        assert out["archived"] == 2 and out["held"] == 0, out
        assert len([r for r in led.history(kind="archive") if r["outcome"] == "ok"]) == 5


def _acted(led) -> list[tuple[str, str]]:
    return sorted((a["agent_id"], a["session_id"]) for a in led.history(limit=10_000)
                  if a["kind"] in ("rotate", "strip", "compact", "lean") and a["outcome"] == "ok" and not a["dry_run"])


@pytest.mark.first_sight
def test_a_first_start_leaves_the_sessions_it_never_saw_run(isolated_env, monkeypatch):
    """Sessions last used an hour before occd's first look (inside policy.active_within_hours, over the strip
    threshold) are history to occd: the first act cycle changes none of them. One that runs afterwards is acted on,
    and so is a session that appears after occd's first look at the state."""
    monkeypatch.setenv("OCCD_POLICY__CACHE_TTL_MINUTES", "0")  # no gentle wait: first sight is what is tested
    monkeypatch.setenv("OCCD_IDLE_SECONDS", "1")
    state = None
    for n, agent in enumerate(AGENTS):
        state = state_with(isolated_env, {f"agent:{agent}:s{i}": {"turns": 30, "seed": 10 * n + i}
                                          for i in range(4)}, agent=agent, window=20_000)
    before = _files(state)
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    looked = time.time()
    with Ledger.open() as led:
        assert _acted(led) == [] and len(led.latest_observations()) == 12
    assert _files(state) == before
    # status says so: recent sessions occd has not seen run, left alone until they run
    data = json.loads(runner.invoke(cli, ["status", "--json"]).stdout)
    data = data.get("data", data)
    assert {a["id"]: (a["idle"]["sessions"], a["idle"]["unseen"]) for a in data["agents"]} == {
        a: (0, 4) for a in AGENTS}
    text = runner.invoke(cli, ["status"]).output
    assert text.count("not seen run yet: 4 sessions used before occd first looked") == 3, text
    # a run of coder's s1 ends after occd's first look: occd saw it in use
    idx = json.loads((state / "agents/coder/sessions/sessions.json").read_text())
    ran = idx["agent:coder:s1"]
    os.utime(ran["sessionFile"], (looked, looked))
    time.sleep(1.1)
    # ops gets a new session after occd's first look
    state_with(isolated_env, {"agent:ops:new": {"turns": 30, "seed": 99}}, agent="ops", window=20_000)
    born = json.loads((state / "agents/ops/sessions/sessions.json").read_text())["agent:ops:new"]
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    with Ledger.open() as led:
        assert _acted(led) == sorted([("coder", ran["sessionId"]), ("ops", born["sessionId"])])
    changed = {p for p, b in before.items() if p.exists() and p.read_bytes() != b}
    assert changed == {Path(ran["sessionFile"])}
    data = json.loads(runner.invoke(cli, ["status", "--json"]).stdout)
    data = data.get("data", data)
    assert {a["id"]: a["idle"]["unseen"] for a in data["agents"]} == {"main": 4, "coder": 3, "ops": 4}


@pytest.mark.first_sight
def test_act_on_unseen_acts_on_a_first_look(isolated_env, monkeypatch):
    monkeypatch.setenv("OCCD_POLICY__CACHE_TTL_MINUTES", "0")
    monkeypatch.setenv("OCCD_POLICY__ACT_ON_UNSEEN", "true")
    state = state_with(isolated_env, {f"agent:main:s{i}": {"turns": 30, "seed": i} for i in range(2)}, window=20_000)
    assert CliRunner().invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    with Ledger.open() as led:
        assert len(_acted(led)) == 2
    assert load_settings({}).policy.act_on_unseen
    monkeypatch.delenv("OCCD_POLICY__ACT_ON_UNSEEN")
    assert not load_settings({}).policy.act_on_unseen  # the default
    assert state.is_dir()


@pytest.mark.first_sight
def test_an_agent_born_after_occds_first_look_is_acted_on_at_once(isolated_env, monkeypatch):
    """occd started before OpenClaw's first session (an empty state): the agent and session that appear later were
    born while occd watched; the first cycle that sees them may act."""
    monkeypatch.setenv("OCCD_POLICY__CACHE_TTL_MINUTES", "0")
    monkeypatch.setenv("OCCD_IDLE_SECONDS", "1")
    (isolated_env / ".openclaw" / "agents").mkdir(parents=True)
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0  # occd's first look: nothing there
    time.sleep(1.1)
    state = state_with(isolated_env, {"agent:main:main": {"turns": 30, "seed": 5}}, window=20_000)
    sid = json.loads((state / "agents/main/sessions/sessions.json").read_text())["agent:main:main"]["sessionId"]
    assert runner.invoke(cli, ["run", "--once", "--act"]).exit_code == 0
    with Ledger.open() as led:
        assert _acted(led) == [("main", sid)]
