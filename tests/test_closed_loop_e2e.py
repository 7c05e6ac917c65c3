"""The daemon against a real OpenClaw (2026.7.1, offline, the scripted model reporting usage by size): its
prediction of OpenClaw's pre-prompt estimate, a blocked session unblocked by `occd run --once --act`, and a short
closed loop in which `occd run --act` must keep OpenClaw from compacting at all."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
KNOBS: dict[str, str] = {}  # issue 19: the daemon's defaults (no OCCD_* setting) must do it
OVERFLOW = "Context overflow"


def _home(tmp_path, monkeypatch, window: int, docs: int, port: int) -> OpenClawHome:
    monkeypatch.setenv("FAKE_USAGE", "size")  # token figures grow with the request, as a real model's do
    oc = OpenClawHome("2026.7.1", tmp_path)
    oc.port = int(os.environ.get("OCCD_E2E_PORT_BASE", "18630")) + port
    oc.__enter__()
    cfg_path = Path(oc.env["OPENCLAW_CONFIG_PATH"])
    cfg_path.write_text(cfg_path.read_text().replace('"contextWindow": 128000', f'"contextWindow": {window}'))
    rnd = random.Random(7)
    vocab = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud ember".split()
    for i in range(1, docs + 1):
        (oc.workspace / f"doc{i}.txt").write_text(" ".join(rnd.choice(vocab) for _ in range(3000)) + "\n")
    return oc


def _entry(oc) -> dict:
    d = json.loads((oc.state_dir / "agents/main/sessions/sessions.json").read_text())
    return d["agent:main:main"]


def _payload(res: dict) -> str:
    return json.dumps(res.get("payloads"))


def _predict(oc) -> int:
    """occd's prediction of OpenClaw's next pre-prompt estimate, from the files as they are now."""
    from occd.policy import budget as b

    e = _entry(oc)
    entries = [json.loads(x) for x in Path(e["sessionFile"]).read_text().splitlines() if x.strip()]
    ctx = b.estimate_context(b.context_messages(entries))
    over = b.learn_overhead(e.get("contextBudgetStatus"), ctx)
    assert over is not None
    return b.predict(ctx, e["contextBudgetStatus"]["promptBudgetBeforeReserve"], over).predicted


def test_blocked_session_is_unblocked_by_one_cycle(tmp_path, monkeypatch):
    require_e2e()
    oc = _home(tmp_path, monkeypatch, window=40000, docs=8, port=0)
    try:
        ws = oc.workspace
        oc.turn(f"Q1: READ {ws}/doc1.txt and tell me what is in it")
        # occd (observe mode) sees the session: it acts only on sessions it saw run (policy.act_on_unseen off)
        p = subprocess.run([sys.executable, "-m", "occd", "run", "--once"], capture_output=True, text=True,
                           env={**oc.env, **KNOBS}, timeout=300)
        assert p.returncode == 0, p.stderr
        predicted = _predict(oc)
        oc.turn(f"Q2: READ {ws}/doc2.txt and tell me what is in it")
        actual = _entry(oc)["contextBudgetStatus"]["estimatedPromptTokens"]
        # occd predicts OpenClaw's own pre-prompt estimate for the next turn closely
        assert abs(predicted - actual) <= 0.01 * actual + 50, (predicted, actual)
        blocked = None
        for i in range(3, 8):
            res = oc.turn(f"Q{i}: READ {ws}/doc{i}.txt and tell me what is in it")
            if OVERFLOW in _payload(res):
                blocked = i
                break
        assert blocked, "OpenClaw did not reach its overflow block"
        # the user's next message is blocked too: OpenClaw will not compact again so soon
        assert OVERFLOW in _payload(oc.turn("Q99: are you there?"))
        time.sleep(4)  # the transcript settles (idle_seconds, 3 s by default)
        env = {**oc.env, **KNOBS}
        p = subprocess.run([sys.executable, "-m", "occd", "run", "--once", "--act"], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        hist = json.loads(subprocess.run([sys.executable, "-m", "occd", "history", "--json"], capture_output=True,
                                         text=True, env=env, timeout=120).stdout)
        hist = hist if isinstance(hist, list) else hist.get("actions", hist.get("data", []))
        acted = [a for a in hist if a.get("outcome") == "ok" and not (a.get("dryRun") or a.get("dry_run")) and a["kind"] in ("strip", "rotate")
                 and (a.get("before") or {}).get("emergency") == "BLOCKED"]
        assert acted, json.dumps(hist)[:3000]
        st = json.loads(subprocess.run([sys.executable, "-m", "occd", "status", "--json"], capture_output=True,
                                       text=True, env=env, timeout=120).stdout)
        agents = st["agents"] if "agents" in st else st["data"]["agents"]
        assert [e["kind"] for e in agents[0]["emergencies"]] == ["BLOCKED"]
        # the next real turn reaches the model and gets its answer
        n = len(oc.requests())
        res = oc.turn("Q100: READ the notes again, please")
        assert OVERFLOW not in _payload(res), _payload(res)
        # the model was sent the message (in a 40k window OpenClaw may still compact after the reply: its usage
        # threshold, window - reserve, is below what its own tool definitions take)
        assert any("Q100:" in json.dumps(r["body"]["messages"]) for r in oc.requests()[n:])
    finally:
        oc.close()


def test_short_loop_without_a_compaction(tmp_path, monkeypatch):
    """10 tool-heavy turns in a 48k window: OpenClaw alone compacts by the 3rd turn (its budget is 28k); with
    `occd run --act` beside it (its defaults: no OCCD_* setting), none, and the model still sees
    every question."""
    require_e2e()
    turns = int(os.environ.get("OCCD_LOOP_TURNS", "10"))
    oc = _home(tmp_path, monkeypatch, window=48000, docs=turns, port=1)
    env = {**oc.env, **KNOBS}
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen([sys.executable, "-m", "occd", "run", "--act"], env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        ws = oc.workspace
        for i in range(1, turns + 1):
            res = oc.turn(f"Q{i}: READ {ws}/doc{i}.txt and tell me what is in it")
            assert OVERFLOW not in _payload(res)
            time.sleep(7)
        oc.turn("FINAL: list my questions")
        e = _entry(oc)
        comps = max(e.get("compactionCount") or 0, len(e.get("compactionCheckpoints") or []))
        assert comps == 0, (tmp_path / "daemon.log").read_text()[-3000:]
        final = json.dumps(oc.requests()[-1]["body"]["messages"])
        assert all(f"Q{i}:" in final for i in range(1, turns + 1))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        log.close()
        oc.close()
