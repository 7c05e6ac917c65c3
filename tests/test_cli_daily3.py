"""Issue 32: daily use, third pass — commands in the sequences a user types them (§11 history and --since, §12
--quiet/--verbose/--state-dir, §15 status before the first cycle, and more)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from click.testing import CliRunner

from occd.cli.main import cli
from tests.statefactory import FileState


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kw)


def jrun(*args):
    r = run(*args, "--json")
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def _state(home: Path, **kw):
    fs = FileState(home / ".openclaw")
    return fs, fs.add_session(turns=kw.pop("turns", 30), seed=kw.pop("seed", 3), tools_per_turn=2, **kw)


# ---- §11 history: "not found" like info/restore; --since positive; --outcome -----------------------------------

def test_history_session_not_found_is_exit_1_like_info(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    info = run("info", "zzzz-nothing")
    r = run("history", "--session", "zzzz-nothing")
    assert info.exit_code == 1 and r.exit_code == 1
    assert "not found" in r.stderr and "Traceback" not in r.output
    r, data = jrun("history", "--session", "zzzz-nothing")
    assert r.exit_code == 1 and data["success"] is False and data["error"]["code"] == "SESSION_NOT_FOUND"
    # the session edited: found, its action listed
    r, data = jrun("history", "--session", s.session_id[:8])
    assert r.exit_code == 0 and data["total"] == 1


def test_history_session_before_any_ledger_is_not_found(isolated_env):
    _state(isolated_env)
    r = run("history", "--session", "zzzz-nothing")
    assert r.exit_code == 1 and "not found" in r.stderr


def test_since_rejects_zero_and_negative_durations(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    for cmd in ("stats", "history"):
        for bad in ("-3d", "0", "0h", "-5"):
            r = run(cmd, "--since", bad)
            assert r.exit_code == 2, (cmd, bad, r.output)
            assert "positive" in r.stderr and "Traceback" not in r.output
        assert run(cmd, "--since", "3d").exit_code == 0


def test_history_outcome_filter(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    r, data = jrun("history", "--outcome", "ok")
    assert r.exit_code == 0 and data["total"] == 1
    r, data = jrun("history", "--outcome", "failed")
    assert r.exit_code == 0 and data["total"] == 0
    r = run("history", "--outcome", "failed")
    assert r.exit_code == 0 and "No actions recorded for that filter" in r.stdout
    r = run("history", "--outcome", "borked")
    assert r.exit_code == 2 and "--outcome" in r.stderr


def test_observe_mode_rows_read_would_in_history_and_status(isolated_env):
    """A dry-run row is "would" in history (as status counts it), not "skipped (dry run)"."""
    from occd.ledger import Ledger

    fs, s = _state(isolated_env)
    with Ledger.open() as led:
        led.record_action("strip", "main", s.session_id, s.key, trigger="auto", outcome="skipped", dry_run=True,
                          reason="context 80% of the window >= 60% (observe mode: would strip with preset moderate)")
    out = run("history").stdout
    assert "would" in out and "skipped" not in out and "(dry run)" not in out
    r, data = jrun("history", "--outcome", "would")
    assert data["total"] == 1
    r, data = jrun("history", "--outcome", "skipped")
    assert data["total"] == 0


# ---- §12 one meaning for -q/--quiet and -v/--verbose on every command; --state-dir on the read commands ---------

def _leaf_commands():
    from occd.cli.main import COMMANDS, cli as root

    ctx = click.Context(root)
    for name in COMMANDS:
        cmd = root.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            for sub in cmd.commands.values():
                yield f"{name} {sub.name}", sub
        else:
            yield name, cmd


def test_every_command_takes_quiet_and_verbose():
    missing = []
    for path, cmd in _leaf_commands():
        if path in ("completion", "mcp"):
            continue
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if not {"-q", "--quiet", "-v", "--verbose"} <= opts:
            missing.append(path)
    assert missing == []


def test_quiet_edit_prints_nothing_and_still_works(isolated_env):
    fs, s = _state(isolated_env)
    size = s.path.stat().st_size
    r = run("edit", s.session_id, "--strip-tools=aggressive", "--force", "-q")
    assert r.exit_code == 0 and r.stdout == "" and s.path.stat().st_size < size
    r, data = jrun("restore", s.session_id, "--force", "-q")   # --json is what a script asked for: still printed
    assert r.exit_code == 0 and data["success"] is True
    r = run("restore", "zzzz-nothing", "-q")                     # errors still say what went wrong
    assert r.exit_code == 1 and "not found" in r.stderr
    assert run("status", "-q").stdout == "" and run("status", "-q").exit_code == 0
    r = run("edit", s.session_id, "-q", "-v")
    assert r.exit_code == 2


def test_quiet_and_verbose_daemon_cycle(isolated_env):
    """`run --once -q` logs warnings only; `-v` logs at DEBUG (the flags set --log-level when it is not given)."""
    _state(isolated_env)
    r = run("run", "--once", "-q")
    assert r.exit_code == 0 and " INFO " not in r.stderr and r.stdout == ""
    r = run("run", "--once", "-v")
    assert r.exit_code == 0 and " DEBUG " in r.stderr


def test_read_commands_take_state_dir(isolated_env):
    fs, s = _state(isolated_env)
    sd = str(isolated_env / ".openclaw")
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force", "--state-dir", sd).exit_code == 0
    for cmd in (("status",), ("history",), ("stats",), ("list",), ("info", s.session_id)):
        r = run(*cmd, "--state-dir", sd)
        assert r.exit_code == 0, (cmd, r.output)
    r = run("history", "--state-dir", str(isolated_env / "nowhere"))
    assert r.exit_code == 1 and "does not exist" in r.stderr


def test_backups_without_id_says_which_agent(isolated_env):
    fs, s = _state(isolated_env)
    assert run("edit", s.session_id, "--strip-tools=aggressive", "--force").exit_code == 0
    out = run("backups").stdout
    assert "agent 'main'" in out and "--agent" in out


# ---- §15 status before the first cycle: what can be seen, and what is missing -----------------------------------

def test_status_before_the_first_cycle_shows_the_state_and_what_is_missing(isolated_env):
    fs, s = _state(isolated_env)
    fs.add_session("agent:main:second", turns=4, seed=5)
    listed = run("list").stdout
    assert "agent:main:second" in listed and "agent:main:main" in listed
    r = run("status")
    assert r.exit_code == 0
    out = r.stdout
    assert "Agent main" in out and "2 sessions" in out
    assert "Missing" in out and "ledger" in out and "never ran" in out and "occd run --once" in out
    r, data = jrun("status")
    fc = data["firstContact"]
    assert [a["id"] for a in fc["agents"]] == ["main"] and fc["agents"][0]["sessions"] == 2
    assert len(fc["missing"]) == 2
    # after a cycle: the usual status, nothing missing
    assert run("run", "--once", "-q").exit_code == 0
    out = run("status").stdout
    assert "Missing" not in out and "Agent main" in out


# ---- §5/§6/§9/§10 one figure per fact, labelled ----------------------------------------------------------------

def _tokens(row: str) -> str:
    """The TOKENS cell of a `list` row: "~23k" of "~23k (11%)"."""
    import re

    return re.search(r"(~?[\d.]+[kM]?) \(\d+%\)", row).group(1)


def test_status_session_shows_the_context_after_the_strip_as_list_does(isolated_env):
    fs, s = _state(isolated_env)
    assert run("run", "--once", "-q").exit_code == 0      # observed before: the max is the figure before the strip
    r, res = jrun("edit", s.session_id, "--strip-tools=extreme", "--force")
    assert r.exit_code == 0
    assert run("run", "--once", "-q").exit_code == 0
    listed = run("list").stdout
    row = next(line for line in listed.splitlines() if "agent:main:main" in line)
    tokens = _tokens(row)
    out = run("status", s.session_id).stdout
    assert f"context now {tokens} (" in out and "window)" in out, (row, out)
    assert "max" in out and "(observed)" in out   # the bigger figure from before the strip is named as a maximum
    data = json.loads(run("status", s.session_id, "--json").stdout)
    assert data["context"]["tokens"] < res["statistics"]["tokensBefore"]


def test_budget_strip_reason_names_openclaws_pre_prompt_estimate(isolated_env):
    """history's "strip to 89066 tokens (49% of 180000)" is OpenClaw's pre-prompt estimate against its budget,
    not the context against the window that list shows: it says so."""
    from occd.ledger import Ledger
    from tests.test_small_window_spiral import _cycle, _state as spiral

    state, _ = spiral(isolated_env)
    with Ledger.open() as led:
        _cycle(state, led)
        rows = led.history(limit=50)
    (strip,) = [a for a in rows if a["kind"] == "strip" and a["outcome"] == "ok"]
    assert "OpenClaw's pre-prompt estimate" in strip["reason"] and "of its budget" in strip["reason"], strip["reason"]


def test_rotations_after_undo_do_not_point_at_the_gone_archive(isolated_env):
    fs, s = _state(isolated_env, compaction_count=4)
    r, res = jrun("rotate", s.key, "--force")
    assert r.exit_code == 0, r.output
    archive = json.loads(run("status", "--rotations", "--json").stdout)["rotations"][0]["archivePath"]
    assert Path(archive).exists()
    assert run("rotate", "--undo", s.key).exit_code == 0
    assert not Path(archive).exists()
    (rot,) = json.loads(run("status", "--rotations", "--json").stdout)["rotations"]
    assert rot["archiveExists"] is False and rot["seededArchive"] and Path(rot["seededArchive"]).exists()
    out = run("status", "--rotations").stdout
    assert "undone" in out and archive not in out.replace("\n", "")


def test_archived_session_keeps_the_figure_it_had_live(isolated_env):
    """The seeded session after `rotate --undo`: `list --archived` shows the figure `list` showed while it was
    live (same file), not another measure read from the file alone."""
    fs, s = _state(isolated_env, compaction_count=4)
    r, res = jrun("rotate", s.key, "--force")
    assert r.exit_code == 0, r.output
    # OpenClaw's pre-prompt check after the seed turn (system prompt and tools included)
    idx = fs.read_index()
    idx[s.key]["contextBudgetStatus"] = {"estimatedPromptTokens": 12_345, "promptBudgetBeforeReserve": 180_000,
                                         "contextTokenBudget": 200_000, "messageCount": 2,
                                         "sessionId": res["newSessionId"]}
    (fs.sessions_dir() / "sessions.json").write_text(json.dumps(idx))
    assert run("run", "--once", "-q").exit_code == 0
    live = _tokens(next(line for line in run("list").stdout.splitlines() if s.key in line))
    assert run("rotate", "--undo", s.key).exit_code == 0
    archived = run("list", "--archived").stdout
    row = next(line for line in archived.splitlines() if res["newSessionId"][:4] in line.split()[0]
               or line.split()[0] in res["newSessionId"])
    assert _tokens(row) == live, (live, archived)


def test_info_names_both_compaction_counts(isolated_env):
    fs, s = _state(isolated_env, compaction_count=5)
    out = run("info", s.session_id).stdout
    assert "5 counted by OpenClaw, 0 entries in the transcript" in out, out


# ---- §7 the demo's dollars: the demo's own prices, parts that add up ------------------------------------------

def _demo_savings(tmp: Path, monkeypatch, litellm_file: str | None) -> dict:
    from occd.demo.run import run as demo_run
    from occd.policy import savings

    for k in ("OCCD_HOME", "OPENCLAW_STATE_DIR", "OCCD_POLICY__MODE"):
        monkeypatch.setenv(k, os.environ.get(k, ""))
    monkeypatch.setattr(savings, "litellm_cost_file", lambda: litellm_file)
    root = demo_run(root=tmp, echo=lambda *_a, **_k: None)
    r = run("status", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["savings7d"]["usdNet"], data["savings7d"]
    return {"total": data["savings7d"], "agents": {a["id"]: a["savings7d"] for a in data["agents"]},
            "text": run("status").stdout, "root": root}


def test_demo_dollars_do_not_depend_on_litellm_and_add_up(isolated_env, tmp_path, monkeypatch):
    fake = tmp_path / "litellm_prices.json"   # a litellm price map with other prices for the demo's model
    fake.write_text(json.dumps({"claude-opus-4-6": {"input_cost_per_token": 15e-6, "output_cost_per_token": 75e-6,
                                                    "cache_read_input_token_cost": 1.5e-6,
                                                    "cache_creation_input_token_cost": 18.75e-6}}))
    without = _demo_savings(tmp_path / "a", monkeypatch, None)
    with_it = _demo_savings(tmp_path / "b", monkeypatch, str(fake))
    assert round(without["total"]["usdNet"], 2) == round(with_it["total"]["usdNet"], 2)
    for d in (without, with_it):
        parts = [a["usdNet"] for a in d["agents"].values() if a]
        assert abs(sum(parts) - d["total"]["usdNet"]) < 1e-6
        # the lines people read: per-agent nets add up to the total line's net, to the cent
        import re

        nets = [float(x) for x in re.findall(r"net \$(-?[\d.]+)", d["text"])]
        assert len(nets) == len(parts) + 1 and abs(sum(nets[:-1]) - nets[-1]) < 0.011, d["text"]


# ---- §8 config show: "file" only for what the file really sets -------------------------------------------------

def test_config_show_labels_commented_defaults_as_defaults(isolated_env):
    assert run("config", "init").exit_code == 0
    r, data = jrun("config", "show")
    from_file = [s["key"] for s in data["settings"] if s["source"] == "file"]
    assert from_file == []
    from occd import paths

    cfg = paths.config_file()
    cfg.write_text(cfg.read_text().replace("# watch = true", "watch = false"))
    r, data = jrun("config", "show")
    assert [s["key"] for s in data["settings"] if s["source"] == "file"] == ["daemon.watch"]


# ---- §16 a kept demo state is healthy by doctor's rules --------------------------------------------------------

def test_doctor_on_a_kept_demo_state_says_it_is_a_demo(tmp_path, isolated_env, monkeypatch):
    keep = tmp_path / "demo"
    for k in ("OCCD_HOME", "OPENCLAW_STATE_DIR", "OCCD_POLICY__MODE"):
        monkeypatch.setenv(k, os.environ.get(k, ""))
    r = run("demo", "--keep", str(keep), "--cycles", "1")
    assert r.exit_code == 0, r.output
    monkeypatch.setenv("OCCD_HOME", str(keep / "occd-home"))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(keep / ".openclaw"))
    r = run("doctor")
    assert r.exit_code == 0, r.output
    assert "demo state" in r.output and "no stale transcript locks" in r.output, r.output
    # an ordinary home (no demo mark) still fails without a service
    monkeypatch.setenv("OCCD_HOME", str(tmp_path / "other-home"))
    assert run("doctor").exit_code == 1


# ---- §13 80 columns and colour on a terminal --------------------------------------------------------------------

def _on_a_terminal(args, env, cols=80) -> tuple[int, str]:
    """Run occd under a pseudo-terminal of `cols` columns: (exit code, what it wrote, escapes included)."""
    import fcntl
    import pty
    import struct
    import subprocess
    import sys
    import termios

    m, s = pty.openpty()
    fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "occd", *args], stdout=s, stderr=s, stdin=s, close_fds=True,
                         env=env)
    os.close(s)
    out = b""
    while True:
        try:
            d = os.read(m, 65536)
        except OSError:
            break
        if not d:
            break
        out += d
    os.close(m)
    return p.wait(timeout=120), out.decode("utf-8", "replace").replace("\r", "")


def test_doctor_check_info_backups_fit_80_columns_with_colour_on_a_terminal(tmp_path, isolated_env, monkeypatch):
    import re

    keep = tmp_path / "a-rather-long-folder-name-for-the-demo-state" / "kept"
    for k in ("OCCD_HOME", "OPENCLAW_STATE_DIR", "OCCD_POLICY__MODE"):
        monkeypatch.setenv(k, os.environ.get(k, ""))
    assert run("demo", "--keep", str(keep), "--cycles", "1").exit_code == 0
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update(OCCD_HOME=str(keep / "occd-home"), OPENCLAW_STATE_DIR=str(keep / ".openclaw"), TERM="xterm")
    monkeypatch.setenv("OCCD_HOME", env["OCCD_HOME"])
    monkeypatch.setenv("OPENCLAW_STATE_DIR", env["OPENCLAW_STATE_DIR"])
    sid = json.loads(run("list", "--json").stdout)["sessions"][0]["id"]
    esc = re.compile(r"\x1b\[[0-9;]*m")
    for args in (["doctor"], ["check"], ["info", sid], ["backups"], ["backups", sid]):
        rc, out = _on_a_terminal(args, env)
        assert "Traceback" not in out, (args, out)
        too_long = [line for line in esc.sub("", out).split("\n") if len(line) > 80]
        assert too_long == [], (args, too_long)
        if args[0] in ("doctor", "check"):
            assert esc.search(out), (args, out)                     # the marks are coloured on a terminal
            rc, plain = _on_a_terminal(args, {**env, "NO_COLOR": "1"})
            assert not esc.search(plain), args                      # ... not under NO_COLOR
            r = run(*args)                                          # ... nor on a pipe
            assert not esc.search(r.output)
            r = run(*args, "--json")
            assert not esc.search(r.output)


# ---- §17 session ids: occd's own are UUIDv7; OpenClaw 2026.7.35 writes v4 (crypto.randomUUID) and occd takes them

def test_occd_makes_uuidv7_ids_and_takes_openclaws_v4_ids(isolated_env):
    import uuid

    from occd.openclaw import new_session_id

    assert uuid.UUID(new_session_id()).version == 7
    fs = FileState(isolated_env / ".openclaw")
    v4 = str(uuid.uuid4())
    s = fs.add_session("agent:main:main", session_id=v4, turns=20, seed=3, tools_per_turn=2)
    assert run("info", v4[:8]).exit_code == 0
    r, res = jrun("clone", v4[:8], "--strip-tools=extreme")
    assert r.exit_code == 0 and uuid.UUID(res["clonedSessionId"]).version == 7
    assert run("edit", v4, "--strip-tools=aggressive", "--force").exit_code == 0
    r, data = jrun("history", "--session", v4[:8])
    assert r.exit_code == 0 and data["total"] >= 1 and s.session_id == v4
