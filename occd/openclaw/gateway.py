"""Acting on database-era sessions through OpenClaw itself: the `openclaw` CLI and its gateway calls.

Verified shapes (OpenClaw 2026.9.6, see ../shared/docs/openclaw-state.md): sessions.describe {key} →
{session: {sessionId, status, ...}}; sessions.reset {key, expectedSessionId, reason} resets in place;
chat.send {sessionKey, message, deliver: false, idempotencyKey} starts one model turn. Each CLI call costs ~2 s
(start-up). When the gateway is down, calls raise BusyError so the caller defers and retries next cycle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from occd.errors import BusyError, OccdError


class Gateway:
    def __init__(self, state_dir: Path, openclaw_bin: str | None = None, timeout: float = 120.0, env=None):
        self.state_dir = state_dir
        self.bin = openclaw_bin or os.environ.get("OCCD_OPENCLAW_BIN") or shutil.which("openclaw")
        self.timeout = timeout
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("OPENCLAW_STATE_DIR", str(state_dir))
        self.env.setdefault("NO_COLOR", "1")

    def _run(self, args: list[str]) -> dict:
        if not self.bin:
            raise OccdError("The openclaw command is not on PATH", "install OpenClaw or set OCCD_OPENCLAW_BIN",
                            code="OPENCLAW_MISSING")
        try:
            p = subprocess.run([self.bin, *args], capture_output=True, text=True, timeout=self.timeout, env=self.env,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise BusyError(f"openclaw {' '.join(args[:3])} timed out after {self.timeout:.0f}s",
                            "the gateway may be busy; occd retries next cycle") from None
        out = p.stdout.strip()
        data = None
        if out:
            start = out.find("{")
            try:
                data = json.loads(out[start:]) if start >= 0 else None
            except ValueError:
                data = None
        if p.returncode != 0:
            text = (p.stderr or p.stdout).strip().splitlines()
            msg = text[-1] if text else f"exit {p.returncode}"
            low = (p.stderr + p.stdout).lower()
            if any(s in low for s in ("econnrefused", "gateway is not running", "gateway not running",
                                      "connect failed", "gateway closed", "no gateway")):
                raise BusyError("The OpenClaw gateway is not running", "occd waits and retries when it is up")
            raise OccdError(f"openclaw {' '.join(args[:3])} failed: {msg[:300]}", "see `occd service logs`",
                            code="OPENCLAW_FAILED", details=data if isinstance(data, dict) else None)
        return data if isinstance(data, dict) else {}

    def call(self, method: str, params: dict) -> dict:
        return self._run(["gateway", "call", method, "--params", json.dumps(params), "--json"])

    def sessions_describe(self, key: str) -> dict:
        return self.call("sessions.describe", {"key": key})

    def sessions_reset(self, key: str, expected_session_id: str, reason: str = "reset") -> dict:
        return self.call("sessions.reset", {"key": key, "expectedSessionId": expected_session_id, "reason": reason})

    def chat_send(self, key: str, message: str, idempotency_key: str) -> dict:
        return self.call("chat.send", {"sessionKey": key, "message": message, "deliver": False,
                                       "idempotencyKey": idempotency_key})

    def chat_history(self, key: str) -> dict:
        return self.call("chat.history", {"sessionKey": key})

    def sessions_compact(self, key: str) -> dict:
        return self._run(["sessions", "compact", key, "--json"])
