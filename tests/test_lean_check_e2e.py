"""Issue 21 §2 on the real 2026.9.6 gateway: the lean view switched off behind occd's back (the context-engine
slot set back to legacy in openclaw.json, the gateway restarted) is a named failure, never silence; turns that
went through the plugin raise nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, require_e2e
from test_lean_e2e import gateway_turn, start_gateway

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
KEY = "agent:main:main"


def test_lean_view_switched_off_behind_occds_back_is_named(tmp_path):
    require_e2e()
    oc = OpenClawHome("2026.9.6", tmp_path)
    with oc:
        cfg_path = Path(oc.env["OPENCLAW_CONFIG_PATH"])
        oc.env["OCCD_OPENCLAW_BIN"] = oc.oc
        p = oc.occd("lean", "enable", "--yes", "--json", timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        policy_path = Path(json.loads(p.stdout)["policy"])
        pol = json.loads(policy_path.read_text())
        pol["sessions"][KEY] = {"mode": "drop", "keepTurns": 1, "batchTurns": 1, "neverHide": [],
                                "keepResultsUnderChars": 0}
        policy_path.write_text(json.dumps(pol))
        start_gateway(oc)
        gateway_turn(oc, "first plain question")
        gateway_turn(oc, "second plain question")
        p = oc.occd("run", "--once", "--json", timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        p = oc.occd("status", "--check", "--json", timeout=120)
        problems = json.loads(p.stdout).get("problems") or []
        assert not [x for x in problems if x.get("code") == "LEAN_BYPASSED"], problems  # both went through it
        stats = json.loads((Path(oc.env["OCCD_HOME"]) / "lean" / "stats.json").read_text())
        assert stats["sessions"][KEY]["calls"] >= 2

        # behind occd's back: the slot goes back to legacy, the gateway restarts, a turn runs without the plugin
        oc.stop_gateway()
        cfg = json.loads(cfg_path.read_text())
        cfg.setdefault("plugins", {}).setdefault("slots", {})["contextEngine"] = "legacy"
        cfg_path.write_text(json.dumps(cfg, indent=2))
        start_gateway(oc)
        calls_before = json.loads((Path(oc.env["OCCD_HOME"]) / "lean" / "stats.json").read_text())["sessions"][KEY]["calls"]
        gateway_turn(oc, "third plain question")
        after = json.loads((Path(oc.env["OCCD_HOME"]) / "lean" / "stats.json").read_text())["sessions"][KEY]["calls"]
        assert after == calls_before  # the plugin really was not called
        p = oc.occd("run", "--once", "--json", timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        p = oc.occd("status", "--check", timeout=120)
        assert p.returncode == 1 and f"lean:main/{KEY}" in p.stderr and "did not go through the lean view" in p.stderr
        p = oc.occd("status", timeout=120)
        assert f"PROBLEM lean:main/{KEY}" in p.stdout
        p = oc.occd("doctor", "--json", timeout=300)
        (d,) = [x for x in json.loads(p.stdout)["checks"] if x["name"] == "problems"]
        assert p.returncode == 1 and d["status"] == "fail"
