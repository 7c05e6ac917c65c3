"""occd on a workstation (issue 29): what a cycle and a report cost on a state of many agents and sessions.

The bounds count work (how often agents are listed, sessions parsed or rated, short ids computed) rather than
only wall time, so they hold on a loaded CI machine and fail on code that does per-agent or per-session work for
what did not change; a few coarse wall-time bounds back them up."""

from __future__ import annotations

import contextlib
import uuid

from occd.openclaw import ids


def test_a_table_of_short_ids_computes_the_forms_once(monkeypatch):
    """`occd sessions` / `occd status` ask each row's short id among all the ids shown: one computation of the
    forms for the table, not one per row (5,000 rows took minutes)."""
    calls = []
    real = ids.short_forms
    monkeypatch.setattr(ids, "short_forms", lambda xs: calls.append(1) or real(xs))
    shown = [str(uuid.uuid4()) for _ in range(300)]
    forms = [ids.short_id(s, shown) for s in shown]
    assert len(set(forms)) == 300 and len(calls) <= 2
    assert forms == [real(shown)[s] for s in shown]
    assert ids.short_id("not-shown-id-0000", shown) == real(shown + ["not-shown-id-0000"])["not-shown-id-0000"]


def test_short_forms_of_many_ids_are_the_unique_parts():
    """The length-by-length count gives what counting each candidate in the whole text gave."""
    def by_text(xs):
        uniq = sorted(set(xs))
        hay = "\n".join(i.lower() for i in uniq)
        out = {}
        for sid in uniq:
            start, low, form = ids._tail(sid), sid.lower(), sid
            for end in range(start + ids.MIN_PART, len(sid) + 1):
                if not low[start:end].endswith("-") and hay.count(low[start:end]) == 1:
                    form = sid[start:end]
                    break
            out[sid] = form
        return out

    import random

    rnd = random.Random(29)
    for _ in range(50):
        xs = ["".join(rnd.choice("ab-") for _ in range(rnd.randint(1, 12))) for _ in range(rnd.randint(0, 40))]
        xs += [f"0192{rnd.randrange(16 ** 4):04x}-{rnd.choice(['aaaa', 'abab', f'{rnd.randrange(16 ** 4):04x}'])}-7000-8000-"
               f"{rnd.randrange(16 ** 12):012x}" for _ in range(rnd.randint(0, 200))]
        assert ids.short_forms(xs) == by_text(xs)


# ------------------------------------------------------------------------------------------- a generated state
import pytest  # noqa: E402

AGENTS = 40


@pytest.fixture(scope="module")
def workstation(tmp_path_factory):
    from tests.statefactory import build_workstation

    state = tmp_path_factory.mktemp("ws") / ".openclaw"
    build_workstation(state, AGENTS, 6, mean_bytes=4_000, templates=6)
    return state


@pytest.fixture
def ws(workstation, monkeypatch):
    """The generated state and a ledger that has seen it (one `occd run --once`, shared by the module's tests)."""
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(workstation))
    home = workstation.parent / "occd-home"
    monkeypatch.setenv("OCCD_HOME", str(home))
    if not (home / "scanned").exists():
        home.mkdir(exist_ok=True)
        cli("run", "--once")
        (home / "scanned").touch()
    return workstation


@pytest.fixture
def looks(monkeypatch):
    """How often an agent's folder is inspected (detect_era) and all agents are listed."""
    from occd.openclaw import state

    seen = {"detect_era": 0, "list_agents": 0}
    for name in seen:
        real = getattr(state, name)

        def counted(*a, _real=real, _name=name, **kw):
            seen[_name] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(state, name, counted)
        import occd.openclaw as pkg

        if getattr(pkg, name, None) is real:
            monkeypatch.setattr(pkg, name, counted)
    return seen


def cli(*args):
    from click.testing import CliRunner

    from occd.cli.main import cli as main

    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("args", [("sessions", "--json"), ("sessions",), ("status",), ("status", "--json")])
def test_a_report_looks_at_each_agent_a_bounded_number_of_times(ws, looks, args):
    """Agents are listed once per command and each agent's folder inspected a bounded number of times (it was
    once per agent per agent: open_store -> get_agent -> list_agents -> detect_era)."""
    cli(*args)
    assert looks["list_agents"] <= 3, looks
    assert looks["detect_era"] <= 3 * AGENTS, looks


def test_the_score_job_looks_at_each_agent_once(ws, looks):
    from occd.config import load_settings
    from occd.jobs.score import score_agents
    from occd.ledger import Ledger

    with Ledger.open() as led:
        rep = score_agents(load_settings({"state_dir": str(ws)}), led, ws, __import__("time").time())
    assert len(rep.agents) == AGENTS
    assert looks["list_agents"] <= 2 and looks["detect_era"] <= 2 * AGENTS, looks


def test_the_score_job_rates_only_what_changed_since_it_last_did(ws, monkeypatch):
    """Issue 29 point 1: in one daemon (the job's cache kept between runs), a score run where nothing changed
    reads no agent's sessions again and rates nothing again, with the same decisions; after one idle transcript
    grew, that agent is read again and that one session rated again."""
    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.ledger import Ledger
    from occd.relevance import openclaw_side, select

    read, rated = [], []
    real_read, real_items = openclaw_side.openclaw_sessions, select.rate_items
    monkeypatch.setattr(openclaw_side, "openclaw_sessions", lambda *a, **k: read.append(k.get("agent")) or real_read(*a, **k))
    monkeypatch.setattr(select, "rate_items", lambda xs: rated.extend(s.id for s in xs) or real_items(xs))
    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(ws), "llm": {"enabled": False}}), ledger=led,
                         state_dir=ws)
        ok, first = run_cycle(ctx, ["score"])["score"]
        assert ok and len(read) == AGENTS and len(rated) == first["scored"] > AGENTS, first
        read.clear(), rated.clear()
        ok, again = run_cycle(ctx, ["score"])["score"]
        assert ok and read == [] and rated == [], (read, rated)
        assert again["reused"] == again["scored"] == first["scored"]
        assert again["archiveCandidates"] == first["archiveCandidates"]
        sdir = ws / "agents" / "agent0011" / "sessions"
        oldest = min(sdir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        st = oldest.stat()
        with open(oldest, "ab") as fh:  # it grows; its index entry and folder stay as they were
            fh.write(b'{"type":"custom","customType":"t","data":{},"id":"ef56ab12","parentId":null,'
                     b'"timestamp":"2025-01-01T10:00:00.000Z"}\n')  # (an old time: it stays the oldest)
        import os

        os.utime(oldest, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))  # still idle: the same age, a new state
        ok, third = run_cycle(ctx, ["score"])["score"]
        assert ok and read == ["agent0011"] and rated == [oldest.stem], (read, rated)
        assert third["reused"] == third["scored"] - 1


def test_get_agent_looks_at_that_agent_only(ws, looks):
    from occd.errors import OccdError
    from occd.openclaw import open_store
    from occd.openclaw.state import get_agent

    assert get_agent(ws, "agent0003").id == "agent0003"
    assert open_store(ws, "agent0007").agent == "agent0007"
    assert looks == {"detect_era": 2, "list_agents": 0}
    for bad in ("nobody", "../agents", ".hidden", ""):
        with pytest.raises(OccdError) as e:
            get_agent(ws, bad)
        assert e.value.code == "AGENT_NOT_FOUND" and "agent0000" in e.value.hint


def test_sessions_read_an_unchanged_transcript_once(ws, monkeypatch):
    """`occd sessions` keeps what it read of each transcript (head, tail, figure) with the file's inode, size and
    mtime: the next listing reads only the sessions that changed, and shows the same."""
    import json

    from occd.relevance import openclaw_side

    reads = []
    real = openclaw_side.head_tail
    monkeypatch.setattr(openclaw_side, "head_tail", lambda p, *a, **k: reads.append(p) or real(p, *a, **k))
    first = json.loads(cli("sessions", "--json"))
    reads.clear()
    again = json.loads(cli("sessions", "--json"))
    assert reads == [] and again["sessions"] == first["sessions"]
    p = sorted((ws / "agents" / "agent0005" / "sessions").glob("*.jsonl"))[0]
    with open(p, "ab") as fh:
        fh.write(b'{"type":"custom","customType":"t","data":{},"id":"ab12cd34","parentId":null,'
                 b'"timestamp":"2026-11-27T10:00:00.000Z"}\n')
    cli("sessions", "--json")
    assert reads == [p]


WAKE = ["scan", "lean", "apply", "rotate", "verify"]


def test_a_wake_costs_what_changed(ws, monkeypatch):
    """In one daemon (one JobContext across cycles): a wake where nothing changed lists no agent's index again,
    decides about no session and writes no observation; a wake after one transcript grew looks at that one.
    (Every wake used to re-read every index and decide about every session: 3 s of CPU on 50 x 100.)"""
    import time

    from occd.config import load_settings
    from occd.jobs import JobContext, apply, decide, run_cycle
    from occd.ledger import Ledger
    from occd.openclaw import filestore

    counts = {"index": 0, "decide": 0}
    real_sessions, real_decide = filestore.FileStore.sessions, decide.decide_session

    def sessions(self):
        counts["index"] += 1
        return real_sessions(self)

    def deciding(*a, **k):
        counts["decide"] += 1
        return real_decide(*a, **k)

    monkeypatch.setattr(filestore.FileStore, "sessions", sessions)
    monkeypatch.setattr(apply, "decide_session", deciding)
    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(ws)}), ledger=led, state_dir=ws)
        res = run_cycle(ctx, WAKE)
        assert all(ok for ok, _ in res.values()), res
        assert counts["index"] == AGENTS and counts["decide"] >= AGENTS * 6
        counts.update(index=0, decide=0)
        t0 = time.process_time()
        res = run_cycle(ctx, WAKE)
        quiet_cpu = time.process_time() - t0
        assert counts == {"index": 0, "decide": 0}, counts
        assert res["scan"][1]["sessions"] == AGENTS * 6 and res["scan"][1]["changed"] == 0
        assert quiet_cpu < 2.0  # coarse: 240 sessions; about 0.02 s on an idle machine
        p = sorted((ws / "agents" / "agent0009" / "sessions").glob("*.jsonl"))[0]
        with open(p, "ab") as fh:
            fh.write(b'{"type":"custom","customType":"t","data":{},"id":"cd34ef56","parentId":null,'
                     b'"timestamp":"2026-11-27T10:00:00.000Z"}\n')
        res = run_cycle(ctx, WAKE)
        assert counts == {"index": 0, "decide": 1}, counts
        assert res["scan"][1]["changed"] == 1
        ours = [o for o in ctx.last_scan.sessions if o.path == p]
        assert len(ours) == 1 and ours[0].size == p.stat().st_size


def test_a_long_score_run_gives_way_to_a_wake(ws, monkeypatch):
    """Issue 29 point 2: the score job holds the daemon's one lock for long on a big state; a wake that comes
    meanwhile sets ctx.urgent, the score job stops after the agent in hand, the wake runs within a second or so,
    and the score job goes on from where it stopped on its next run (the daemon runs it again right after)."""
    import threading
    import time

    import occd.relevance.llm as llm
    from occd.config import load_settings
    from occd.jobs import JobSpec, available_jobs
    from occd.jobs import score as score_job
    from occd.ledger import Ledger
    from occd.runtime import daemon as dmod

    real = llm.rate_relevance
    rated: list[str] = []

    def slow(*a, **k):  # a model call per agent: a quarter of a second each, ten seconds for the state
        time.sleep(0.25)
        out = real(*a, **k)
        rated.append(threading.current_thread().name)
        return out

    monkeypatch.setattr(llm, "rate_relevance", slow)
    woke: list[float] = []
    reg = (JobSpec("scan", "x", lambda s: 300, func=lambda ctx: woke.append(time.monotonic()) or {}),
           JobSpec("score", "occd.jobs.score", lambda s: 3600))
    d = dmod.Daemon(lambda: load_settings({"state_dir": str(ws)}), jobs=reg, env={})
    with Ledger.open() as led:
        d.ctx = d.make_context(led)
        d._registered = {spec.name: (spec, fn) for spec, fn in available_jobs(reg, d.settings)}
        t = threading.Thread(target=d.periodic, args=("score",), name="score")
        t.start()
        deadline = time.monotonic() + 60
        while not rated and time.monotonic() < deadline:  # the score job is among its agents
            time.sleep(0.05)
        t0 = time.monotonic()
        d.cycle()
        took = time.monotonic() - t0
        t.join(120)
        first = len(rated)
        assert d.last_results["score"].get("yielded") is True and took < 5, (took, d.last_results["score"])
        assert 0 < first < AGENTS and d.ctx.cache[score_job.RESUME_KEY] < f"agent{AGENTS - 1:04d}"
        d.periodic("score")  # the rest, from where it stopped
    assert len(woke) == 1 and not d.last_results["score"].get("yielded")
    assert len(rated) >= AGENTS - 1 and score_job.RESUME_KEY not in d.ctx.cache


def test_the_checks_run_beside_the_wakes(isolated_env, monkeypatch):
    """Issue 29 point 2: `occd check` (weekly) and `check --read-data` (monthly) read every backup and archive:
    minutes on a big history. They run beside the wakes, on their own ledger connection, so a run's end is
    handled while they read; the other periodic jobs keep the one lock."""
    import threading
    import time

    from occd.config import load_settings
    from occd.jobs import JOBS, JobSpec, available_jobs
    from occd.ledger import Ledger
    from occd.runtime import daemon as dmod

    assert {j.name for j in JOBS if not j.locked} == {"check", "check-data"}
    reading, release, seen = threading.Event(), threading.Event(), {}

    def long_check(ctx):  # a check that reads for as long as the test lets it, recording in its own ledger
        seen["ledger"] = ctx.ledger
        ctx.ledger.record_scan(ctx.now(), 0.0, agents=0, sessions_seen=0, sessions_changed=0, bytes_read=0)
        reading.set()
        release.wait(30)
        return {"artifacts": 0}

    woke: list[float] = []
    reg = (JobSpec("scan", "x", lambda s: 300, func=lambda ctx: woke.append(time.monotonic()) or {}),
           JobSpec("check", "x", lambda s: 86400, in_cycle=False, func=long_check, locked=False))
    d = dmod.Daemon(lambda: load_settings({"state_dir": str(isolated_env / ".openclaw")}), jobs=reg, env={})
    with Ledger.open() as led:
        d.ctx = d.make_context(led)
        d._registered = {spec.name: (spec, fn) for spec, fn in available_jobs(reg, d.settings)}
        t = threading.Thread(target=d.periodic, args=("check",), name="check")
        t.start()
        assert reading.wait(30)
        t0 = time.monotonic()
        d.cycle()  # a wake while the check reads: not held up
        took = time.monotonic() - t0
        release.set()
        t.join(30)
        assert woke and took < 2 and not d.ctx.urgent.is_set(), took
        assert seen["ledger"] is not led and d.last_results["check"]["ok"]
        assert led.last_scan() is not None  # what the check recorded on its connection is in the one ledger


def test_a_wake_for_events_looks_at_the_agents_that_changed(ws, looks, monkeypatch):
    """Issue 29 point 1 at 2,000 agents: on a wake for events (ctx.changed: the agents the watcher saw change) the
    scan looks at no other agent's folder or files: no listing, no stat; their sessions are what the last scan saw.
    A named agent is looked at again; one the last listing did not have makes it list the agents again; the
    scheduled scan (ctx.changed None) looks at everything, what no event named included."""
    import os

    from occd.config import load_settings
    from occd.jobs import JobContext, run_cycle
    from occd.ledger import Ledger

    agents_dir = str(ws / "agents") + os.sep
    stats: list[str] = []
    real_stat = os.stat

    def stat(p, *a, **k):
        s = os.fspath(p) if not isinstance(p, int) else ""
        if isinstance(s, str) and s.startswith(agents_dir):
            stats.append(s[len(agents_dir):].split(os.sep, 1)[0])
        return real_stat(p, *a, **k)

    def grow(agent):
        p = sorted((ws / "agents" / agent / "sessions").glob("*.jsonl"))[1]
        with open(p, "ab") as fh:
            fh.write(b'{"type":"custom","customType":"t","data":{},"id":"ab12cd34","parentId":null,'
                     b'"timestamp":"2026-11-27T10:00:00.000Z"}\n')
        return p

    def seen_size(ctx, p):
        return next(o.size for o in ctx.last_scan.sessions if o.path == p)

    with Ledger.open() as led:
        ctx = JobContext(settings=load_settings({"state_dir": str(ws)}), ledger=led, state_dir=ws)
        run_cycle(ctx, WAKE)
        monkeypatch.setattr(os, "stat", stat)
        looks.update(list_agents=0, detect_era=0)
        ctx.changed = frozenset()  # a wake, nothing of an agent changed (the lean view's counts, a deferral due)
        res = run_cycle(ctx, WAKE)
        assert all(ok for ok, _ in res.values()), res
        assert stats == [] and looks == {"list_agents": 0, "detect_era": 0}, (stats[:5], looks)
        assert res["scan"][1]["sessions"] == AGENTS * 6 and res["scan"][1]["changed"] == 0

        p = grow("agent0009")
        other = grow("agent0011")  # written, but no event named it (yet)
        stats.clear()
        ctx.changed = frozenset({"agent0009"})
        res = run_cycle(ctx, WAKE)
        assert set(stats) == {"agent0009"} and looks == {"list_agents": 0, "detect_era": 1}, (set(stats), looks)
        assert res["scan"][1]["changed"] == 1 and seen_size(ctx, p) == p.stat().st_size
        assert seen_size(ctx, other) < other.stat().st_size

        stats.clear()
        (ws / "agents" / "agent-new" / "sessions").mkdir(parents=True)
        try:
            ctx.changed = frozenset({"agent-new"})  # not in the last listing: every agent is listed again
            res = run_cycle(ctx, WAKE)
            assert looks["list_agents"] == 1 and res["scan"][1]["agents"] == AGENTS + 1
            assert seen_size(ctx, other) < other.stat().st_size
        finally:
            (ws / "agents" / "agent-new" / "sessions").rmdir()
            (ws / "agents" / "agent-new").rmdir()
        ctx.changed = None
        res = run_cycle(ctx, WAKE)  # the scheduled scan: every agent, every file
        assert res["scan"][1]["agents"] == AGENTS and seen_size(ctx, other) == other.stat().st_size


def _three_agents(tmp_path, monkeypatch):
    """A small workstation (3 agents of 2 sessions) in tmp_path, with occd's home beside it."""
    from tests.statefactory import build_workstation

    state = tmp_path / ".openclaw"
    build_workstation(state, 3, 2, mean_bytes=3_000, templates=2)
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(state))
    monkeypatch.setenv("OCCD_HOME", str(tmp_path / "occd-home"))
    return state


@contextlib.contextmanager
def _context(state):
    """The daemon's job context on `state`, with its ledger open, on the defaults."""
    from occd.config import load_settings
    from occd.jobs import JobContext
    from occd.ledger import Ledger

    with Ledger.open() as led:
        yield JobContext(settings=load_settings({"state_dir": str(state)}), ledger=led, state_dir=state)


def test_a_wake_keeps_an_agents_new_era(tmp_path, monkeypatch):
    """An agent named by a wake whose era changed (its first session, its last one gone) is listed anew, and the
    wakes after it, naming other agents, keep the new era (they used to go back to the listing's)."""
    import shutil

    from occd.jobs import run_cycle

    state = _three_agents(tmp_path, monkeypatch)
    agents = sorted(p.name for p in (state / "agents").iterdir())
    fresh = state / "agents" / "fresh" / "sessions"
    fresh.mkdir(parents=True)

    def eras(ctx):
        return dict(ctx.last_scan.agents), sum(o.agent == "fresh" for o in ctx.last_scan.sessions)

    with _context(state) as ctx:
        run_cycle(ctx, WAKE)
        assert eras(ctx)[0]["fresh"] == "empty"
        src = sorted((state / "agents" / agents[0] / "sessions").glob("*.jsonl"))[0]
        shutil.copy(src, fresh / src.name)  # its first session
        for named in ({"fresh"}, {agents[1]}, set()):
            ctx.changed = frozenset(named)
            run_cycle(ctx, WAKE)
            assert eras(ctx) == ({**eras(ctx)[0], "fresh": "file"}, 1), named
        (fresh / src.name).unlink()  # its last session gone
        for named in ({"fresh"}, {agents[1]}):
            ctx.changed = frozenset(named)
            run_cycle(ctx, WAKE)
            assert eras(ctx)[0]["fresh"] == "empty" and eras(ctx)[1] == 0, named


def test_a_wake_for_another_agent_looks_again_at_a_session_whose_run_ended(tmp_path, monkeypatch):
    """A session that was running at the last look, whose run lock is now released: a wake that names another
    agent (its own key may still be settling) looks at its agent's files again, so nothing is decided on the
    figure from before the run (it used to reuse that figure, marked as no longer running)."""
    import os

    from occd.jobs import run_cycle
    from tests.statefactory import write_lock

    state = _three_agents(tmp_path, monkeypatch)
    a, b = sorted(p.name for p in (state / "agents").iterdir())[:2]
    p = sorted((state / "agents" / a / "sessions").glob("*.jsonl"))[0]
    lock = write_lock(p.with_name(p.name + ".lock"), os.getpid())

    def seen(ctx):
        return next(o for o in ctx.last_scan.sessions if o.path == p)

    with _context(state) as ctx:
        run_cycle(ctx, WAKE)
        assert seen(ctx).running
        ctx.changed = frozenset({b})  # a's run goes on: what the last look saw is kept
        run_cycle(ctx, WAKE)
        assert seen(ctx).running
        with open(p, "ab") as fh:  # the run's last writes, then its lock released
            fh.write(b'{"type":"custom","customType":"t","data":{},"id":"ab12cd35","parentId":null,'
                     b'"timestamp":"2026-11-27T10:00:00.000Z"}\n')
        lock.unlink()
        ctx.changed = frozenset({b})
        run_cycle(ctx, WAKE)
        assert not seen(ctx).running and seen(ctx).size == p.stat().st_size
