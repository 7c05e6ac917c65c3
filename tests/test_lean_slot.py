"""Issue 31.10: the lean view switched off behind occd's back (OpenClaw's context-engine slot set back to legacy by an
upgrade, `openclaw doctor --fix` or a hand edit). `status --check` names it (exit 1), doctor says it, and no session
counts as covered by the lean view meanwhile: the daemon's apply job protects them as if the lean view were off."""

from __future__ import annotations

import json

from click.testing import CliRunner

from occd import lean
from occd.cli.main import cli
from occd.jobs import run_cycle
from occd.ledger import Ledger
from tests.test_lean import fake_openclaw  # noqa: F401 - the fixture


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _set_slot(state, value):
    cfg = json.loads((state / "openclaw.json").read_text())
    cfg["plugins"]["slots"]["contextEngine"] = value
    (state / "openclaw.json").write_text(json.dumps(cfg))


def test_slot_taken_back_uncovers_the_sessions_and_is_named(fake_openclaw, isolated_env):  # noqa: F811
    from test_jobs import BIG, ctx_for, make_state

    state = make_state(isolated_env, {"agent:main:main": {**BIG, "seed": 1}}, window=100_000)
    lean.enable(None, state, yes=True)
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "lean", "apply"])
        assert res["lean"][1]["turnedOn"] == 1 and res["apply"][1]["acted"] == 0, res
    r = run("status", "--check", "--json")
    assert "LEAN_SLOT_LOST" not in [p["code"] for p in json.loads(r.stdout)["problems"]]
    assert run("status", "--json").stdout.count('"slotLost"') == 0

    _set_slot(state, "legacy")
    r = run("status", "--check", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and "LEAN_SLOT_LOST" in [p["code"] for p in out["problems"]]
    assert "context-engine slot is legacy" in r.stderr
    r = run("status", "--check")
    assert r.exit_code == 1 and "context-engine slot is legacy" in r.stderr
    r = run("doctor", "--check", "openclaw-plugins")
    assert r.exit_code == 1 and "lean-slot" in r.output and "legacy" in r.output
    st = json.loads(run("status", "--json").stdout)
    assert st["lean"]["slotLost"] == "legacy"
    assert all(not v["active"] for v in st["lean"]["sessions"].values()) and st["lean"]["sessions"]
    assert "covers no session" in run("status").output

    files = {p: p.read_bytes() for p in (state / "agents/main/sessions").glob("*.jsonl")}
    with Ledger.open() as led:
        ctx = ctx_for(state, led, mode="act")
        res = run_cycle(ctx, ["scan", "lean", "apply"])
        assert res["lean"][1].get("slotLost") == "legacy", res
        assert res["apply"][1]["acted"] == 1, res  # protected as if the lean view were off: stripped
        assert led.history(kind="strip")[0]["outcome"] == "ok"
    assert any(p.read_bytes() != b for p, b in files.items())

    _set_slot(state, lean.PLUGIN_ID)  # selected again: the sessions are covered again, nothing to name
    r = run("status", "--check", "--json")
    assert "LEAN_SLOT_LOST" not in [p["code"] for p in json.loads(r.stdout)["problems"]]
    assert run("doctor", "--check", "openclaw-plugins").exit_code == 0


def test_an_unreadable_config_says_nothing_about_the_slot(fake_openclaw, isolated_env):  # noqa: F811
    from occd.lean.check import slot_lost
    from test_jobs import make_state

    state = make_state(isolated_env, {"agent:main:main": {"turns": 2, "seed": 2}})
    lean.enable(None, state, yes=True)
    assert slot_lost(state) is None
    (state / "openclaw.json").write_text("{ half written")
    assert slot_lost(state) is None
    (state / "openclaw.json").write_text(json.dumps({"plugins": {"slots": {"contextEngine": "other-engine"}}}))
    assert slot_lost(state) == "other-engine"
