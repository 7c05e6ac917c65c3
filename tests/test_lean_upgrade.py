"""The lean view after an OpenClaw upgrade (10.1+ seals installed plugin files): occd re-installs its plugin
with OpenClaw's installer (`--force --accept-capabilities`) and reloads it (`openclaw plugins reload <id>`), with a
scripted `openclaw` command standing in for the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd import lean
from occd.cli.main import cli
from occd.lean.upgrade import refresh_after_upgrade

FAKE_OC = r"""#!PYTHON
import json, os, shutil, stat, sys
state = os.environ["OPENCLAW_STATE_DIR"]
cfgp = os.path.join(state, "openclaw.json")
cfg = json.load(open(cfgp)) if os.path.exists(cfgp) else {}
open(os.path.join(state, "calls.log"), "a").write(json.dumps(sys.argv[1:]) + "\n")
a = sys.argv[1:]
if a == ["--version"]:
    here = os.path.dirname(os.path.realpath(__file__))
    print("OpenClaw " + json.load(open(os.path.join(here, "package.json")))["version"]); sys.exit(0)
if a[:2] == ["plugins", "install"] and "--help" in a:
    print("  --force   Overwrite an existing installed plugin\n  --accept-capabilities   Accept its capabilities")
    sys.exit(0)
if a == ["plugins", "--help"]:
    print("Commands:\n  install\n  uninstall\n  inspect" + ("\n  reload   Reload a plugin" if os.environ.get("FAKE_OC_RELOAD") else ""))
    sys.exit(0)
if a[:2] == ["plugins", "reload"]:
    sys.exit(0 if a[2] == "occd-lean" else 1)
if a[:2] == ["plugins", "install"]:
    d = a[a.index("-l") + 1]
    man = json.load(open(os.path.join(d, "openclaw.plugin.json")))
    sealed = os.path.join(state, "extensions", man["id"])   # 10.1+: a sealed copy is what runs
    if os.path.isdir(sealed):
        for root, dirs, files in os.walk(sealed):
            os.chmod(root, 0o755)
        shutil.rmtree(sealed)
    shutil.copytree(d, sealed)
    for root, dirs, files in os.walk(sealed):
        for f in files:
            os.chmod(os.path.join(root, f), 0o444)
    p = cfg.setdefault("plugins", {})
    p.setdefault("entries", {})[man["id"]] = {"enabled": True}
    p.setdefault("slots", {})["contextEngine"] = man["id"]
json.dump(cfg, open(cfgp, "w"))
"""


def _release(root: Path, version: str) -> Path:
    pkg = root / "node_modules" / "openclaw"
    (pkg / "dist").mkdir(parents=True, exist_ok=True)
    (pkg / "package.json").write_text(json.dumps({"name": "openclaw", "version": version}))
    (pkg / "dist" / "plugin-entry.d.ts").write_text(
        "registerContextEngine(id: string, factory: ContextEngineFactory): void;\n"
        f'transcriptSemantics?: {{ currentTurnFence?: "{lean.FENCE}"; }};\n')
    b = pkg / "openclaw.mjs"
    b.write_text(FAKE_OC.replace("PYTHON", sys.executable))
    b.chmod(0o755)
    return pkg


@pytest.fixture
def oc(tmp_path, isolated_env, monkeypatch):
    pkg = _release(tmp_path / "oc", "2026.9.6")
    monkeypatch.setenv("OCCD_OPENCLAW_BIN", str(pkg / "openclaw.mjs"))
    state = isolated_env / ".openclaw"
    state.mkdir()
    (state / "openclaw.json").write_text("{}")
    return state, pkg


def _calls(state: Path) -> list[list[str]]:
    f = state / "calls.log"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def _upgrade(pkg: Path, version: str) -> None:
    (pkg / "package.json").write_text(json.dumps({"name": "openclaw", "version": version}))


@pytest.mark.parametrize("reload", [True, False])
def test_an_upgrade_reinstalls_and_reloads_the_plugin(oc, monkeypatch, reload):
    state, pkg = oc
    if reload:
        monkeypatch.setenv("FAKE_OC_RELOAD", "1")
    monkeypatch.setattr(lean, "gateway_running", lambda _s: True)
    lean.enable(None, state, yes=True)
    sealed = state / "extensions" / lean.PLUGIN_ID / "index.js"
    first = sealed.read_bytes()
    assert refresh_after_upgrade(state) is None  # same release: nothing to do, no CLI call beyond the version
    n = len(_calls(state))
    _upgrade(pkg, "2026.10.3")
    up = refresh_after_upgrade(state)
    assert up == {"from": "2026.9.6", "to": "2026.10.3", "reinstalled": True, "reloaded": reload,
                  "hint": None if reload else "restart the OpenClaw gateway to load it"}
    new = _calls(state)[n:]
    assert ["plugins", "install", "-l", str(lean.installed_plugin_dir()), "--force", "--accept-capabilities"] in new
    assert (["plugins", "reload", lean.PLUGIN_ID] in new) == reload
    assert sealed.read_bytes() == first and not (sealed.stat().st_mode & 0o222)  # re-installed, never edited
    m = json.loads(lean.marker_path().read_text())
    assert m["release"] == "2026.10.3" and m["previousRelease"] == "2026.9.6"
    assert refresh_after_upgrade(state) is None  # done once


def test_a_release_the_plugin_cannot_serve_is_reported_not_installed(oc):
    state, pkg = oc
    lean.enable(None, state, yes=True)
    n = len(_calls(state))
    (pkg / "dist" / "plugin-entry.d.ts").write_text(
        'registerContextEngine(id: string): void;\ntranscriptSemantics?: { currentTurnFence?: "fence-v9"; };\n')
    _upgrade(pkg, "2026.11.5")
    from occd.errors import OccdError

    with pytest.raises(OccdError, match="durable-turn contract newer"):
        refresh_after_upgrade(state)
    assert not [c for c in _calls(state)[n:] if c[:2] == ["plugins", "install"]]
    assert json.loads(lean.marker_path().read_text())["release"] == "2026.9.6"  # tried again next time


def test_the_daemon_reinstalls_after_an_upgrade(oc):
    state, pkg = oc
    lean.enable(None, state, yes=True)
    _upgrade(pkg, "2026.10.3")
    r = CliRunner().invoke(cli, ["run", "--once", "--json"])
    assert r.exit_code == 0, r.output
    installs = [c for c in _calls(state) if c[:2] == ["plugins", "install"] and "-l" in c]
    assert len(installs) == 2  # enable, then the daemon's re-install
    from occd.ledger import Ledger

    with Ledger.open(readonly=True) as led:
        (row,) = led.history(kind="lean")
    assert row["outcome"] == "ok" and "2026.9.6 -> 2026.10.3: plugin re-installed" in row["reason"]


def test_no_lean_rules_for_an_agent_whose_schema_occd_does_not_know(oc):
    """Rules the daemon turned on stay only while occd knows the agent's schema: bumped to 29, they go (the view
    hides what occd can no longer vouch for), and the ledger says why."""
    from docschemas import DocDbState
    from occd.ledger import Ledger

    state, pkg = oc
    db = DocDbState(state, schema=29)
    db.add_session("agent:main:main", events=[])
    lean.enable(None, state, yes=True)
    pol = lean.read_policy()
    pol["sessions"]["agent:main:main"] = {"mode": "drop", "keepTurns": 5, "batchTurns": 3}
    lean.write_policy(pol)
    r = CliRunner().invoke(cli, ["run", "--once", "--act", "--json"])
    assert r.exit_code == 0, r.output
    assert lean.read_policy()["sessions"] == {}
    with Ledger.open(readonly=True) as led:
        rows = led.history(kind="lean")
    assert any(x["session_key"] == "agent:main:main" and "schema unverified" in x["reason"] for x in rows)
    assert not [c for c in _calls(state) if c[:2] == ["gateway", "call"] or c[:2] == ["sessions", "compact"]]
