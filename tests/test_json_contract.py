"""The JSON contract: every command's `--json` prints one envelope (docs/guide.md, "JSON output").

The commands are found by walking the CLI, not listed here: a command added later is run too, and fails this
test until its --json output conforms, or until it is named in NO_JSON with the reason it has no JSON form.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import click
import pytest
from click.testing import CliRunner

import occd
from occd.cli.main import cli

# Commands without --json, and why. Anything else must take --json (issue 23: every command has it now).
NO_JSON: dict[str, str] = {}

# Arguments that make each command do its real work on the demo state; `{sid}` is a session of agent main.
ARGS = {
    "info": ["{sid}"],
    "edit": ["{sid}", "--strip-tools", "--force"],
    "clone": ["{sid}"],
    "restore": ["{sid}", "--force"],
    "rotate": ["{sid}", "--dry-run"],
    "select": ["--task", "refactor the webhook handler", "--no-llm"],
    "run": ["--once"],
    "breaker reset": ["main"],
    "service install": ["--dry-run"],
    "status": [],
    "backups": ["{sid}"],
    "completion": ["bash"],
    "demo": ["--cycles", "1"],
    "config init": ["--stdout"],
}
EXTRA_RUNS = [["status", "{sid}"], ["status", "--rotations"], ["info", "nosuch-id"], ["list", "--agent", "nosuch"]]

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
# maps keyed by data (table names, action kinds, roles), not by field names
DATA_MAPS = {"tables", "actions24h", "messagesByRole", "countsByOutcome", "files"}
TIME_KEYS = {"ts", "started", "stopped", "heartbeat", "created", "updated", "finished", "firstSeen", "lastSeen",
             "lastCycle", "lastActivity", "nextScan", "lastModified", "fileModified"}


def leaf_commands():
    ctx = click.Context(cli)
    out = []

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for n in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, n), path + [n])
        else:
            out.append((" ".join(path), cmd))

    for n in cli.list_commands(ctx):
        walk(cli.get_command(ctx, n), [n])
    return out


def check_shape(obj, where="", problems=None):
    """Every key camelCase (except inside data-keyed maps), every time an ISO-8601 UTC string with Z."""
    problems = [] if problems is None else problems
    if isinstance(obj, dict):
        for k, v in obj.items():
            parent = where.rsplit(".", 1)[-1]
            if parent not in DATA_MAPS and not CAMEL.match(k):
                problems.append(f"{where}.{k}: not camelCase")
            if parent not in DATA_MAPS and (k in TIME_KEYS or (k.endswith("At") and len(k) > 2)):
                epoch = isinstance(v, (int, float)) and not isinstance(v, bool)
                if epoch or (isinstance(v, str) and not ISO_Z.match(v)):
                    problems.append(f"{where}.{k}: time {v!r} is not ISO-8601 UTC with Z")
            check_shape(v, f"{where}.{k}", problems)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_shape(v, where, problems)
    return problems


@pytest.fixture
def demo_state(isolated_env, monkeypatch):
    from occd.demo import run as demo
    from occd.runtime import service
    from occd.config import load_settings
    from occd.runtime.daemon import Daemon
    from occd.ledger import Ledger

    root = isolated_env.parent / "demo"
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(root / ".openclaw"))
    made = demo.build_state(root, now=time.time())
    with Ledger.open() as led:
        Daemon(lambda: load_settings({"state_dir": str(made["state"]), "policy": {"mode": "act",
                                                                                   "min_idle_minutes": 5}})).run_once(led)
    calls = []

    def fake_run(cmd, capture=True):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(service, "run_command", fake_run)  # service install/uninstall/status touch nothing real
    sid = made["sessions"]["agent:main:main"]["id"]
    return sid


def invoke(args):
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    return r


def test_every_command_takes_json_or_says_why_not():
    missing = [name for name, cmd in leaf_commands()
               if name not in NO_JSON and not any("--json" in p.opts for p in cmd.params)]
    assert not missing, f"commands without --json (add it, or name them in NO_JSON with the reason): {missing}"


@pytest.mark.slow
def test_every_command_prints_the_envelope(demo_state):
    sid = demo_state
    runs = []
    for name, cmd in leaf_commands():
        if name in NO_JSON:
            continue
        runs.append(name.split() + [a.format(sid=sid) for a in ARGS.get(name, [])])
    runs += [[a.format(sid=sid) for a in extra] for extra in EXTRA_RUNS]
    failures = []
    for args in runs:
        env_before = dict(os.environ)
        r = invoke(args + ["--json"])
        os.environ.clear()  # `occd demo` points OCCD_HOME at its own state for the rest of its process
        os.environ.update(env_before)
        label = " ".join(args)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            failures.append(f"{label}: stdout is not one JSON document: {r.stdout[:200]!r}")
            continue
        if not isinstance(out, dict):
            failures.append(f"{label}: top level is {type(out).__name__}, not an object")
            continue
        if out.get("schemaVersion") != 1:
            failures.append(f"{label}: schemaVersion {out.get('schemaVersion')!r}")
        if out.get("occdVersion") != occd.__version__:
            failures.append(f"{label}: occdVersion {out.get('occdVersion')!r}, not {occd.__version__!r}")
        if not isinstance(out.get("success"), bool):
            failures.append(f"{label}: success {out.get('success')!r}")
        elif out["success"] != (r.exit_code == 0):
            failures.append(f"{label}: success {out['success']} with exit code {r.exit_code}")
        expected_cmd = " ".join(a for a in args if not a.startswith("-") and a in label.split()[:2])
        if not isinstance(out.get("command"), str) or not expected_cmd.startswith(out["command"]):
            failures.append(f"{label}: command {out.get('command')!r}")
        if out.get("success") is False:
            err = out.get("error")
            if not (isinstance(err, dict) and set(err) >= {"code", "message", "hint"} and err["code"]
                    and err["message"]):
                failures.append(f"{label}: failure without error {{code, message, hint}}: {err!r}")
        failures += [f"{label}: {p}" for p in check_shape(out)]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_list_and_history_are_objects_with_a_named_array(demo_state):
    out = json.loads(invoke(["list", "--json"]).stdout)
    assert out["success"] is True and isinstance(out["sessions"], list) and out["sessions"]
    out = json.loads(invoke(["history", "--json"]).stdout)
    assert isinstance(out["actions"], list) and out["actions"] and ISO_Z.match(out["actions"][0]["ts"])
    assert "agentId" in out["actions"][0] and "agent_id" not in out["actions"][0]


def test_check_shape_catches_what_it_should():
    assert check_shape({"agent_id": 1}) and check_shape({"ts": 1764000000.0}) and check_shape({"openedAt": "x"})
    assert check_shape({"a": [{"lastSeen": 1764000000}]}) and check_shape({"x": {"updatedAt": "2026-11-25 17:00"}})
    assert not check_shape({"tables": {"scan_runs": 1}, "ts": "2026-11-25T17:00:00.000Z", "openedAt": None})


def test_usage_errors_under_json_print_the_envelope(demo_state):
    """Every command: a bad option under --json is the envelope (USAGE, exit 2), as is a mistyped command."""
    failures = []
    for name, _cmd in leaf_commands():
        args = name.split() + ["--no-such-option", "--json"]
        r = invoke(args)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            failures.append(f"{name}: stdout is not one JSON document: {r.stdout[:200]!r}")
            continue
        if r.exit_code != 2 or out.get("success") is not False or out.get("error", {}).get("code") != "USAGE":
            failures.append(f"{name}: exit {r.exit_code}, {out}")
        elif (out.get("command") != name or out.get("schemaVersion") != 1 or out.get("occdVersion") != occd.__version__
              or not out["error"].get("hint")):
            failures.append(f"{name}: envelope {out}")
    r = invoke(["lsit", "--json"])
    out = json.loads(r.stdout)
    assert r.exit_code == 2 and out["error"]["code"] == "USAGE" and "list" in out["error"]["message"]
    r = invoke(["info", "--limit", "x", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["code"] == "USAGE"
    r = invoke(["list", "--limit", "0", "--json"])  # a bad value, not only an unknown option
    assert r.exit_code == 2 and json.loads(r.stdout)["command"] == "list"
    assert not failures, "\n".join(failures)


def test_json_ids_and_times_are_what_the_tables_show(demo_state):
    rows = json.loads(invoke(["list", "--json"]).stdout)["sessions"]
    shown = [line.split()[0] for line in invoke(["list"]).stdout.splitlines()[1:] if line and not line[0].isspace()]
    assert [r["shortId"] for r in rows] == shown
    text = invoke(["sessions", "--json"]).stdout
    assert '"lastModified"' in text and "+00:00" not in text
    assert all(ISO_Z.match(s["lastModified"]) for s in json.loads(text)["sessions"])


def test_version_is_one_figure_everywhere():
    """`occd --version`, the installed metadata and every envelope say occd.__version__ (pyproject reads it)."""
    from importlib.metadata import version

    r = invoke(["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"occd, version {occd.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", occd.__version__)
    assert version("occd") == occd.__version__, "reinstall (pip install -e .): the installed metadata is stale"
