"""Relevance: discovery (OpenClaw file + database era, Claude Code, linking, origin), project status, the pure
score table, keyword fallback, model path through the worker (mock_response and the fake server), the cache,
the budget, the selection table with and without the model, and the score job."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_llm_server import FakeLLM  # noqa: E402

from occd.relevance import scoring  # noqa: E402
from occd.relevance.claude_code import claude_slug  # noqa: E402
from occd.relevance.discovery import discover  # noqa: E402

NOW = 1_800_000_000.0
H = 3600.0
D = 86400.0


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def oc_lines(sid: str, cwd: str, users: list[str], *, start: float, usage: int = 20000, compactions: int = 0,
             pad: int = 0) -> list[dict]:
    out = [{"type": "session", "version": 3, "id": sid, "timestamp": _iso(start), "cwd": cwd}]
    parent = None
    n = 0
    for i, u in enumerate(users):
        for role, content in (("user", u), ("assistant", [{"type": "text", "text": f"done {i} " + "x" * pad}])):
            n += 1
            eid = f"{n:08x}"
            msg = {"role": role, "content": content, "timestamp": int((start + n) * 1000)}
            if role == "assistant":
                msg.update(api="anthropic-messages", provider="anthropic", model="claude-opus-4-6",
                           usage={"input": 10, "output": 10, "totalTokens": usage}, stopReason="stop")
            out.append({"type": "message", "id": eid, "parentId": parent, "timestamp": _iso(start + n), "message": msg})
            parent = eid
    for c in range(compactions):
        n += 1
        eid = f"{n:08x}"
        out.append({"type": "compaction", "id": eid, "parentId": parent, "timestamp": _iso(start + n),
                    "summary": "s", "firstKeptEntryId": parent, "tokensBefore": 1000})
        parent = eid
    return out


def write_jsonl(path: Path, objs: list[dict], mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def make_file_agent(state: Path, agent: str, sessions: list[dict]) -> Path:
    """sessions: dicts with sid, users, cwd, mtime, [key, label, compactions, entry_extra, usage]."""
    sdir = state / "agents" / agent / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    index = {}
    for s in sessions:
        p = write_jsonl(sdir / f"{s['sid']}.jsonl",
                        oc_lines(s["sid"], s["cwd"], s["users"],  # the last entry written at mtime
                                 start=s["mtime"] - 2 * len(s["users"]) - s.get("compactions", 0),
                                 usage=s.get("usage", 20000),
                                 compactions=s.get("compactions", 0), pad=s.get("pad", 0)), s["mtime"])
        entry = {"sessionId": s["sid"], "sessionFile": str(p), "updatedAt": int(s["mtime"] * 1000),
                 "compactionCount": s.get("compactions", 0), "model": "claude-opus-4-6", "modelProvider": "anthropic"}
        if s.get("label"):
            entry["label"] = s["label"]
        entry.update(s.get("entry_extra", {}))
        index[s.get("key", f"agent:{agent}:{s['sid'][:6]}")] = entry
    (sdir / "sessions.json").write_text(json.dumps(index, indent=2))
    return sdir


def make_db_agent(state: Path, agent: str, sessions: list[dict]) -> Path:
    db = state / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    c = sqlite3.connect(db)
    c.executescript("""
        CREATE TABLE session_nodes (session_key TEXT PRIMARY KEY, current_session_id TEXT, entry_json TEXT,
            entry_valid INTEGER, status TEXT, updated_at INTEGER, label TEXT, display_name TEXT, archived_at INTEGER);
        CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, event_zstd BLOB,
            event_utf8_bytes INTEGER);
        PRAGMA user_version = 23;""")
    for s in sessions:
        entry = {"sessionId": s["sid"], "compactionCount": s.get("compactions", 0), "totalTokens": 30000,
                 "updatedAt": int(s["mtime"] * 1000), **s.get("entry_extra", {})}
        c.execute("INSERT INTO session_nodes VALUES (?,?,?,?,?,?,?,?,?)",
                  (s.get("key", f"agent:{agent}:main"), s["sid"], json.dumps(entry), 1, s.get("status", "done"),
                   int(s["mtime"] * 1000), s.get("label"), None, None))
        for i, o in enumerate(oc_lines(s["sid"], s["cwd"], s["users"], start=s["mtime"] - 600)):
            o = dict(o)
            if i == 0:
                o["version"] = 4
            raw = json.dumps(o, separators=(",", ":"))
            c.execute("INSERT INTO transcript_events VALUES (?,?,?,?,?)", (s["sid"], i, raw, None, len(raw)))
    c.commit()
    c.close()
    return db


def cc_lines(sid: str, cwd: str, users: list[str], branch: str, *, start: float, compactions: int = 0,
             first_extra: str = "") -> list[dict]:
    out = []
    t = start
    for i, u in enumerate(users):
        text = (first_extra + u) if i == 0 else u
        out.append({"parentUuid": None, "isSidechain": False, "type": "user", "cwd": cwd, "sessionId": sid,
                    "gitBranch": branch, "timestamp": _iso(t), "message": {"role": "user", "content": text}})
        out.append({"type": "user", "cwd": cwd, "sessionId": sid, "gitBranch": branch, "timestamp": _iso(t + 1),
                    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                              "content": "file contents"}]}})
        out.append({"type": "assistant", "cwd": cwd, "sessionId": sid, "gitBranch": branch, "timestamp": _iso(t + 2),
                    "message": {"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                                "usage": {"input_tokens": 5, "cache_creation_input_tokens": 1000,
                                          "cache_read_input_tokens": 20000, "output_tokens": 100}}})
        if i < compactions:
            out.append({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                        "sessionId": sid, "timestamp": _iso(t + 3), "compactMetadata": {"trigger": "auto"}})
        t += 10
    return out


def make_cc_session(home: Path, repo: Path, sid: str, users: list[str], branch: str, mtime: float, **kw) -> Path:
    p = home / ".claude" / "projects" / claude_slug(repo) / f"{sid}.jsonl"
    return write_jsonl(p, cc_lines(sid, str(repo), users, branch, start=mtime - 10 * len(users), **kw), mtime)


def git_repo(path: Path, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    for args in (["init", "-q", "-b", branch], ["commit", "-q", "--allow-empty", "-m", "initial commit"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


# ---------------------------------------------------------------------------------------------------------
# scoring: the table
# ---------------------------------------------------------------------------------------------------------

F = scoring.Facts


@pytest.mark.parametrize("facts,rating,branch,total,forced", [
    # fresh, same branch, same work, healthy: everything
    (F("a", branch="main", last_modified=NOW - 600, created=NOW - 3600, message_count=40, size=10_000), 0.9, "main", 1.0, []),
    # other branch, 2 h old, related (0.45 → 0.175), healthy
    (F("b", branch="dev", last_modified=NOW - 2 * H, created=NOW - 3 * H, message_count=40, size=10_000), 0.45, "main", 0.635, []),
    # unrelated: −0.15, 10 days old (recency 0, health −0.05)
    (F("c", branch="main", last_modified=NOW - 10 * D, created=NOW - 12 * D, message_count=40), 0.05, "main", 0.35, []),
    # weak relevance band 0.1..0.3 → 0 points; 2 days old → 0.08; branch unknown → half the branch points
    (F("d", last_modified=NOW - 2 * D, created=NOW - 2 * D, message_count=10), 0.2, None, 0.505, []),
    # 2 compactions (−0.10), 40% context (−0.025), > 500 messages and > 5 MB (−0.10)
    (F("e", branch="main", last_modified=NOW - 600, created=NOW - 3600, message_count=600, size=6 << 20, compactions=2,
       context_tokens=80_000, context_window=200_000), 0.9, "main", 0.775, []),
    # forced: 3 compactions
    (F("f", last_modified=NOW - 600, created=NOW - 600, compactions=3), 0.9, None, 0.875, ["3 compactions"]),
    # forced: 70% of the context window (−0.05); 14000 tokens per message but only 10 messages: no density penalty
    (F("g", last_modified=NOW - 600, created=NOW - 600, message_count=10, context_tokens=140_000,
       context_window=200_000), 0.9, None, 0.825, ["context 70%"]),
    # ... with 20 messages the density (7000 per message) costs 0.05 more
    (F("g2", last_modified=NOW - 600, created=NOW - 600, message_count=20, context_tokens=140_000,
       context_window=200_000), 0.9, None, 0.775, ["context 70%"]),
    # forced: unrelated and > 200 messages
    (F("h", last_modified=NOW - 600, created=NOW - 600, message_count=201), 0.05, None, 0.475, ["unrelated"]),
    # not forced: unrelated but only 200 messages
    (F("i", last_modified=NOW - 600, created=NOW - 600, message_count=200), 0.05, None, 0.475, []),
    # forced: cost 0.8 of a 1.0 budget
    (F("j", last_modified=NOW - 600, created=NOW - 600, cost_usd=0.8), 0.9, None, 0.875, ["cost"]),
])
def test_score_table(facts, rating, branch, total, forced):
    s = scoring.score_session(facts, rating, current_branch=branch, now=NOW, cost_budget_usd=1.0)
    assert s.total == pytest.approx(total, abs=1e-9), s
    assert len(s.forced_fresh) == len(forced)
    for want, got in zip(forced, s.forced_fresh):
        assert want in got


@pytest.mark.parametrize("age,pts", [(0, 0.20), (3599, 0.20), (3600, 0.16), (6 * H - 1, 0.16), (6 * H, 0.12),
                                     (24 * H, 0.08), (3 * D, 0.04), (7 * D - 1, 0.04), (7 * D, 0.0)])
def test_recency_steps(age, pts):
    assert scoring.recency_points(NOW - age, NOW) == pytest.approx(pts)


@pytest.mark.parametrize("r,pts", [(1.0, 0.25), (0.6, 0.25), (0.45, 0.175), (0.3, 0.10), (0.29, 0.0), (0.1, 0.0),
                                   (0.099, -0.15), (0.0, -0.15)])
def test_relevance_points(r, pts):
    assert scoring.relevance_points(r) == pytest.approx(pts)


def test_decide_resume_fresh_queue_label():
    a = F("aaaaaaaa-1", branch="main", last_modified=NOW - 600, message_count=10)
    b = F("bbbbbbbb-2", branch="main", last_modified=NOW - 600, message_count=10, running=True)
    c = F("cccccccc-3", last_modified=NOW - 9 * D, message_count=10, label="billing")
    sc = lambda f, r: scoring.score_session(f, r, current_branch="main", now=NOW)  # noqa: E731
    d = scoring.decide([a, c], {a.id: sc(a, 0.9), c.id: sc(c, 0.9)})
    assert (d.action, d.session_id) == ("resume", a.id)
    # same branch + just active + healthy adds up to the 0.60 threshold even when unrelated: never resumed
    # (issue 14: "Resume 02ddd362: scores 0.60 ≥ 0.60 (relevance 0.00 ...)"), and the reason says why
    assert sc(a, 0.0).total == pytest.approx(0.6)
    d = scoring.decide([a, c], {a.id: sc(a, 0.0), c.id: sc(c, 0.0)})
    assert d.action == "fresh" and d.session_id is None
    assert "no session is related" in d.reason and "0.00" in d.reason and "0.60" in d.reason
    for r in (0.0, 0.2, 0.49):  # below the model's floor: fresh whatever the other parts add up to
        full = F("dddddddd-4", branch="main", last_modified=NOW - 60, created=NOW - 120, message_count=4)
        assert scoring.decide([full], {full.id: sc(full, r)}).action == "fresh"
    kw = lambda f, r: scoring.score_session(f, r, current_branch="main", now=NOW, related_at=0.2)  # noqa: E731
    assert scoring.decide([a], {a.id: kw(a, 0.25)}).action == "resume"   # keyword overlap 0.25 ≥ its floor
    assert scoring.decide([a], {a.id: kw(a, 0.15)}).action == "fresh"
    # related but low: the threshold still applies, and the reason names the score
    other = lambda f, r: scoring.score_session(f, r, current_branch="dev", now=NOW)  # noqa: E731
    old = F("eeeeeeee-5", branch="dev2", last_modified=NOW - 6 * D, created=NOW - 9 * D, message_count=10)
    d = scoring.decide([old], {old.id: other(old, 0.5)})
    assert d.action == "fresh" and "< 0.60" in d.reason and "best related session" in d.reason
    # the caller is never the answer, even as the only related session, running (it is: it is calling us)
    me = F("ffffffff-6", branch="main", last_modified=NOW - 5, message_count=10, running=True, is_self=True)
    d = scoring.decide([me], {me.id: sc(me, 1.0)})
    assert d.action == "fresh" and d.session_id is None and "calling session itself" in d.reason
    d = scoring.decide([me, a], {me.id: sc(me, 1.0), a.id: sc(a, 0.9)})
    assert (d.action, d.session_id) == ("resume", a.id)
    d = scoring.decide([me, a], {me.id: sc(me, 1.0), a.id: sc(a, 0.9)}, label=me.id)
    assert d.action == "fresh" and "calling session itself" in d.reason
    d = scoring.decide([b, c], {b.id: sc(b, 0.9), c.id: sc(c, 0.9)})
    assert (d.action, d.session_id) == ("queue", b.id)
    d = scoring.decide([a, c], {a.id: sc(a, 0.9), c.id: sc(c, 0.0)}, label="billing")
    assert (d.action, d.session_id) == ("resume", c.id) and "label" in d.reason
    d = scoring.decide([a], {a.id: sc(a, 0.9)}, label="nope")
    assert d.action == "fresh"


# ---------------------------------------------------------------------------------------------------------
# discovery
# ---------------------------------------------------------------------------------------------------------

def test_discovery_both_eras_claude_link_and_origin(isolated_env):
    home = isolated_env
    repo = git_repo(home / "src" / "shop")
    state = home / ".openclaw"
    now = time.time()
    make_file_agent(state, "main", [
        {"sid": "oc-linked", "users": ["refactor the webhook handler", "add retries to webhook delivery"],
         "cwd": str(repo), "mtime": now - 2 * H, "label": "webhooks",
         "entry_extra": {"claudeCliSessionId": "cc-linked", "cliSessionIds": {"claude-cli": "cc-linked"}}},
        {"sid": "oc-other", "users": ["plan the holiday rota"], "cwd": str(home / "elsewhere"), "mtime": now - 5 * D,
         "compactions": 2},
    ])
    make_db_agent(state, "ops", [{"sid": "db-1", "users": ["rotate the TLS certificates"], "cwd": str(repo),
                                  "mtime": now - 3 * H, "status": "running"}])
    make_cc_session(home, repo, "cc-linked", ["refactor the webhook handler", "now the tests"], "feature/hooks",
                    now - 60 * 30, compactions=2)
    make_cc_session(home, repo, "cc-origin", ["check the invoice export"], "main", now - 4 * H,
                    first_extra="[openclaw:agent=ops] ")
    make_cc_session(home, repo, "cc-plain", ["update README badges"], "main", now - 6 * H)

    d = discover(state_dir=state)
    by = {s.id: s for s in d.sessions}
    assert set(by) == {"oc-linked", "oc-other", "db-1", "cc-origin", "cc-plain"}, d.warnings
    s = by["oc-linked"]
    assert s.source == "both" and s.claude_session_id == "cc-linked" and s.branch == "feature/hooks"
    assert s.first_user_message == "refactor the webhook handler"
    assert s.latest_user_task == "add retries to webhook delivery"
    assert s.compaction_count == 2 and s.message_count == 4 and s.label == "webhooks" and s.agent == "main"
    assert s.context_tokens == 20000 and s.context_window == 200000
    assert by["db-1"].era == "db" and by["db-1"].running and by["db-1"].running_source == "database"
    assert by["db-1"].first_user_message == "rotate the TLS certificates" and by["db-1"].message_count == 2
    assert by["db-1"].repo_path == str(repo)
    o = by["cc-origin"]
    assert o.source == "claude-code" and o.origin_agent == "ops" and o.agent == "ops"
    assert o.to_json()["origin"] == "[openclaw:agent=ops]"
    p = by["cc-plain"]
    assert p.latest_user_task == "update README badges"  # the tool_result user line is not a task
    assert p.context_tokens == 21105 and p.message_count == 2 and p.model == "claude-sonnet-4-5"  # prompt + reply
    assert by["oc-other"].compaction_count == 2

    # filters: repo keeps what runs inside it; agent keeps its sessions and Claude sessions it started
    in_repo = {s.id for s in discover(state_dir=state, repo=repo).sessions}
    assert in_repo == {"oc-linked", "db-1", "cc-origin", "cc-plain"}
    ops = {s.id for s in discover(state_dir=state, agent="ops").sessions}
    assert ops == {"db-1", "cc-origin"}


def test_claude_compactions_counted_from_a_big_file_incrementally(isolated_env, tmp_path):
    home = isolated_env
    repo = home / "r"
    users = [f"step {i} " + "word " * 400 for i in range(200)]  # > head+tail windows
    p = make_cc_session(home, repo, "big", users, "main", time.time() - 3600, compactions=7)
    cache = tmp_path / "counts.json"
    d = discover(state_dir=None, counter_cache=cache)
    (s,) = d.sessions
    assert s.compaction_count == 7 and s.message_count == 400  # 200 prompts + 200 replies; tool results are not messages
    assert s.first_user_message.startswith("step 0") and s.latest_user_task.startswith("step 199")
    first_read = d.counter_bytes_read
    assert first_read > 0
    with open(p, "a") as fh:  # an append: only the new bytes are counted
        extra = cc_lines("big", str(repo), ["one more"], "main", start=time.time(), compactions=1)
        fh.write("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in extra))
    d2 = discover(state_dir=None, counter_cache=cache)
    assert d2.sessions[0].compaction_count == 8 and d2.sessions[0].message_count == 402
    assert 0 < d2.counter_bytes_read < 10_000 < first_read


# ---------------------------------------------------------------------------------------------------------
# project status
# ---------------------------------------------------------------------------------------------------------

def test_project_status_counts_and_fake_gh(isolated_env, tmp_path, monkeypatch):
    from occd.relevance.project import project_status

    repo = git_repo(tmp_path / "p", "trunk")
    (repo / "README.md").write_text("x")
    (repo / "AGENTS.md").write_text("x")
    subprocess.run(["git", "add", "README.md"], cwd=repo, check=True)
    (repo / "new.txt").write_text("u")
    st = project_status(repo / "AGENTS.md")
    assert st.branch == "trunk" and st.uncommitted == 1 and st.untracked == 2 and st.stashes == 0
    assert st.commits[0].subject == "initial commit" and st.key_docs == ["README.md", "AGENTS.md"]
    assert st.pull_requests is None or isinstance(st.pull_requests, list)

    bindir = tmp_path / "bin"
    bindir.mkdir()
    gh = bindir / "gh"
    gh.write_text("#!/bin/sh\nif [ \"$1\" = auth ]; then exit ${GH_FAKE_AUTH:-0}; fi\n"
                  "echo '[{\"number\":7,\"title\":\"Fix hooks\",\"headRefName\":\"hooks\",\"url\":\"u\",\"isDraft\":false,"
                  "\"statusCheckRollup\":[{\"conclusion\":\"SUCCESS\"},{\"conclusion\":\"FAILURE\"},{\"state\":\"PENDING\"}]}]'\n")
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    st = project_status(repo)
    assert [(p.number, p.checks) for p in st.pull_requests] == [(7, {"success": 1, "failure": 1, "pending": 1})]
    monkeypatch.setenv("GH_FAKE_AUTH", "1")  # not logged in: skipped silently
    st = project_status(repo)
    assert st.pull_requests is None and not st.warnings


def test_project_status_not_a_repo_is_a_clear_error(isolated_env, tmp_path):
    from click.testing import CliRunner

    from occd.cli.main import cli

    (tmp_path / "plain").mkdir()
    r = CliRunner().invoke(cli, ["project-status", str(tmp_path / "plain"), "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["error"]["code"] == "NOT_A_REPO" and "not a git repository" in out["error"]["message"]


# ---------------------------------------------------------------------------------------------------------
# the model path
# ---------------------------------------------------------------------------------------------------------

from occd.config import LLMSettings  # noqa: E402
from occd.relevance.llm import RateItem, parse_answer, rate_relevance  # noqa: E402


def items():
    return [RateItem("s0", "f0", "first: refactor webhook handler", "refactor webhook handler"),
            RateItem("s1", "f1", "first: holiday rota", "plan the holiday rota")]


def test_parse_answer_clamps_and_ignores_unknown_indices():
    assert parse_answer('{"scores":[{"index":0,"relevance":7},{"index":99,"relevance":0.5},'
                        '{"index":1,"relevance":-2}]}', 2) == {0: 1.0, 1: 0.0}
    assert parse_answer('```json\n{"scores":[{"index":1,"relevance":0.4}]}\n```', 2) == {1: 0.4}
    for bad in ("nope", '{"scores":"x"}', '{"scores":[{"index":5,"relevance":1}]}', ""):
        with pytest.raises(ValueError):
            parse_answer(bad, 2)


def test_mock_response_through_the_worker_no_network(isolated_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real-000000000000")
    llm = LLMSettings(model="gpt-4o-mini")
    res = rate_relevance("clean up HTTP endpoint logic", items(), llm=llm, model="gpt-4o-mini",
                         mock_response='{"scores":[{"index":0,"relevance":0.85},{"index":1,"relevance":0.02}]}')
    assert res.method == "model" and res.reason is None
    assert res.ratings["s0"].relevance == 0.85 and res.ratings["s1"].relevance == 0.02
    assert res.calls == 1 and res.cost_usd > 0  # litellm's bundled price map knows gpt-4o-mini
    assert "litellm" not in sys.modules  # only the worker process imported it


def test_no_key_falls_back_without_starting_a_worker(isolated_env):
    calls = []
    res = rate_relevance("refactor webhook handler", items(), llm=LLMSettings(model="gpt-4o-mini"), model="gpt-4o-mini",
                         worker=lambda req, t: calls.append(req))
    assert calls == [] and res.method == "keywords" and "OPENAI_API_KEY" in res.reason
    assert res.ratings["s0"].relevance == 1.0 and res.ratings["s1"].relevance == 0.0


@pytest.fixture
def fake_llm():
    srv = FakeLLM(rules=[("webhook", 0.9), ("endpoint", 0.8), ("rota", 0.05)]).start()
    yield srv
    srv.stop()


def _llm(srv, **kw):
    return LLMSettings(model="openai/fake-model", api_base=srv.base_url, **{"timeout_seconds": 3.0, **kw})


@pytest.mark.parametrize("script,method,reason,requests", [
    (["ok"], "model", None, 1),
    (["slow:6"], "keywords", "timed out", 1),
    (["500"], "keywords", "failed", 1),
    (["429", "ok"], "model", None, 2),
    (["malformed"], "keywords", "not valid JSON", 1),
    (["bad"], "mixed", "did not rate 1 session", 1),
])
@pytest.mark.slow
def test_fake_server_paths(isolated_env, fake_llm, script, method, reason, requests):
    from occd.ledger import Ledger

    fake_llm.script(script)
    with Ledger.open() as led:
        t0 = time.monotonic()
        res = rate_relevance("refactor webhook handler", items(), llm=_llm(fake_llm), model="openai/fake-model",
                             ledger=led, now=time.time())
        took = time.monotonic() - t0
        usage = led.llm_usage(0)
    assert res.method == method, res
    assert (reason is None and res.reason is None) or reason in (res.reason or "")
    assert len(fake_llm.requests) == requests
    body = fake_llm.requests[0]
    assert body["temperature"] == 0 and body["response_format"]["type"] == "json_schema"
    assert usage["calls"] == 1
    if script == ["bad"]:  # index 99 ignored, relevance 7 clamped to 1; index 1 unrated → keywords
        assert res.ratings["s0"].relevance == 1.0 and res.ratings["s0"].method == "model"
        assert res.ratings["s1"].method == "keywords"
    if script == ["slow:6"]:
        assert took < 30


@pytest.mark.slow
def test_cache_means_an_unchanged_session_is_never_rated_twice(isolated_env, fake_llm):
    from occd.ledger import Ledger

    llm = _llm(fake_llm)
    with Ledger.open() as led:
        r1 = rate_relevance("refactor webhook handler", items(), llm=llm, model="openai/fake-model", ledger=led)
        r2 = rate_relevance("refactor webhook handler", items(), llm=llm, model="openai/fake-model", ledger=led)
        changed = [RateItem("s0", "f0-new", "first: refactor webhook handler", "x")] + items()[1:]
        r3 = rate_relevance("refactor webhook handler", changed, llm=llm, model="openai/fake-model", ledger=led)
    assert (r1.calls, r2.calls, r2.cached, r3.calls, r3.cached) == (1, 0, 2, 1, 1)
    assert len(fake_llm.requests) == 2 and r2.method == "model"
    assert "[0]" in fake_llm.requests[1]["messages"][1]["content"]
    assert "[1]" not in fake_llm.requests[1]["messages"][1]["content"]


def test_daily_budget_stops_model_calls(isolated_env, fake_llm):
    from occd.ledger import Ledger

    with Ledger.open() as led:
        led.record_llm_call("gpt-4o-mini", cost_usd=0.6, purpose="relevance", now=time.time())
        res = rate_relevance("refactor webhook handler", items(), llm=_llm(fake_llm, daily_budget_usd=0.5),
                             model="openai/fake-model", ledger=led, now=time.time())
    assert res.method == "keywords" and "budget" in res.reason and fake_llm.requests == []


# ---------------------------------------------------------------------------------------------------------
# selection with and without the model, same fixtures
# ---------------------------------------------------------------------------------------------------------

def _selection_fixture(home: Path):
    repo = git_repo(home / "src" / "api", "main")
    now = time.time()
    state = home / ".openclaw"
    make_file_agent(state, "main", [
        {"sid": "s-webhook", "users": ["refactor the webhook handler"], "cwd": str(repo), "mtime": now - 30 * 60},
        {"sid": "s-rota", "users": ["plan the holiday rota"], "cwd": str(repo), "mtime": now - 20 * 60},
        {"sid": "s-compacted", "users": ["clean up HTTP endpoint logic"], "cwd": str(repo), "mtime": now - 10 * 60,
         "compactions": 3},
    ])
    make_cc_session(home, repo, "cc-endpoint", ["tidy the HTTP endpoint routing"], "main", now - 40 * 60)
    return repo, now


def test_selection_table_with_and_without_model(isolated_env, fake_llm):
    from occd.config import load_settings
    from occd.relevance.select import select_session

    repo, now = _selection_fixture(isolated_env)
    s = load_settings()
    s.llm = _llm(fake_llm, timeout_seconds=20.0)  # a loaded CI machine must not turn this into a timeout test
    task = "clean up HTTP endpoint logic"
    with_model = select_session(s, task=task, repo=repo, now=now, open_ledger=False)
    without = select_session(s, task=task, repo=repo, now=now, use_model=False, open_ledger=False)

    def table(r):
        return {c["id"]: (c["relevanceMethod"], round(c["relevance"], 2), bool(c["forcedFresh"]))
                for c in r.to_json()["candidates"]}

    # the model knows the webhook handler and the endpoint routing are this work; keywords only see shared words
    assert table(with_model) == {"s-webhook": ("model", 0.9, False), "s-rota": ("model", 0.05, False),
                                 "s-compacted": ("model", 0.8, True), "cc-endpoint": ("model", 0.8, False)}
    assert with_model.decision.action == "resume" and with_model.decision.session_id == "cc-endpoint"
    tw = table(without)
    assert {k: v[0] for k, v in tw.items()} == dict.fromkeys(tw, "keywords")
    assert tw["s-webhook"][1] == 0.0 and tw["s-compacted"][1] == 1.0 and tw["s-compacted"][2]
    # keywords still find the Claude Code session (shared "HTTP endpoint"), the webhook session becomes unrelated
    assert tw["cc-endpoint"][1] == pytest.approx(0.33, abs=0.01)
    assert (without.decision.action, without.decision.session_id) == ("resume", "cc-endpoint")
    rank = lambda r: [c["id"] for c in r.to_json()["candidates"]]  # noqa: E731
    assert rank(with_model).index("s-webhook") < rank(with_model).index("s-rota")
    assert rank(without).index("s-webhook") > rank(without).index("s-rota") or \
        without.scores["s-webhook"].relevance == without.scores["s-rota"].relevance == -0.15
    assert without.to_json()["relevance"]["reason"] == "model not used (--no-llm)"


def test_select_cli_json_and_running_means_queue(isolated_env):
    from click.testing import CliRunner

    from occd.cli.main import cli

    repo, now = _selection_fixture(isolated_env)
    lock = isolated_env / ".openclaw" / "agents" / "main" / "sessions" / "s-compacted.jsonl.lock"
    r = CliRunner().invoke(cli, ["select", "--task", "clean up HTTP endpoint logic", "--repo", str(repo), "--json",
                                 "--label", "s-compacted"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["action"] == "resume" and out["sessionId"] == "s-compacted" and "label" in out["reason"]
    lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": _iso(time.time())}))
    r = CliRunner().invoke(cli, ["select", "--task", "x", "--repo", str(repo), "--json", "--label", "s-compacted"])
    assert json.loads(r.stdout)["action"] == "queue"
    r = CliRunner().invoke(cli, ["sessions", "--repo", str(repo), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["count"] == 4


# ---------------------------------------------------------------------------------------------------------
# the score job
# ---------------------------------------------------------------------------------------------------------

def test_score_job_recommends_archives_and_stays_small(isolated_env, fake_llm):
    from occd.config import load_settings
    from occd.jobs import JobContext
    from occd.jobs import score as score_job
    from occd.ledger import Ledger

    home = isolated_env
    now = time.time()
    state = home / ".openclaw"
    make_file_agent(state, "main", [
        {"sid": "active", "users": ["refactor the webhook handler"], "cwd": str(home), "mtime": now - 60},
        {"sid": "old-rota", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 30 * D},
        {"sid": "old-hooks", "users": ["webhook retries"], "cwd": str(home), "mtime": now - 30 * D},
        {"sid": "recent-rota", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 2 * D},
    ])
    s = load_settings()
    s.llm = _llm(fake_llm)
    with Ledger.open() as led:
        ctx = JobContext(settings=s, ledger=led, state_dir=state, clock=lambda: now)
        out = score_job.run(ctx)
        assert out["scored"] == 3 and out["modelCalls"] == 1 and out["archiveCandidates"] == 1
        assert out["wouldArchive"] == 1 and out["archived"] == 0  # observe mode
        (row,) = led.history(kind="archive")
        assert row["session_id"] == "old-rota" and row["dry_run"] and "relevance 0.05" in row["reason"]
        assert set(led.latest_scores()) == {"old-rota", "old-hooks", "recent-rota"}
        out2 = score_job.run(ctx)  # nothing changed: nothing rated again (no model call), no second record
        assert out2["modelCalls"] == 0 and out2["reused"] == 3 and len(led.history(kind="archive")) == 1
        ctx.cache.clear()  # a restarted daemon: the ledger's cache of model ratings answers
        out3 = score_job.run(ctx)
        assert out3["modelCalls"] == 0 and out3["cached"] == 3 and out3["reused"] == 0
    assert "litellm" not in sys.modules
    assert len(fake_llm.requests) == 1


def test_score_job_act_mode_archives_through_the_action_path(isolated_env):
    """Act mode: the irrelevant old idle session is archived by occd.actions.archive (moved to
    sessions/archive/, index entry removed, ledger action ok); keyword fallback since no key is set."""
    from occd.config import load_settings
    from occd.jobs import JobContext
    from occd.jobs import score as score_job
    from occd.ledger import Ledger

    home = isolated_env
    now = time.time()
    state = home / ".openclaw"
    sdir = make_file_agent(state, "main", [
        {"sid": "active", "users": ["refactor the webhook handler"], "cwd": str(home), "mtime": now - 60},
        {"sid": "old-rota", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 30 * D},
        {"sid": "old-hooks", "users": ["refactor webhook handler retries"], "cwd": str(home), "mtime": now - 30 * D},
    ])
    s = load_settings({"policy": {"mode": "act"}})
    with Ledger.open() as led:
        out = score_job.run(JobContext(settings=s, ledger=led, state_dir=state, clock=lambda: now))
        assert out["methods"] == "keywords" and out["modelCalls"] == 0
        assert out["archived"] == 1 and out["archiveCandidates"] == 1
        (row,) = [r for r in led.history(kind="archive") if r["outcome"] == "ok"]
        assert row["session_id"] == "old-rota" and row["trigger"] == "auto" and not row["dry_run"]
    assert (sdir / "archive" / "old-rota.jsonl").exists() and not (sdir / "old-rota.jsonl").exists()
    index = json.loads((sdir / "sessions.json").read_text())
    assert {e["sessionId"] for e in index.values()} == {"active", "old-hooks"}


# ---------------------------------------------------------------------------------------------------------
# Claude Code facts (issue 14): messages as Claude Code shows them, slash commands, spacing, last activity,
# window, HEAD, running from live-process files, the caller
# ---------------------------------------------------------------------------------------------------------

def _cc_realistic(sid: str, cwd: str, start: float, branch: str = "main", model: str = "claude-opus-5-5",
                  requested: str | None = None) -> list[dict]:
    """The shapes Claude Code 2.1.330 writes (seen in real sessions): 3 prompts, a reply split over two lines
    (text, tool call; same message.id), tool results, a /compact with caveat, summary and stdout, queue and
    attachment records, and cost/last-prompt lines without timestamps at the end."""
    t = iter(range(1000))

    def ts():
        return _iso(start + next(t))

    base = {"cwd": cwd, "sessionId": sid, "gitBranch": branch, "isSidechain": False}

    def user(content, **kw):
        return {**base, "type": "user", "timestamp": ts(), "message": {"role": "user", "content": content}, **kw}

    def reply(mid, blocks):
        return {**base, "type": "assistant", "timestamp": ts(), "requestedModel": requested or model,
                "message": {"id": mid, "role": "assistant", "model": model, "content": blocks,
                            "usage": {"input_tokens": 1500, "cache_creation_input_tokens": 0,
                                      "cache_read_input_tokens": 0, "output_tokens": 20}}}

    return [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": ts(), "sessionId": sid},
        user("add a subtract function to the calculator"),
        {**base, "type": "attachment", "timestamp": ts(), "attachment": {"type": "date", "date": "x"}},
        reply("msg_1", [{"type": "text", "text": "Sure."}]),
        user("USE_BASH check status"),
        reply("msg_2", [{"type": "text", "text": "Let me check."}]),
        reply("msg_2", [{"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "git status"}}]),
        user([{"type": "tool_result", "tool_use_id": "tu1", "content": "?? calc.py"}]),
        reply("msg_3", [{"type": "text", "text": "Clean."}]),
        {**base, "type": "system", "subtype": "compact_boundary", "timestamp": ts(), "content": "Conversation compacted"},
        user("This session is being continued from a previous conversation...", isCompactSummary=True,
             isVisibleInTranscriptOnly=True),
        user("<local-command-caveat>The command below was run directly</local-command-caveat>", isMeta=True),
        user("<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args></command-args>"),
        user("<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>"),
        user("<command-message>orchestrator</command-message>\n<command-name>/orchestrator</command-name>\n"
             "<command-args>split the billing export into monthly files</command-args>"),
        user([{"type": "text", "text": "Expanded skill prompt for the orchestrator"}], isMeta=True),
        reply("msg_4", [{"type": "text", "text": "Done."}]),
        {"type": "last-prompt", "lastPrompt": "x", "sessionId": sid},
        {"type": "cost-state", "sessionId": sid, "totalCostUSD": 0.01},
    ]


def test_claude_messages_as_claude_code_shows_them_and_spacing_does_not_matter(isolated_env, tmp_path):
    home = isolated_env
    repo = home / "calc"
    start = time.time() - 5 * D
    objs = _cc_realistic("cc-real", str(repo), start)
    pdir = home / ".claude" / "projects" / claude_slug(repo)
    write_jsonl(pdir / "cc-real.jsonl", objs)
    # the same session re-saved by an archiver with spaces after the colons, padded past the head/tail windows
    spaced = pdir / "cc-spaced.jsonl"
    pad = [{"type": "attachment", "timestamp": _iso(start), "attachment": {"type": "file", "content": "p" * 4000}}] * 60
    spaced.write_text("".join(json.dumps({**o, "sessionId": "cc-spaced"}) + "\n" for o in objs[:10] + pad + objs[10:]))
    assert b'"type": "user"' in spaced.read_bytes() and spaced.stat().st_size > 200_000
    d = discover(state_dir=None, counter_cache=tmp_path / "c.json")
    by = {s.id: s for s in d.sessions}
    # as the user sees it: 4 prompts (3 typed + /compact... + /orchestrator) and 4 replies; msg_2 is one reply
    prompts = ["add a subtract function to the calculator", "USE_BASH check status", "/compact",
               "/orchestrator split the billing export into monthly files"]
    replies = {"msg_1", "msg_2", "msg_3", "msg_4"}
    for sid in ("cc-real", "cc-spaced"):
        s = by[sid]
        assert s.message_count == len(prompts) + len(replies), sid
        assert s.compaction_count == 1, sid
        assert s.first_user_message == "add a subtract function to the calculator"
        assert s.latest_user_task == "split the billing export into monthly files"  # from <command-args>
        assert s.model == "claude-opus-5-5" and s.context_window == 1_000_000  # what Claude Code reports for it
        assert s.context_tokens == 1520 and s.context_percent() == 0.2
    # last activity: the last entry's timestamp, not the file's mtime (the files were just written)
    assert by["cc-real"].last_modified == pytest.approx(start + 18, abs=3)
    assert by["cc-real"].file_mtime > start + 4 * D


@pytest.mark.parametrize("model,requested,window", [
    ("claude-opus-4-6", None, 200_000), ("claude-opus-4-7", None, 1_000_000), ("claude-sonnet-4-5", None, 200_000),
    ("claude-sonnet-4-5", "claude-sonnet-4-5[1m]", 1_000_000), ("claude-sonnet-5", None, 1_000_000),
    ("claude-haiku-4-5-20251001", None, 200_000), ("claude-haiku-5-5", None, 1_000_000),
    ("claude-3-7-sonnet-20250219", None, 200_000), ("claude-fable-5-2", None, 1_000_000), ("gpt-5", None, 200_000),
])
def test_claude_context_window_as_claude_code_reports_it(model, requested, window):
    from occd.relevance.claude_code import claude_context_window

    # checked against `claude -p --model M --output-format json` → modelUsage[M].contextWindow (2.1.330)
    assert claude_context_window(model, requested) == window
    assert claude_context_window("some-proxy-model", None, tokens=350_000) == 1_000_000  # already past 200k


def test_claude_head_branch_is_unknown_and_slash_tasks(isolated_env, tmp_path):
    from occd.relevance.claude_code import task_of_prompt

    home = isolated_env
    repo = home / "r"
    make_cc_session(home, repo, "cc-head", ["fix the büro module"], "HEAD", time.time() - 60)
    (s,) = discover(state_dir=None, counter_cache=tmp_path / "c.json").sessions
    assert s.branch is None and s.to_json()["branch"] is None
    # unknown, not a branch called "HEAD": half the branch points, as for any session whose branch is unknown
    sc = scoring.score_session(facts_of_s(s), 0.9, current_branch="main", now=time.time())
    assert sc.branch == scoring.BRANCH_UNKNOWN_POINTS < scoring.BRANCH_POINTS
    assert task_of_prompt("/init") == "/init" and task_of_prompt("/compact") is None
    assert task_of_prompt("/review-pr 123 please") == "123 please"
    assert task_of_prompt("/etc/hosts is wrong") == "/etc/hosts is wrong"


def facts_of_s(s):
    from occd.relevance.session import facts_of

    return facts_of(s)


def test_claude_running_from_live_process_files_not_recent_writes(isolated_env, tmp_path):
    """~/.claude/sessions/<pid>.json with the pid alive (same process) = running; a file written seconds ago by a
    finished `claude -p` is not; a stale record (dead pid, or a reused pid) is not."""
    home = isolated_env
    repo = home / "r"
    now = time.time()
    make_cc_session(home, repo, "cc-busy", ["long refactor"], "main", now - 3600)   # silent for an hour
    make_cc_session(home, repo, "cc-done", ["quick question"], "main", now - 5)      # just finished
    make_cc_session(home, repo, "cc-stale", ["old work"], "main", now - 5)
    make_cc_session(home, repo, "cc-idle", ["open in a terminal"], "main", now - 600)
    sess = home / ".claude" / "sessions"
    sess.mkdir(parents=True)
    me = os.getpid()
    start = Path(f"/proc/{me}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (sess / f"{me}.json").write_text(json.dumps({"pid": me, "sessionId": "cc-busy", "status": "busy", "procStart": start}))
    dead = subprocess.Popen(["true"])
    dead.wait()
    (sess / f"{dead.pid}.json").write_text(json.dumps({"pid": dead.pid, "sessionId": "cc-stale", "status": "busy"}))
    (sess / "1.json").write_text(json.dumps({"pid": 1, "sessionId": "cc-done", "status": "busy", "procStart": "999999999"}))
    idle = subprocess.Popen(["sleep", "30"])
    try:
        (sess / f"{idle.pid}.json").write_text(json.dumps({"pid": idle.pid, "sessionId": "cc-idle", "status": "idle"}))
        (sess / "junk.json").write_text("{not json")
        by = {s.id: s for s in discover(state_dir=None, counter_cache=tmp_path / "c.json").sessions}
    finally:
        idle.kill()
        idle.wait()
    assert by["cc-busy"].running and by["cc-busy"].running_source == f"claude-code busy (pid {me})"
    assert not by["cc-done"].running and not by["cc-stale"].running   # pid reused by another process / dead
    assert not by["cc-idle"].running and "idle" in by["cc-idle"].open_in


def test_select_leaves_the_caller_out_and_says_where_it_looked(isolated_env, monkeypatch):
    from click.testing import CliRunner

    from occd.cli.main import cli

    home = isolated_env
    repo = git_repo(home / "src" / "calc", "main")
    now = time.time()
    make_cc_session(home, repo, "cc-caller", ["add a subtract function to the calculator"], "main", now - 5)
    sess = home / ".claude" / "sessions"
    sess.mkdir(parents=True)
    (sess / f"{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid(), "sessionId": "cc-caller",
                                                           "status": "busy"}))
    monkeypatch.chdir(repo)
    run = lambda *a: CliRunner().invoke(cli, ["select", "--task", "add a subtract function", "--no-llm", "--json", *a])  # noqa: E731
    out = json.loads(run().stdout)
    assert (out["action"], out["sessionId"]) == ("queue", "cc-caller")  # (without the env: another session's run)
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "cc-caller")
    monkeypatch.setenv("CLAUDECODE", "1")
    out = json.loads(run().stdout)
    assert out["action"] == "fresh" and out["sessionId"] is None and "calling session itself" in out["reason"]
    assert out["candidates"][0]["self"] is True and out["caller"]["claudeSessionId"] == "cc-caller"
    assert out["repoFromCwd"] and "current directory's repository" in out["reason"]
    r = CliRunner().invoke(cli, ["sessions", "--json"])
    assert json.loads(r.stdout)["sessions"][0]["self"] is True

    # nothing at all: say where it looked (CLI human output and JSON), and that select used the cwd's repository
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID")
    import shutil

    shutil.rmtree(home / ".claude")
    r = CliRunner().invoke(cli, ["sessions"])
    assert r.exit_code == 0
    assert "No sessions found" in r.stdout and str(home / ".openclaw") in r.stdout and "missing" in r.stdout
    assert str(home / ".claude" / "projects") in r.stdout
    r = CliRunner().invoke(cli, ["select", "--task", "x", "--no-llm"])
    assert r.exit_code == 0 and str(home / ".claude" / "projects") in r.stdout
    assert f"current directory's repository {repo}" in r.stdout


def test_openclaw_caller_key_and_file_era_last_activity(isolated_env, monkeypatch):
    home = isolated_env
    repo = git_repo(home / "src" / "api", "main")
    now = time.time()
    make_file_agent(home / ".openclaw", "main", [
        {"sid": "oc-me", "key": "agent:main:main", "users": ["refactor the webhook handler"], "cwd": str(repo),
         "mtime": now - 30},
        {"sid": "oc-old", "key": "agent:main:old", "users": ["refactor the webhook handler retries"],
         "cwd": str(repo), "mtime": now - 2 * D, "usage": 2000},
    ])
    p = home / ".openclaw" / "agents" / "main" / "sessions" / "oc-old.jsonl"
    os.utime(p, (now, now))  # restored from a backup just now: its entries still say two days ago
    from occd.config import load_settings
    from occd.relevance.discovery import Caller
    from occd.relevance.select import select_session

    r = select_session(load_settings(), task="refactor the webhook handler", repo=repo, use_model=False,
                       open_ledger=False, caller=Caller(openclaw_key="agent:main:main"), now=now)
    by = {s.id: s for s in r.sessions}
    assert by["oc-me"].is_self and not by["oc-old"].is_self
    assert by["oc-old"].last_modified == pytest.approx(now - 2 * D, abs=5)
    assert (r.decision.action, r.decision.session_id) == ("resume", "oc-old")


def test_nothing_in_the_repository_says_how_many_are_elsewhere(isolated_env, tmp_path):
    home = isolated_env
    repo = git_repo(home / "src" / "empty", "main")
    other = home / "src" / "other"
    make_cc_session(home, other, "cc-else", ["something else"], "main", time.time() - 60)
    make_file_agent(home / ".openclaw", "main", [{"sid": "oc-else", "users": ["x"], "cwd": str(other),
                                                  "mtime": time.time() - 60}])
    d = discover(state_dir=home / ".openclaw", repo=repo, counter_cache=tmp_path / "c.json")
    assert d.sessions == []
    note = d.nothing_found()
    assert f"in repository {repo}" in note
    assert "OpenClaw state" in note and "Claude Code projects" in note and note.count("(1 elsewhere)") == 2
    assert {p["source"]: p["elsewhere"] for p in d.to_json()["searched"]} == {"openclaw": 1, "claude-code": 1}


def test_a_path_too_long_for_the_file_system_is_one_clear_line(isolated_env, tmp_path):
    from click.testing import CliRunner

    from occd.cli.main import cli

    long = str(tmp_path / ("a" * 300))
    for args in (["select", "--task", "x", "--no-llm", "--repo", long], ["sessions", "--repo", long],
                 ["project-status", long]):
        r = CliRunner().invoke(cli, [*args, "--json"])
        assert r.exit_code == 1, (args, r.output)
        err = json.loads(r.stdout)["error"]
        assert err["code"] == "BAD_PATH" and "File name too long" in err["message"] and "Internal" not in err["message"]


# ---- doctor --online: the model answers (issue 16: "LLM key present and reachable") ----------------------

def _doctor(*args, env):
    from click.testing import CliRunner

    from occd.cli.main import cli

    return CliRunner(env=env).invoke(cli, ["doctor", "--check", "llm", *args], catch_exceptions=False)


@pytest.mark.slow
def test_doctor_online_calls_the_model_once_with_one_token_and_nothing_private(isolated_env, fake_llm):
    from occd.relevance.llm import PROBE_MESSAGES

    secret = "sk-test-0123456789abcdefSECRET"
    env = {"OCCD_LLM__MODEL": "openai/fake-model", "OCCD_LLM__API_BASE": fake_llm.base_url,
           "OCCD_LLM__TIMEOUT_SECONDS": "5", "OPENAI_API_KEY": secret, "COLUMNS": "200"}
    r = _doctor(env=env)  # the default doctor stays offline
    assert r.exit_code == 0 and "key present" in r.output and "reachable" not in r.output, r.output
    assert fake_llm.requests == []
    r = _doctor("--online", env=env)
    assert r.exit_code == 0 and "reachable" in r.output and "not reachable" not in r.output, r.output
    (body,) = fake_llm.requests
    assert body["max_tokens"] == 1 and body["messages"] == PROBE_MESSAGES
    assert secret not in json.dumps(body) and "response_format" not in body
    j = json.loads(_doctor("--online", "--json", env=env).output)
    assert j["success"] is True and j["checks"][0]["status"] == "ok"


def test_doctor_online_fails_the_llm_line_when_the_model_does_not_answer(isolated_env, fake_llm):
    fake_llm.script(["500"])
    env = {"OCCD_LLM__MODEL": "openai/fake-model", "OCCD_LLM__API_BASE": fake_llm.base_url,
           "OCCD_LLM__TIMEOUT_SECONDS": "5", "COLUMNS": "200"}
    r = _doctor("--online", env=env)
    assert r.exit_code == 1 and "not reachable" in r.output and "Traceback" not in r.output, r.output
    assert len(fake_llm.requests) == 1
