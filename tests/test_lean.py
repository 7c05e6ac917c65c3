"""occd's lean view on the Python side: the node tests of the plugin, the release check, enable's refusals and
consent, the policy file the daemon writes (lean job), the counts `occd status` shows, and the doctor checks."""

from __future__ import annotations

import json
import os
import shutil
import re
import subprocess
import sys
from pathlib import Path

import install
import pytest
from conftest import IN_CI, missing_tool

from occd import lean
from occd.errors import OccdError
from occd.jobs import run_cycle
from occd.ledger import Ledger

REPO = Path(__file__).resolve().parent.parent
REAL_CACHE = install.oc_cache()  # where tests/e2e/install.py puts the OpenClaw releases


def test_node_unit_and_contract_tests(tmp_path):
    """The plugin's own tests (tests/js: the filter as a pure function, the engine's contract), run by node.
    Their temp folders go under the test's own (TMPDIR), not the machine's /tmp."""
    node = shutil.which("node")
    if not node:
        missing_tool("node: the lean plugin's own tests run with it")
    p = subprocess.run([node, "--test", str(REPO / "tests" / "js")], capture_output=True, text=True, timeout=300,
                       cwd=REPO, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "# fail 0" in p.stdout and "# pass 0" not in p.stdout


def test_plugin_ships_as_package_data():
    import tomllib

    st = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "occd.lean.plugin" in st["packages"] and st["package-data"]["occd.lean.plugin"] == ["*.js", "*.json"]
    src = lean.plugin_source()
    assert {p.name for p in src.iterdir()} >= {"package.json", "openclaw.plugin.json", "index.js"}
    # every module the plugin imports ships, and is one of the files a complete install is checked for
    imported = set(re.findall(r'from "\./([\w.]+)"', "".join(p.read_text() for p in src.glob("*.js"))))
    assert imported >= {"sticky.js", "safefs.js"} and imported <= set(lean.PLUGIN_FILES)
    assert {p.name for p in src.glob("*.js")} <= set(lean.PLUGIN_FILES)
    pkg = json.loads((src / "package.json").read_text())
    assert pkg["openclaw"]["compat"]["pluginApi"] == ">=2026.7.1" and "dependencies" not in pkg
    assert json.loads((src / "openclaw.plugin.json").read_text())["id"] == lean.PLUGIN_ID
    assert (src / "index.js").read_text().count(lean.PATHS_LINE) == 1


# --- the release ------------------------------------------------------------------------------------------------

def fake_release(root: Path, version: str, *, engines=True, fence: str | None = lean.FENCE) -> Path:
    pkg = root / "node_modules" / "openclaw"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "openclaw", "version": version}))
    decl = "type X = {};\n"
    if engines:
        decl += "registerContextEngine(id: string, factory: ContextEngineFactory): void;\n"
    if fence:
        decl += f'transcriptSemantics?: {{ currentTurnFence?: "{fence}"; }};\n'
    (pkg / "dist" / "plugin-entry-abc.d.ts").write_text(decl)
    return pkg


def test_release_support_and_check(tmp_path):
    s = lean.release_support(fake_release(tmp_path / "a", "2026.9.6"))
    assert s["contextEngines"] and s["durableTurnContract"] == "v1" and s["version"] == "2026.9.6"
    lean.check_release(s)
    s = lean.release_support(fake_release(tmp_path / "b", "2026.7.1", fence=None))
    assert s["durableTurnContract"] is None
    lean.check_release(s)  # the file era: no durable-turn contract needed
    with pytest.raises(OccdError, match="durable-turn contract newer"):
        lean.check_release(lean.release_support(fake_release(tmp_path / "c", "2027.1.1", fence="before-current-turn-entry-v2")))
    with pytest.raises(OccdError, match="no context engines"):
        lean.check_release(lean.release_support(fake_release(tmp_path / "d", "2026.5.1", engines=False, fence=None)))
    with pytest.raises(OccdError, match="older than"):
        lean.check_release(lean.release_support(fake_release(tmp_path / "e", "2026.6.30", fence=None)))


@pytest.mark.e2e
@pytest.mark.parametrize("version,durable", [("2026.7.1", None), ("2026.8.1", "v1"), ("2026.9.6", "v1")])
def test_release_support_on_the_real_packages(version, durable):
    pkg = REAL_CACHE / f"oc-{version}" / "node_modules" / "openclaw"
    if not pkg.is_dir():
        if IN_CI:
            try:
                install.openclaw(version)
            except install.InstallError as e:
                missing_tool(f"OpenClaw {version}: {e}")
        else:
            missing_tool(f"OpenClaw {version}: not installed in {REAL_CACHE} (scripts/test.sh installs it)")
    s = lean.release_support(pkg)
    assert s["version"] == version and s["contextEngines"] and s["durableTurnContract"] == durable
    lean.check_release(s)


# --- enable / disable with a scripted openclaw command ----------------------------------------------------------

FAKE_OC = r"""#!/usr/bin/env python3
import json, os, sys
state = os.environ["OPENCLAW_STATE_DIR"]
cfgp = os.path.join(state, "openclaw.json")
cfg = json.load(open(cfgp)) if os.path.exists(cfgp) else {}
open(os.path.join(state, "calls.log"), "a").write(json.dumps(sys.argv[1:]) + "\n")
a = sys.argv[1:]
old = bool(os.environ.get("FAKE_OC_OLD"))  # 2026.7.x: no capability grant, --force refused with --link
if a[:2] == ["plugins", "install"] and "--help" in a:
    print("  --force   Overwrite an existing installed plugin" if old else
          "  --accept-capabilities   Accept the plugin's declared capabilities"); sys.exit(0)
if a[:2] == ["plugins", "install"] and old and "--force" in a:
    print("--force is not supported with --link.", file=sys.stderr); sys.exit(1)
if a[:2] == ["plugins", "install"]:
    d = a[a.index("-l") + 1]
    man = json.load(open(os.path.join(d, "openclaw.plugin.json")))
    p = cfg.setdefault("plugins", {})
    p.setdefault("load", {}).setdefault("paths", []).append(d)
    p.setdefault("entries", {})[man["id"]] = {"enabled": True}
    p.setdefault("slots", {})["contextEngine"] = man["id"]
elif a[:2] == ["plugins", "uninstall"]:
    p = cfg.get("plugins", {})
    p.get("entries", {}).pop(a[2], None)
    p["load"] = {"paths": []}
    p.setdefault("slots", {})["contextEngine"] = "legacy"
json.dump(cfg, open(cfgp, "w"))
"""


@pytest.fixture
def fake_openclaw(tmp_path, isolated_env, monkeypatch):
    pkg = fake_release(tmp_path / "oc", "2026.9.6")
    binary = pkg / "openclaw.mjs"
    binary.write_text(FAKE_OC)
    binary.chmod(0o755)
    monkeypatch.setenv("OCCD_OPENCLAW_BIN", str(binary))
    state = isolated_env / ".openclaw"
    state.mkdir()
    (state / "openclaw.json").write_text("{}")
    return state


def calls(state: Path) -> list[list[str]]:
    f = state / "calls.log"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_enable_asks_installs_a_stable_copy_and_disable_undoes_it(fake_openclaw):
    state = fake_openclaw
    with pytest.raises(OccdError, match="declined"):
        lean.enable(None, state, confirm=lambda text: False)
    assert not any(c[:2] == ["plugins", "install"] and "-l" in c for c in calls(state))
    asked = []
    res = lean.enable(None, state, confirm=lambda text: asked.append(text) or True)
    assert asked and "capabilities" in asked[0]
    inst = lean.installed_plugin_dir()
    assert res["pluginDir"] == str(inst) and inst.is_relative_to(Path(os.environ["OCCD_HOME"]))
    (install,) = [c for c in calls(state) if "-l" in c]
    assert install == ["plugins", "install", "-l", str(inst), "--force", "--accept-capabilities"]
    code = (inst / "index.js").read_text()
    assert {p.name for p in lean.plugin_source().glob("*.js")} <= {p.name for p in inst.iterdir()}
    assert lean.plugin_folder_problem(inst) is None
    assert lean.PATHS_LINE not in code and json.dumps(str(lean.policy_path())) in code
    assert lean.read_policy()["default"]["mode"] == "off"  # nothing hidden until the daemon's policy says so
    assert lean.is_enabled(state)
    assert json.loads((state / "openclaw.json").read_text())["plugins"]["slots"]["contextEngine"] == lean.PLUGIN_ID
    out = lean.disable(None, state)
    assert out["wasInstalled"] and ["plugins", "uninstall", lean.PLUGIN_ID, "--force", "--keep-files"] in calls(state)
    assert not inst.exists() and not lean.policy_path().exists() and not lean.is_enabled(state)
    assert json.loads((state / "openclaw.json").read_text())["plugins"]["slots"]["contextEngine"] == "legacy"


def test_enable_on_a_2026_7_release_links_without_force(fake_openclaw, monkeypatch):
    monkeypatch.setenv("FAKE_OC_OLD", "1")
    lean.enable(None, fake_openclaw, yes=True)
    (install,) = [c for c in calls(fake_openclaw) if "-l" in c]
    assert install == ["plugins", "install", "-l", str(lean.installed_plugin_dir())]
    assert lean.is_enabled(fake_openclaw)


def test_enable_refuses_when_another_engine_owns_the_slot(fake_openclaw):
    state = fake_openclaw
    (state / "openclaw.json").write_text(json.dumps({"plugins": {"slots": {"contextEngine": "lossless-claw"}}}))
    with pytest.raises(OccdError, match="lossless-claw") as e:
        lean.enable(None, state, yes=True)
    assert e.value.code == "LEAN_SLOT_TAKEN"
    assert calls(state) == [] and not lean.installed_plugin_dir().exists()


@pytest.mark.slow
def test_cli_enable_without_yes_in_json_mode_does_not_install(fake_openclaw):
    p = subprocess.run([sys.executable, "-m", "occd", "lean", "enable", "--json"], capture_output=True, text=True,
                       timeout=60, input="")
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["code"] == "CANCELLED"
    p = subprocess.run([sys.executable, "-m", "occd", "lean", "enable"], capture_output=True, text=True,
                       timeout=60, input="y\n")
    assert p.returncode == 0, p.stderr
    assert "Lean view enabled" in p.stdout
    p = subprocess.run([sys.executable, "-m", "occd", "lean", "status", "--json"], capture_output=True, text=True, timeout=60)
    st = json.loads(p.stdout)
    assert st["enabled"] and st["slot"] == lean.PLUGIN_ID


# --- counts and checks ------------------------------------------------------------------------------------------

def test_session_view_from_counts():
    policy = {"default": {"mode": "off"}, "agents": {}, "sessions": {"agent:main:main": {"mode": "drop"}}}
    stats = {"sessions": {"agent:main:main": {"charsIn": 40_000, "charsOut": 10_000, "callsHidden": 7, "at": 1_000}}}
    v = lean.session_view(stats, policy, "agent:main:main")
    assert v["active"] and v["tokensSaved"] == 7_500 and v["savedPercent"] == 75.0 and v["callsHidden"] == 7
    assert lean.session_view(stats, policy, "agent:main:other") is None
    assert lean.session_view({}, {"default": {"mode": "stub"}, "agents": {}, "sessions": {}}, "agent:x:y")["mode"] == "stub"
    # OpenClaw's memory flush in a side session forked from agent:main:main: shown with that session's mode
    side = "agent:main:internal-session-effects:run-1"
    stats["sessions"][side] = {"charsIn": 40_000, "charsOut": 12_000, "sideOf": "agent:main:main", "at": 2_000}
    v = lean.session_view(stats, policy, side)
    assert v["mode"] == "drop" and v["active"] and v["sideOf"] == "agent:main:main" and v["tokensSaved"] == 7_000


def test_log_scan_finds_degradation_and_quarantine_of_the_plugin_only():
    lines = [
        '{"msg":"context engine occd-lean degraded to legacy for this turn: missing commitTurn"}',
        "context engine lossless-claw degraded to legacy",
        '[context-engine] Context engine "occd-lean" failed during assemble: boom; quarantining it for this process '
        'and falling back to default engine "legacy".',
        '[context-engine] Context engine "occd-lean" owner=x is registered for read-only discovery only; falling back '
        'to default engine "legacy" without quarantine until runtime activation registers it.',
        "occd-lean: assemble ok",
    ]
    r = lean.scan_log_lines(lines)
    assert r["degraded"] == 2 and r["quarantined"] == 1


def test_health_checks(fake_openclaw, tmp_path, monkeypatch):
    assert lean.health_checks(fake_openclaw)[0]["status"] == "skip"
    lean.enable(None, fake_openclaw, yes=True)
    logs = tmp_path / "oclogs"
    logs.mkdir()
    monkeypatch.setenv("OCCD_OPENCLAW_LOG_DIR", str(logs))
    by = {c["name"]: c for c in lean.health_checks(fake_openclaw)}
    assert by["lean-slot"]["status"] == "ok" and by["lean-engine"]["status"] == "ok"
    (logs / "openclaw-2026-11-25.log").write_text("x\n[context-engine] engine occd-lean quarantined: assemble threw\n")
    by = {c["name"]: c for c in lean.health_checks(fake_openclaw)}
    assert by["lean-engine"]["status"] == "fail" and "quarantined" in by["lean-engine"]["message"]
    cfg = json.loads((fake_openclaw / "openclaw.json").read_text())
    cfg["plugins"]["slots"]["contextEngine"] = "legacy"
    (fake_openclaw / "openclaw.json").write_text(json.dumps(cfg))
    assert {c["name"]: c for c in lean.health_checks(fake_openclaw)}["lean-slot"]["status"] == "fail"


# --- the daemon: the lean job ------------------------------------------------------------------------------------

def test_lean_job_turns_sessions_on_by_policy_and_apply_leaves_them_alone(fake_openclaw, isolated_env):
    from test_jobs import BIG, ctx_for, make_state

    # a 100k window: the big session is past OpenClaw's budget (the apply job's own trigger decides), the small not
    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}, "agent:main:small": {"turns": 2, "seed": 2}},
                       window=100_000)
    lean.enable(None, state, yes=True)
    before = (state / "agents/main/sessions/sessions.json").read_text()
    files = {p: p.read_bytes() for p in (state / "agents/main/sessions").glob("*.jsonl")}
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "lean", "apply"])
        assert res["lean"][1]["turnedOn"] == 1, res
        assert res["apply"][1]["acted"] == 0  # the lean view is the first tool: no .jsonl rewrite
        pol = lean.read_policy()
        assert set(pol["sessions"]) == {"agent:main:main"}
        assert pol["sessions"]["agent:main:main"]["mode"] == "drop" and pol["sessions"]["agent:main:main"]["keepTurns"] == 5
        assert pol["sessions"]["agent:main:main"]["keepResults"] == 5  # issue 30.2: the newest 5 results, not 5 turns
        (a,) = led.history(kind="lean")
        assert a["outcome"] == "ok" and a["session_key"] == "agent:main:main" and not a["dry_run"]
        run_cycle(ctx, ["scan", "lean", "apply"])  # nothing changes a second time
        assert len(led.history(kind="lean")) == 1
    assert (state / "agents/main/sessions/sessions.json").read_text() == before
    assert all(p.read_bytes() == b for p, b in files.items())


def test_lean_rules_carry_the_cache_cost_ratio_and_follow_changed_settings(fake_openclaw, isolated_env):
    """Issue 20: the plugin's cost rule needs what a move costs for the session's model ((write - read) / read of
    its prices: 11.5 for the default Anthropic-style prices); rules written by an older occd (highWater 0.8, no
    ratio) follow the settings on the next act cycle, recorded once; a further cycle changes nothing."""
    from test_jobs import BIG, ctx_for, make_state

    from occd.jobs.lean import cache_cost_ratio
    from occd.policy import cost

    assert cache_cost_ratio(cost.complete(3.0)) == 11.5
    assert cache_cost_ratio(cost.complete(1.25, read=0.125, write=1.25)) == 9.0
    assert cache_cost_ratio(None) is None and cache_cost_ratio(cost.complete(1.0, read=0.0)) is None
    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}}, window=100_000)
    lean.enable(None, state, yes=True)
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        assert run_cycle(ctx, ["scan", "lean"])["lean"][1]["turnedOn"] == 1
        rules = lean.read_policy()["sessions"]["agent:main:main"]
        assert rules["cacheCostRatio"] == 11.5 and rules["highWater"] == 0.9 and rules["requestsPerTurn"] is None
        assert rules["cacheTtlSeconds"] == 300
        old = {k: v for k, v in rules.items() if k not in ("cacheCostRatio", "requestsPerTurn")} | {"highWater": 0.8}
        doc = lean.read_policy()
        doc["sessions"]["agent:main:main"] = old
        lean.write_policy(doc)
        res = run_cycle(ctx, ["scan", "lean"])["lean"][1]
        assert res.get("refreshed") == 1 and res["turnedOn"] == 0, res
        assert lean.read_policy()["sessions"]["agent:main:main"] == rules
        newest = led.history(kind="lean")[0]
        assert "follow the settings" in newest["reason"] and "highWater" in newest["reason"], newest
        n = len(led.history(kind="lean"))
        run_cycle(ctx, ["scan", "lean"])
        assert len(led.history(kind="lean")) == n


def test_lean_job_observe_mode_records_and_writes_nothing(fake_openclaw, isolated_env):
    from test_jobs import BIG, ctx_for, make_state

    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}})
    lean.enable(None, state, yes=True)
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="observe")
        res = run_cycle(ctx, ["scan", "lean"])["lean"][1]
        assert res["wouldDo"] == 1 and res["turnedOn"] == 0
        assert lean.read_policy()["sessions"] == {}
        (a,) = led.history(kind="lean")
        assert a["dry_run"] and a["outcome"] == "skipped"


def test_lean_job_without_the_plugin_changes_nothing(isolated_env):
    from test_jobs import BIG, ctx_for, make_state

    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}})
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "lean", "apply"])
        assert res["lean"][1] == {"enabled": False}
        assert res["apply"][1]["acted"] == 1  # the .jsonl rewrite stays for users without the lean view
        assert not lean.policy_path().exists()


def test_occd_status_shows_the_lean_view_per_session(fake_openclaw, isolated_env):
    from test_jobs import BIG, ctx_for, make_state

    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}})
    lean.enable(None, state, yes=True)
    with Ledger.open() as led:
        run_cycle(ctx_for(state, led, mode="act"), ["scan", "lean"])
    # what the plugin writes after an assemble: counts only
    lean.stats_path().write_text(json.dumps({"version": 1, "sessions": {"agent:main:main": {
        "mode": "drop", "callsHidden": 120, "resultsHidden": 120, "charsIn": 400_000, "charsOut": 100_000, "at": 1}}}))
    env = {**os.environ, "OPENCLAW_STATE_DIR": str(state)}
    p = subprocess.run([sys.executable, "-m", "occd", "status", "--json"], capture_output=True, text=True, timeout=60, env=env)
    data = json.loads(p.stdout)
    (b,) = data["agents"][0]["biggest"]
    assert b["lean"]["active"] and b["lean"]["tokensSaved"] == 75_000 and b["lean"]["callsHidden"] == 120
    p = subprocess.run([sys.executable, "-m", "occd", "status"], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert "LEAN VIEW" in p.stdout and "drop, -" in p.stdout and "(75%)" in p.stdout
    assert "Lean view: on for 1 session," in p.stdout  # issue 23: plurals
