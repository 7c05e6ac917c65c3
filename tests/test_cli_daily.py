"""Issue 16: the CLI an ops person keeps — ids you can type, dry runs that write nothing, config errors that
name the key, optional parts, layout at 80 and 120 columns."""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from occd.cli.main import cli
from tests.test_cli_sessions import make_state, only_session

IDS = ["01a20771-bb86-7d1a-8000-000000000001", "01a20771-bb87-7d1a-8000-000000000002",
       "01a20771-c3d4-7e00-9000-000000000003", "01a20772-0001-7000-8000-0000000000aa"]


def run(*args, env=None):
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


# ---- ids -----------------------------------------------------------------------------------------------

def test_short_forms_are_unique_parts_from_the_second_group():
    from occd.openclaw.ids import short_forms

    forms = short_forms(IDS)
    for sid, form in forms.items():
        assert form in sid and len(form) >= 4
        assert sum(form.lower() in other.lower() for other in IDS) == 1, (sid, form)  # names exactly one id
        assert not sid.startswith(form)  # the shared time group is not what people read
    assert forms[IDS[2]] == "c3d4"


def test_resolve_any_unique_part_prefix_key_and_closest_on_a_miss():
    from occd.errors import OccdError
    from occd.openclaw.ids import resolve

    items = [(sid, f"agent:main:k{i}") for i, sid in enumerate(IDS)]
    kw = dict(id_of=lambda x: x[0], key_of=lambda x: x[1])
    assert resolve(items, "c3d4", **kw)[0] == IDS[2]           # the second group alone
    assert resolve(items, "0000000000aa", **kw)[0] == IDS[3]   # any unique part
    assert resolve(items, "01a20772", **kw)[0] == IDS[3]       # a prefix
    assert resolve(items, "agent:main:k1", **kw)[0] == IDS[1]  # a key
    with pytest.raises(OccdError) as e:
        resolve(items, "bb8", **kw)                              # too short for a part, not a prefix
    assert e.value.code == "SESSION_NOT_FOUND"
    with pytest.raises(OccdError) as e:
        resolve(items, "01a20771-bb8", **kw)
    assert e.value.code == "AMBIGUOUS_SESSION" and IDS[0] in e.value.hint and IDS[1] in e.value.hint
    with pytest.raises(OccdError) as e:
        resolve(items, "c3d5", **kw)
    assert "closest: c3d4" in e.value.hint


def test_cli_takes_the_part_the_table_shows(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 6}, "agent:main:other": {"turns": 4}})
    out = run("list").output.splitlines()
    shown = [line.split()[0] for line in out[1:]]
    ids = [r["id"] for r in json.loads(run("list", "--json").stdout)["sessions"]]
    assert all(any(s in i and not i.startswith(s) for i in ids) for s in shown)
    for s in shown:
        r = run("info", s, "--json")
        assert r.exit_code == 0 and s in json.loads(r.stdout)["sessionId"]


def test_archived_session_is_pointed_to(isolated_env, tmp_path):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 4}})
    sid, path = only_session(state)
    arch = path.parent / "archive"
    arch.mkdir()
    old = "01a20771-dead-7000-8000-000000000009"
    (arch / f"{old}.jsonl").write_bytes(path.read_bytes())
    r = run("info", "dead")
    assert r.exit_code == 1 and "archived" in r.stderr and "--archived" in r.stderr


def test_strip_tools_with_an_id_says_how_to_write_it(isolated_env):
    make_state(isolated_env, {"agent:main:main": {"turns": 4}})
    r = run("edit", "--strip-tools", "01a20771-bb86")
    assert r.exit_code == 2 and "occd edit 01a20771-bb86 --strip-tools" in r.stderr


# ---- dry runs, undo, counts -----------------------------------------------------------------------------

def test_edit_dry_run_writes_nothing_to_the_ledger(isolated_env):
    from occd import paths

    state = make_state(isolated_env, {"agent:main:main": {"turns": 30, "tools_per_turn": 2}})
    sid, _ = only_session(state)
    r = run("edit", sid, "--strip-tools=extreme", "--dry-run", "--force")
    assert r.exit_code == 0 and "Would edit" in r.output
    if paths.ledger_path().exists():
        from occd.ledger import Ledger

        with Ledger.open(readonly=True) as led:
            assert led.history() == []


def test_status_counts_split_by_outcome(isolated_env):
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:main", compaction_count=0, context_tokens=10,
                               context_window=100, now=now - 30)
        led.record_action("strip", "main", IDS[0], trigger="auto", outcome="ok", now=now - 20)
        led.record_action("strip", "main", IDS[0], trigger="auto", outcome="deferred", now=now - 15)
        led.record_action("strip", "main", IDS[0], trigger="auto", outcome="ok", dry_run=True, reason="would", now=now - 10)
    out = run("status").output
    assert "strip 1 ok, 1 deferred, 1 would" in out


def test_breaker_status_never_creates_the_ledger(isolated_env):
    from occd import paths

    r = run("breaker", "status", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["breakers"] == []
    assert not paths.ledger_path().exists()


def test_history_validates_kind_and_agent_and_reads_dates(isolated_env):
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:main", compaction_count=0, now=now)
        led.record_action("strip", "main", IDS[0], trigger="auto", outcome="ok", now=now - 3 * 86400)
        led.record_action("edit", "main", IDS[0], outcome="ok", now=now - 60)
    r = run("history", "--kind", "strp")
    assert r.exit_code == 2 and "strip" in r.stderr
    r = run("history", "-a", "nosuch")
    assert r.exit_code == 1 and "main" in r.stderr
    assert len(json.loads(run("history", "--since", "yesterday", "--json").stdout)["actions"]) == 1
    day = time.strftime("%Y-%m-%d", time.localtime(now - 4 * 86400))
    assert len(json.loads(run("history", "--since", day, "--json").stdout)["actions"]) == 2
    r = run("history", "-n", "1")
    assert "showing 1 of 2" in r.output


# ---- config ---------------------------------------------------------------------------------------------

def test_unknown_config_key_is_an_error_naming_the_nearest(isolated_env, monkeypatch, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[policy]\nstrip_at_context_pct = 50\n')
    monkeypatch.setenv("OCCD_CONFIG", str(cfg))
    r = run("config", "show")
    assert r.exit_code == 1
    assert "Unknown setting policy.strip_at_context_pct" in r.stderr
    assert "policy.strip_at_context_percent" in r.stderr
    cfg.write_text('[policy]\nmode = "acting"\n')
    r = run("status")
    assert r.exit_code == 1 and "policy.mode" in r.stderr and "observe" in r.stderr


def test_config_env_and_file_precedence_and_sources(isolated_env, monkeypatch, tmp_path):
    from occd.config import effective_items, load_settings

    cfg = tmp_path / "config.toml"
    cfg.write_text('idle_seconds = 30\n[policy]\nmode = "act"\nexclude = ["agent:*:cron:*"]\n[agents.work]\nmode = "observe"\n')
    monkeypatch.setenv("OCCD_CONFIG", str(cfg))
    monkeypatch.setenv("OCCD_IDLE_SECONDS", "45")
    monkeypatch.setenv("OCCD_POLICY__STRIP_AT_CONTEXT_PERCENT", "70")
    s = load_settings({"agent": "work"})
    assert s.idle_seconds == 45 and s.policy.mode == "act" and s.policy.strip_at_context_percent == 70.0
    assert s.policy.exclude == ["agent:*:cron:*"] and s.policy_for("work").mode == "observe" and s.agent == "work"
    src = {k: v for k, _, v in effective_items(s)}
    assert src["idle_seconds"] == "env" and src["policy.mode"] == "file" and src["agent"] == "flag"
    assert src["backups_keep"] == "default"


# ---- optional parts ------------------------------------------------------------------------------------

def test_core_install_has_no_litellm_or_mcp_and_test_extra_has_both():
    import tomllib
    from pathlib import Path

    proj = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    core = " ".join(proj["dependencies"])
    assert "litellm" not in core and "mcp" not in core
    assert "pydantic-settings" in core  # the settings are pydantic-settings (the project's chosen stack)
    assert "rich>=13" in proj["dependencies"]  # human output is drawn by rich (the chosen stack)
    extras = proj["optional-dependencies"]
    assert any("litellm" in d for d in extras["llm"]) and any(d.startswith("mcp") for d in extras["mcp"])
    assert any("litellm" in d for d in extras["test"]) and any(d.startswith("mcp") for d in extras["test"])


def test_missing_mcp_extra_is_one_line_with_the_install_command(isolated_env, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    r = run("mcp")
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "pip install 'occd[mcp]'" in r.stderr


def test_missing_llm_extra_falls_back_to_keywords_and_says_how_to_add_it(monkeypatch):
    from occd.config import LLMSettings
    from occd.relevance import llm as L

    monkeypatch.setattr(L, "_llm_installed", lambda: False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    items = [L.RateItem(id="a", digest="webhook handler refactor", keyword_text="webhook handler refactor",
                        fingerprint="f1")]
    res = L.rate_relevance("refactor webhook handler", items, llm=LLMSettings(), model="gpt-4o-mini")
    assert res.ratings["a"].method == "keywords" and "occd[llm]" in res.reason


# ---- layout ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [80, 120])
def test_history_and_rotations_fit_the_width_without_mid_word_wraps(isolated_env, width):
    from occd.ledger import Ledger

    now = time.time()
    long_reason = "context 77% of the window >= 60%: strip with preset default; deferred: a run is in progress"
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:telegram:dm:42", compaction_count=0, now=now)
        for i in range(3):
            led.record_action("strip", "main", IDS[i], trigger="auto", outcome="deferred", reason=long_reason,
                              now=now - i)
        rid = led.rotation_upsert(agent_id="main", session_key="agent:main:cron:nightly", era="file",
                                  old_session_id=IDS[0], new_session_id=IDS[1], now=now,
                                  archive_path="/home/someone/.openclaw/agents/main/sessions/archive/" + IDS[0] + ".jsonl")
        led.rotation_transition(rid, "COOLDOWN", now=now)
    out = run("history", env={"COLUMNS": str(width)}).output
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), out
    col = lines[0].index("DETAIL")
    detail = " ".join(line[col:].strip() for line in lines[1:])
    # wrapped at spaces only: the column's pieces joined by single spaces give every reason back whole
    assert detail.count(long_reason) == 3, detail
    out = run("status", "--rotations", env={"COLUMNS": str(width)}).output
    row = out.splitlines()[1]
    assert len(row) <= width or IDS[0] + ".jsonl" in row
    assert row.rstrip().endswith(".jsonl")  # a cut path keeps its file name's end


def _demo_state(isolated_env, monkeypatch):
    from occd.demo.run import build_state

    root = isolated_env.parent / "demo"
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(root / ".openclaw"))
    monkeypatch.chdir(isolated_env)  # not inside a git repository: every session is a candidate
    return build_state(root, now=time.time())


def _demo_after_a_cycle(isolated_env, monkeypatch):
    """The demo's state as `occd demo` leaves it: after the daemon's cycle in act mode (strips, a rotation)."""
    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    made = _demo_state(isolated_env, monkeypatch)
    with Ledger.open() as led:
        Daemon(lambda: load_settings({"state_dir": str(made["state"]), "policy": {"mode": "act",
                                                                                   "min_idle_minutes": 5}})).run_once(led)
    return made


def _task_texts(out: str, width: int, last_header: str) -> dict[int, str]:
    """The last column's text per row of a fit_table, its wrapped pieces joined by single spaces: beside the
    row when the header names the column, else on the indented lines under the row."""
    lines = out.splitlines()
    head = lines[0]
    rows: dict[int, list[str]] = {}
    n = -1
    col = head.index(last_header) if last_header in head else None
    for line in lines[1:]:
        if not line.startswith(" "):
            n += 1
            rows[n] = [line[col:].strip()] if col is not None and len(line) > col else []
        else:
            rows[n].append(line.strip())
    return {k: " ".join(x for x in v if x) for k, v in rows.items()}


def _whole_words_of(shown: str, full: str) -> bool:
    """`shown` is `full`'s first whole words (a cut marked by '…' after a whole word), never part of a word."""
    words, shown_words = full.split(), shown.split()
    if not shown_words:
        return not words
    if shown_words[-1].endswith("…"):
        shown_words[-1] = shown_words[-1][:-1]
        k = len(shown_words)
        return (words[: k - 1] == shown_words[:-1] and len(words) > k - 1
                and words[k - 1].rstrip(",;:") == shown_words[-1])
    return words == shown_words


@pytest.mark.parametrize("width", [80, 120])
def test_sessions_and_select_fit_the_width_and_cut_no_word(isolated_env, monkeypatch, width):
    _demo_state(isolated_env, monkeypatch)
    data = json.loads(run("sessions", "--json").output)["sessions"]
    env = {"COLUMNS": str(width)}
    out = run("sessions", env=env).output
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), out
    assert len(max(lines, key=len)) > 0.6 * width  # the table uses the room it has
    shown = _task_texts(out, width, "LATEST TASK")
    assert len(shown) == len(data) == 7
    for i, s in enumerate(data):
        text = shown[i].replace(" [running]", "")
        assert _whole_words_of(text, s["latestUserTask"]), (text, s["latestUserTask"])
    # select: the decision, the relevance line and the candidates' notes too
    out = run("select", "--task", "rotate the TLS certificate on the staging load balancer", "--no-llm",
              env=env).output
    assert all(len(line) <= width for line in out.splitlines()), out
    first = " ".join(line.strip() for line in out.split("Relevance by")[0].splitlines())
    plain = json.loads(run("select", "--task", "rotate the TLS certificate on the staging load balancer",
                           "--no-llm", "--json").output)
    verb = {"resume": "Resume", "fresh": "Start fresh", "queue": "Queue"}[plain["action"]]
    assert first == f"{verb} {plain['sessionId']}: {plain['reason']}"  # wrapped at spaces only


@pytest.mark.parametrize("width", [80, 120])
def test_status_list_and_stats_on_the_demo_fit_the_width(isolated_env, monkeypatch, width):
    made = _demo_after_a_cycle(isolated_env, monkeypatch)
    sid = made["sessions"]["agent:main:main"]["id"]
    for args in (["status"], ["status", sid], ["stats"], ["list"], ["history"]):
        whole = run(*args).output  # a pipe: every line whole
        out = run(*args, env={"COLUMNS": str(width)}).output
        assert all(len(line) <= width for line in out.splitlines()), (args, out)
        # wrapped at spaces only: the words are the pipe's words, in the same order, none cut
        if args[0] in ("status", "stats"):
            def words(text):  # a path is cut before its file name; "3s ago" may be "4s ago" a moment later
                return [re.sub(r"^\d+(\.\d+)?(s|m|h|d)$", "<age>", w) for w in text.split() if ".backup." not in w]

            assert words(out) == words(whole), args
    out = run("status", sid, env={"COLUMNS": str(width)}).output
    assert ".backup.1.jsonl" in out  # a cut backup path keeps its file name


@pytest.mark.parametrize("task, key", [
    ("fix the Stripe webhook signature check for a trailing newline", "agent:main:main"),
    ("renew the TLS certificate of the staging load balancer", "agent:ops:main"),
    ("compare pgvector and qdrant for our embeddings", "agent:research:main"),
    ("write a haiku about autumn leaves", None),
    ("upgrade the kubernetes cluster to 1.31", None),
])
def test_select_on_the_demo_resumes_the_session_about_the_task_else_starts_fresh(isolated_env, monkeypatch,
                                                                                  task, key):
    """Issue 16: the demo's word salad made `select` always answer "fresh". Its sessions are each about one
    piece of work now: a task about one of them resumes that one (by keywords, no model), any other starts
    fresh."""
    made = _demo_after_a_cycle(isolated_env, monkeypatch)
    out = json.loads(run("select", "--task", task, "--no-llm", "--json").output)
    assert out["relevance"]["method"] == "keywords"
    if key is None:
        assert out["action"] == "fresh" and not any(c["related"] for c in out["candidates"]), out["reason"]
    else:
        assert (out["action"], out["sessionId"]) == ("resume", made["sessions"][key]["id"]), out["reason"]


def test_demo_sessions_end_before_now(isolated_env, monkeypatch):
    made = _demo_state(isolated_env, monkeypatch)
    data = json.loads(run("sessions", "--json").output)["sessions"]
    assert len(data) == len(made["sessions"])
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    assert all(datetime.fromisoformat(s["lastModified"].replace("Z", "+00:00")) <= now for s in data), data


def test_fit_table_keeps_short_tables_whole_and_pipes_unwrapped():
    from occd.cli.render import fit_table, format_table

    rows = [["a1", "x " * 40]]
    assert fit_table(["ID", "NOTE"], rows, width=None) == format_table(["ID", "NOTE"], rows)
    assert fit_table(["ID", "NOTE"], [["a1", "short"]], width=80) == "ID  NOTE\na1  short"
    inline = fit_table(["ID", "NOTE"], rows, width=30).splitlines()  # short words: wrapped in the column
    assert inline[0] == "ID  NOTE" and all(len(x) <= 30 and x[4] == "x" for x in inline[1:])
    rows = [["a1", "x" * 28 + " y"]]  # a word longer than the column's room: the text goes under the row
    narrow = fit_table(["ID", "NOTE"], rows, width=30).splitlines()
    assert narrow[:2] == ["ID", "a1"] and narrow[2].startswith("    xxx") and narrow[-1].endswith(" y")
    assert all(len(x) <= 30 for x in narrow)


def test_rich_console_prints_data_literally_without_escape_codes_off_a_terminal(capsys, monkeypatch):
    from occd.cli.render import Console, Table

    monkeypatch.setenv("COLUMNS", "60")
    t = Table(show_edge=False, box=None)
    t.add_column("FLAGS", no_wrap=True)
    t.add_column("PATH", overflow="path")
    t.add_row("[running] [bold]x[/bold]", "/home/someone/.openclaw/agents/main/sessions/archive/" + IDS[0] + ".jsonl")
    c = Console()
    c.print("[running] :smile: [red]kept[/red]")
    c.print(t)
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[0] == "[running] :smile: [red]kept[/red]"
    assert lines[2].startswith("[running] [bold]x[/bold]  ") and lines[2].endswith(".jsonl") and len(lines[2]) <= 60
    assert all(line == line.rstrip() for line in lines)


# ---- doctor ----------------------------------------------------------------------------------------------

def test_doctor_registry_takes_new_checks_and_survives_a_broken_one(isolated_env, monkeypatch):
    from occd.health import doctor

    from occd.health import registry

    monkeypatch.setattr(registry, "CHECKS", list(registry.CHECKS))  # where @check registers

    @doctor.check("extra-ok", order=1)
    def _ok(ctx):
        return doctor.Result("extra-ok", "ok", "fine")

    @doctor.check("extra-broken", order=2)
    def _broken(ctx):
        raise RuntimeError("boom")

    res = {r.name: r for r in doctor.diagnose()}
    assert res["extra-ok"].status == "ok"
    assert res["extra-broken"].status == "fail" and "boom" in res["extra-broken"].detail
    r = run("doctor", "--check", "extra-ok")
    assert r.exit_code == 0 and "extra-ok" in r.output and "config" not in r.output
    r = run("doctor", "--check", "extra-broken", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["success"] is False and out["error"]["code"] == "DOCTOR_FAILED"


def test_doctor_names_a_config_typo_and_a_missing_state(isolated_env, monkeypatch, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("backup_keep = 3\n")
    monkeypatch.setenv("OCCD_CONFIG", str(cfg))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(tmp_path / "nowhere"))
    r = run("doctor")
    assert r.exit_code == 1
    lines = {line.split()[1]: line for line in r.output.splitlines() if line.strip() and len(line.split()) > 1}
    assert lines["config"].startswith("FAIL") and "backup_keep" in lines["config"] and "backups_keep" in lines["config"]
    assert lines["openclaw"].startswith("FAIL") and "does not exist" in lines["openclaw"]


def test_doctor_all_good_on_a_healthy_state_exits_0(isolated_env, monkeypatch):
    from occd.runtime import lock, service, statusfile
    from occd.health import doctor

    make_state(isolated_env, {"agent:main:main": {"turns": 4}})
    run("run", "--once")
    monkeypatch.setattr(service, "service_state", lambda *a, **k: {"installed": True, "unitPath": "/x/occd.service",
                                                                  "active": True, "lingering": True})
    monkeypatch.setattr(lock.InstanceLock, "holder", staticmethod(lambda path=None: 4242))
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 10})
    res = {r.name: r.status for r in doctor.diagnose()}
    assert res["service"] == "ok" and res["heartbeat"] == "ok" and res["ledger"] == "ok" and res["scan"] == "ok"
    assert "fail" not in res.values(), res
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 3600})
    assert {r.name: r.status for r in doctor.diagnose()}["heartbeat"] == "fail"  # stale: 12 scan intervals


def test_clone_without_preset_reports_no_limits_and_no_false_resume_hint(isolated_env, tmp_path):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 8, "tools_per_turn": 1}})
    sid, _ = only_session(state)
    out = json.loads(run("clone", sid, "--json", "-v").stdout)
    assert out["statistics"].get("turns", {}).get("keepTurnsWithTools") in (None,)
    assert "1000000000" not in json.dumps(out)
    r = run("clone", sid, "-o", str(tmp_path / "elsewhere.jsonl"), "--no-register", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 0 and out["resumeCommand"] is None and "cannot resume" in out["resumeNote"]
    r = run("clone", sid, "-o", str(tmp_path / "elsewhere2.jsonl"), "--no-register")
    assert "--session-id" not in r.output and "not possible from there" in r.output


def test_config_init_is_every_default_commented_and_valid_when_uncommented(isolated_env, tmp_path, monkeypatch):
    import tomllib

    from occd.config import Settings, load_settings

    r = run("config", "init")
    assert r.exit_code == 0
    from occd import paths

    text = paths.config_file().read_text()
    assert tomllib.loads(text) == {"daemon": {}, "policy": {"breaker": {}, "rotation": {}}, "llm": {}, "lean": {},
                                     "check": {}, "cost": {}}
    assert run("config", "init").exit_code == 1  # never overwrites without --force
    live = "\n".join(line[2:] if re.match(r"^# [a-z_]+ = ", line) and "(unset)" not in line else line
                     for line in text.splitlines())
    cfg = tmp_path / "live.toml"
    cfg.write_text(live)
    s = load_settings(config_path=cfg)
    assert s.model_dump() == Settings().model_dump()  # the commented values are the defaults
    assert s._sources  # and they were really read from the file
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(tmp_path / "oc"))
    out = json.loads(run("config", "show", "--json").stdout)
    sd = next(x for x in out["settings"] if x["key"] == "state_dir")
    assert sd["value"] == str(tmp_path / "oc") and "OPENCLAW_STATE_DIR" in sd["source"]
    assert "None" not in run("config", "show").output


def test_backups_list_and_restore_a_chosen_one(isolated_env):
    state = make_state(isolated_env, {"agent:main:main": {"turns": 30, "tools_per_turn": 2}})
    sid, path = only_session(state)
    original = path.read_bytes()
    assert run("edit", sid, "--strip-tools=default", "--force").exit_code == 0
    after_default = path.read_bytes()
    assert run("edit", sid, "--strip-tools=extreme", "--force").exit_code == 0
    out = json.loads(run("backups", sid, "--json").stdout)
    nums = sorted(b["number"] for b in out["backups"])
    assert len(nums) == 2 and out["totalBytes"] == sum(b["size"] for b in out["backups"])
    first = min(out["backups"], key=lambda b: b["number"])
    assert open(first["path"], "rb").read() == original
    r = run("restore", sid, "--backup", str(first["number"]), "--force")
    assert r.exit_code == 0 and path.read_bytes() == original
    r = run("restore", sid, "--backup", "99", "--force")
    assert r.exit_code == 1 and "No backup 99" in r.stderr
    text = run("backups").output
    assert "restores one" in text and sid[9:13] in text
    assert after_default != original


def test_logs_tail_and_since(isolated_env):
    from occd import paths

    d = paths.log_dir()
    d.mkdir(parents=True, exist_ok=True)
    old = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 3 * 3600))
    new = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 60))
    (d / "occd.log.1").write_text(f"{old},001 INFO occd.daemon: started\n")
    (d / "occd.log").write_text(f"{old},002 INFO occd.jobs.scan: old scan\n{new},003 ERROR occd.jobs.scan: boom\n"
                                "Traceback (most recent call last):\n  line 1\n")
    r = run("logs", "-n", "2")
    assert r.exit_code == 0 and r.output.splitlines() == ["Traceback (most recent call last):", "  line 1"]
    r = run("logs", "--since", "1h")
    assert r.output.splitlines()[0].endswith("boom") and "old scan" not in r.output and "  line 1" in r.output
    assert "started" in run("logs", "-n", "10").output  # rotated files come first


def test_logs_without_a_log_is_one_line(isolated_env):
    r = run("logs")
    assert r.exit_code == 1 and "No log at" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _fake_journalctl(tmp_path, monkeypatch):
    """A journalctl on PATH that records its arguments and prints two journal lines."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "journalctl-args"
    exe = bindir / "journalctl"
    exe.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\n"
                   "echo '2026-11-25T10:00:00+0000 host occd[42]: scan: 7 sessions'\n"
                   "echo '2026-11-25T10:05:00+0000 host occd[42]: strip 88ea ok'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    return log


def test_logs_journal_reads_the_user_service_journal(isolated_env, tmp_path, monkeypatch):
    import sys

    if sys.platform == "darwin":
        pytest.skip("journald is Linux only")
    args = _fake_journalctl(tmp_path, monkeypatch)
    r = run("logs", "--journal", "-n", "5")
    assert r.exit_code == 0 and r.output.splitlines()[-1].endswith("strip 88ea ok"), r.output
    got = args.read_text().splitlines()
    assert got[:3] == ["--user", "-u", "occd.service"] and got[got.index("-n") + 1] == "5"
    r = run("logs", "--journal", "--since", "1h")
    got = args.read_text().splitlines()
    since = time.mktime(time.strptime(got[got.index("--since") + 1], "%Y-%m-%d %H:%M:%S"))
    assert abs(since - (time.time() - 3600)) < 120 and "-n" not in got


def test_logs_falls_back_to_the_journal_only_when_the_service_is_installed(isolated_env, tmp_path, monkeypatch):
    import sys

    from occd.runtime import service

    if sys.platform == "darwin":
        pytest.skip("journald is Linux only")
    _fake_journalctl(tmp_path, monkeypatch)
    r = run("logs")  # no log file, no service: the file's one-line error
    assert r.exit_code == 1 and "No log at" in r.stderr
    unit = service.installed_path("linux")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Service]\n")
    r = run("logs")
    assert r.exit_code == 0 and "scan: 7 sessions" in r.output


def test_logs_journal_without_journalctl_is_one_clear_line(isolated_env, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    r = run("logs", "--journal")
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "journalctl" in r.stderr and "Traceback" not in r.stderr


def test_status_check_exits_1_on_each_problem_and_0_when_healthy(isolated_env, monkeypatch):
    from occd.runtime import lock, statusfile
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:main", compaction_count=0, now=now)
        led.record_scan(now - 30, 0.1, agents=1, sessions_seen=1)
    r = run("status", "--check")
    assert r.exit_code == 1 and "not running" in r.stderr  # no daemon
    monkeypatch.setattr(lock.InstanceLock, "holder", staticmethod(lambda path=None: 4242))
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 20, "started": now - 100})
    r = run("status", "--check")
    assert r.exit_code == 0 and r.output.startswith("OK")
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 7200, "started": now - 9000})
    r = run("status", "--check", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["success"] is False and out["problems"][0]["code"] == "DAEMON_STALE"
    monkeypatch.setattr(statusfile, "read_status", lambda: {"lastCycle": time.time() - 20, "started": now - 100})
    with Ledger.open() as led:
        led.record_scan(now - 5, 0.1, agents=1, sessions_seen=1, errors=2, error_text="x")
    r = run("status", "--check")
    assert r.exit_code == 1 and "last scan had 2 error(s)" in r.stderr


def test_status_agent_filter(isolated_env):
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:main", compaction_count=0, now=now)
        led.record_observation("ops", IDS[1], session_key="agent:ops:main", compaction_count=0, now=now)
    out = json.loads(run("status", "--agent", "ops", "--json").stdout)
    assert [a["id"] for a in out["agents"]] == ["ops"]
    r = run("status", "--agent", "opz")
    assert r.exit_code == 1 and "ops" in r.stderr


def test_history_follow_prints_new_actions_once(isolated_env, monkeypatch):
    from occd.cli import status_cmd
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_action("edit", "main", IDS[0], outcome="ok", now=now - 60)
    polls = {"n": 0}

    def fake_sleep(_s):
        polls["n"] += 1
        if polls["n"] == 2:
            with Ledger.open() as led:
                led.record_action("restore", "main", IDS[0], outcome="ok", reason="back", now=time.time())
        if polls["n"] > 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(status_cmd.time, "sleep", fake_sleep)
    r = run("history", "--follow")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert sum("restore" in x for x in lines) == 1 and "back" in lines[-1]


def test_history_follow_keeps_the_outcome_filter(isolated_env, monkeypatch):
    """`history -f --outcome failed` prints only the failed actions recorded while it follows."""
    from occd.cli import status_cmd
    from occd.ledger import Ledger

    with Ledger.open() as led:
        led.record_action("edit", "main", IDS[0], outcome="failed", error="first", now=time.time() - 60)
    polls = {"n": 0}

    def fake_sleep(_s):
        polls["n"] += 1
        if polls["n"] == 2:
            with Ledger.open() as led:
                led.record_action("restore", "main", IDS[0], outcome="ok", reason="fine", now=time.time())
                led.record_action("edit", "main", IDS[0], outcome="failed", error="later", now=time.time())
        if polls["n"] > 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(status_cmd.time, "sleep", fake_sleep)
    r = run("history", "--follow", "--outcome", "failed")
    assert r.exit_code == 0
    assert "later" in r.output and "first" in r.output
    assert "restore" not in r.output and "fine" not in r.output


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell):
    r = run("completion", shell)
    assert r.exit_code == 0 and "_OCCD_COMPLETE" in r.output


def test_completion_offers_session_ids_agents_and_presets(isolated_env):
    import os
    import subprocess
    import sys

    state = make_state(isolated_env, {"agent:main:main": {"turns": 4}})
    sid, _ = only_session(state)

    def complete(words, cword):
        env = {**os.environ, "_OCCD_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        p = subprocess.run([sys.executable, "-m", "occd"], env=env, capture_output=True, text=True, timeout=60)
        return [line.split(",", 1)[1] for line in p.stdout.splitlines()]

    assert sid in complete(f"occd info {sid[9:13]}", 2)
    assert complete("occd edit x --strip-tools ", 4) == ["aggressive", "default", "extreme"]
    assert complete("occd list --agent ", 3) == ["main"]


def test_demo_story_holds_up_to_a_look(tmp_path):
    """Tokens match the text, compaction counts match the transcript, channels match the key."""
    import json as _json

    from occd.demo.run import DEMO_WINDOW, build_state

    made = build_state(tmp_path, now=time.time())
    for key, s in made["sessions"].items():
        lines = [_json.loads(x) for x in s["path"].read_text().splitlines()]
        index = _json.loads((s["path"].parent / "sessions.json").read_text())[key]
        assert index["compactionCount"] == sum(1 for x in lines if x["type"] == "compaction")
        users = [x["message"]["content"] for x in lines if x["type"] == "message" and x["message"]["role"] == "user"]
        channel = key.split(":")[2]
        assert all(("[Telegram" in u) == (channel == "telegram") for u in users)
        assert all(("[Discord" in u) == (channel == "discord") for u in users)
        assert all(("[cron" in u) == (channel == "cron") for u in users)
        # the last usage is the context the text makes: within 15% of chars/4 after the last compaction
        after = lines[max([i for i, x in enumerate(lines) if x["type"] == "compaction"], default=0) + 1:]
        usage = [x["message"]["usage"]["totalTokens"] for x in after
                 if x["type"] == "message" and x["message"].get("usage")][-1]
        chars = sum(len(_json.dumps(x["message"].get("content"))) for x in after if x["type"] == "message")
        assert usage <= DEMO_WINDOW
        if not lines[-1]["message"]["role"] == "toolResult" and "cron" not in key:
            assert 0.85 * (chars / 4) <= usage <= 1.15 * (chars / 4) + 10_000, (key, usage, chars / 4)


@pytest.mark.parametrize("width", [80, 120])
def test_status_summary_wraps_at_spaces(isolated_env, width):
    from occd.ledger import Ledger

    now = time.time()
    with Ledger.open() as led:
        led.record_observation("main", IDS[0], session_key="agent:main:telegram:dm:42", compaction_count=2,
                               context_tokens=150_000, context_window=200_000, now=now)
        for kind in ("strip", "rotate", "archive", "clone", "restore"):
            for outcome in ("ok", "deferred", "failed", "skipped"):
                led.record_action(kind, "main", IDS[0], trigger="auto", outcome=outcome, now=now - 5)
    out = run("status", env={"COLUMNS": str(width)}).output
    summary = [line for line in out.splitlines() if not line.startswith((" SESSION", "SESSION", "Daemon", "Last"))]
    block = out[out.index("Agent main"):out.index("SESSION")]
    assert all(len(line) <= width for line in block.splitlines()), block
    joined = " ".join(x.strip() for x in block.splitlines())
    assert "restore 1 ok, 1 failed, 1 skipped, 1 deferred" in joined  # nothing cut inside a word
    assert summary


def test_list_archived_shows_key_and_compactions_from_the_ledger(isolated_env):
    from occd.ledger import Ledger

    state = make_state(isolated_env, {"agent:main:main": {"turns": 4}})
    sid, path = only_session(state)
    arch = path.parent / "archive"
    arch.mkdir()
    old = "01a20771-dead-7000-8000-000000000009"
    (arch / f"{old}.jsonl").write_bytes(path.read_bytes())
    with Ledger.open() as led:
        led.record_observation("main", old, session_key="agent:main:cron:nightly", compaction_count=6, now=time.time())
        led.mark_session_archived("main", old, str(arch / f"{old}.jsonl"))
    out = json.loads(run("list", "--archived", "--json").stdout)["sessions"]
    row = next(r for r in out if r["id"] == old)
    assert row["key"] == "agent:main:cron:nightly" and row["compactions"] == 6


@pytest.mark.parametrize("width", [80, 120])
def test_info_and_config_show_wrap_at_spaces_and_keep_paths_whole(isolated_env, monkeypatch, width):
    """`info` and `config show` lines wrap at spaces to the width; a path (the one thing that cannot wrap) is
    printed whole, on its own, so it can be copied."""
    made = _demo_after_a_cycle(isolated_env, monkeypatch)
    sid = made["sessions"]["agent:main:main"]["id"]
    for args in (["info", sid, "--agent", "main"], ["config", "show"]):
        whole = run(*args).output
        out = run(*args, env={"COLUMNS": str(width)}).output
        def words(text):  # a table cell may cut a path before its file name ("…/demo/.openclaw"); ages move on
            return [re.sub(r"^\d+(\.\d+)?(s|m|h|d|min)$", "<age>", w) for w in text.split() if "/" not in w]

        assert words(out) == words(whole), args  # the same words in the same order, none cut
        for line in out.splitlines():
            if len(line) > width:  # only a line that is one path (after its label) may overflow
                assert len(line.split()) <= 2 and "/" in line.split()[-1], (args, line)
