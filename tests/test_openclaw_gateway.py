"""Gateway client: command lines, environment, and the mapping of OpenClaw's replies (shapes recorded from a running
2026.9.6 gateway) to results and errors. The `openclaw` here is a stand-in script that replays those replies;
tests/test_openclaw_e2e.py runs the same calls against the real gateway."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from occd.errors import BusyError, NotFoundError, OccdError
from occd.openclaw.gateway import Gateway, gateway_endpoint, parse_json_output

DOWN = {"ok": False, "error": {"type": "gateway_transport_error", "kind": "closed",
                               "message": "Gateway not reachable at ws://127.0.0.1:18571 (ECONNREFUSED).",
                               "reason": "connect ECONNREFUSED 127.0.0.1:18571"},
        "gateway": {"url": "ws://127.0.0.1:18571", "urlSource": "local loopback"}}
CHANGED = {"ok": False, "error": {"type": "gateway_request_error", "code": "INVALID_REQUEST",
                                  "message": "Session agent:main:main changed before reset. Retry.",
                                  "details": {"reason": "session-changed"}, "retryable": False}}
BADTOKEN = {"ok": False, "error": {"type": "gateway_request_error", "code": "INVALID_REQUEST",
                                   "message": "unauthorized: gateway token mismatch",
                                   "details": {"code": "AUTH_TOKEN_MISMATCH"}, "retryable": False}}


def fake_openclaw(tmp_path: Path, reply: dict | None, rc: int = 0, prefix: str = "", sleep: float = 0) -> Path:
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "openclaw"
    script.write_text(f"""#!{sys.executable}
import json, os, sys, time
time.sleep({sleep})
with open({str(log)!r}, "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv[1:], "state": os.environ.get("OPENCLAW_STATE_DIR"),
                         "port": os.environ.get("OPENCLAW_GATEWAY_PORT"),
                         "token": os.environ.get("OPENCLAW_GATEWAY_TOKEN")}}) + "\\n")
sys.stdout.write({prefix!r} + json.dumps({reply!r}, indent=2) + "\\n")
sys.exit({rc})
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_describe_command_line_and_env(tmp_path):
    bin_ = fake_openclaw(tmp_path, {"session": {"key": "agent:main:main", "sessionId": "s1", "status": "done"}},
                         prefix="[plugins] loaded 3 plugins\n")
    gw = Gateway(tmp_path / "state", openclaw_bin=str(bin_), env={"PATH": os.environ["PATH"],
                                                                   "OPENCLAW_STATE_DIR": "/elsewhere",
                                                                   "OPENCLAW_GATEWAY_TOKEN": "t0k"})
    r = gw.sessions_describe("agent:main:main")
    assert r["session"]["sessionId"] == "s1"
    (c,) = calls(tmp_path)
    assert c["argv"] == ["gateway", "call", "sessions.describe", "--params", '{"key": "agent:main:main"}', "--json"]
    assert c["state"] == str(tmp_path / "state")       # occd's state dir wins
    assert c["token"] == "t0k" and "t0k" not in " ".join(c["argv"])  # token in the environment, not argv


def test_methods_send_the_verified_params(tmp_path):
    bin_ = fake_openclaw(tmp_path, {"runId": "k1", "status": "started"})
    gw = Gateway(tmp_path, openclaw_bin=str(bin_), env={"PATH": os.environ["PATH"]})
    gw.chat_send("agent:main:main", "hello", "k1")
    gw.sessions_reset("agent:main:main", "sid-1")
    gw.chat_history("agent:main:main")
    gw.sessions_compact("agent:main:main")
    got = calls(tmp_path)
    assert json.loads(got[0]["argv"][4]) == {"sessionKey": "agent:main:main", "message": "hello", "deliver": False,
                                             "idempotencyKey": "k1"}
    assert json.loads(got[1]["argv"][4]) == {"key": "agent:main:main", "expectedSessionId": "sid-1", "reason": "reset"}
    assert got[2]["argv"][2] == "chat.history"
    assert got[3]["argv"] == ["sessions", "compact", "agent:main:main", "--json"]


@pytest.mark.parametrize("reply,rc,exc,code", [
    (DOWN, 1, BusyError, "GATEWAY_DOWN"),
    (CHANGED, 1, OccdError, "SESSION_CHANGED"),
    (BADTOKEN, 1, OccdError, "GATEWAY_AUTH"),
    ({"ok": False, "error": {"type": "cli_error", "message": "Unknown agent id \"x\"."}}, 1, OccdError,
     "OPENCLAW_FAILED"),
    ({"session": None}, 0, NotFoundError, "SESSION_NOT_FOUND"),
])
def test_errors_are_mapped(tmp_path, reply, rc, exc, code):
    gw = Gateway(tmp_path, openclaw_bin=str(fake_openclaw(tmp_path, reply, rc)), env={"PATH": os.environ["PATH"]})
    with pytest.raises(exc) as ei:
        gw.sessions_describe("agent:main:main")
    assert ei.value.code == code and "\n" not in ei.value.message and ei.value.hint
    if code == "GATEWAY_DOWN":
        assert ei.value.exit_code == 75 and ei.value.message == "The OpenClaw gateway is not running"


def test_timeout_missing_binary_and_no_json(tmp_path):
    gw = Gateway(tmp_path, openclaw_bin=str(fake_openclaw(tmp_path, {}, sleep=5)), timeout=0.5,
                 env={"PATH": os.environ["PATH"]})
    with pytest.raises(BusyError) as ei:
        gw.chat_history("k")
    assert ei.value.code == "GATEWAY_TIMEOUT"
    with pytest.raises(OccdError) as ei:
        Gateway(tmp_path, openclaw_bin=None, env={"PATH": str(tmp_path / "empty")}).chat_history("k")
    assert ei.value.code == "OPENCLAW_MISSING"
    with pytest.raises(OccdError) as ei:
        Gateway(tmp_path, openclaw_bin=str(tmp_path / "nope"), env={}).chat_history("k")
    assert ei.value.code == "OPENCLAW_MISSING"
    txt = tmp_path / "t"
    txt.mkdir()
    script = txt / "openclaw"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    with pytest.raises(OccdError) as ei:
        Gateway(tmp_path, openclaw_bin=str(script), env={}).chat_history("k")
    assert ei.value.code == "OPENCLAW_FAILED"


def test_endpoint_from_env_and_config(tmp_path):
    (tmp_path / "openclaw.json").write_text('{gateway: {port: 18571, auth: {mode: "token", token: "cfg"}}}')
    assert gateway_endpoint(tmp_path, {}) == {"port": 18571, "token": "cfg", "url": "ws://127.0.0.1:18571"}
    assert gateway_endpoint(tmp_path, {"OPENCLAW_GATEWAY_PORT": "127.0.0.1:19000", "OPENCLAW_GATEWAY_TOKEN": "e"}) == \
        {"port": 19000, "token": "e", "url": "ws://127.0.0.1:19000"}
    assert gateway_endpoint(tmp_path / "none", {})["port"] == 18789


def test_parse_json_output():
    assert parse_json_output('noise\n{"a": 1}\n') == {"a": 1}
    assert parse_json_output("") is None and parse_json_output("no json") is None
