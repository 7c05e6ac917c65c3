"""Acting on database-era sessions through OpenClaw itself: the `openclaw` CLI and its gateway calls.

`openclaw gateway call <method> --params JSON --json` (and `openclaw sessions compact <key> --json`), run with
OPENCLAW_STATE_DIR set to occd's state dir, so the CLI reads the same openclaw.json (gateway.port,
gateway.auth.token); OPENCLAW_GATEWAY_PORT / OPENCLAW_GATEWAY_TOKEN from occd's environment are passed on (in the
environment, never on the command line). Each call costs 1.2–2.8 s, almost all of it CLI start-up.

Reply shapes seen on a running 2026.9.6 gateway (stdout, exit 0 unless noted):
- sessions.describe {"key"} → {"session": {"key", "sessionId", "kind", "displayName", "updatedAt",
  "lastInteractionAt", "inputTokens", "outputTokens", "totalTokens", "totalTokensFresh", "model",
  "modelProvider", "contextTokens", "contextBudgetStatus": {...}, "status": "done" (only once a gateway run
  finished), ...}}. No `sessionStartedAt`, no `lifecycleRevision`, and no `compactionCount` (not even after a
  compaction). An unknown key → {"session": null} (exit 0).
- chat.send {"sessionKey", "message", "deliver": false, "idempotencyKey"} → {"runId": <idempotencyKey>,
  "status": "started"}; the same idempotencyKey again → {"runId", "status": "ok"} (no second turn).
- chat.history {"sessionKey"} → {"sessionKey", "sessionId", "messages": [{"role", "content", "timestamp",
  "__openclaw": {"id", "seq", ...}, ...}]}.
- sessions.reset {"key", "expectedSessionId", "reason"} → {"ok": true, "key", "entry": {"sessionId" (unchanged),
  "lifecycleRevision", "sessionStartedAt", "updatedAt", "compactionCount": 0, "totalTokens": 0, ...},
  "resolved": {...}}. A wrong expectedSessionId → exit 1, {"ok": false, "error": {"type":
  "gateway_request_error", "code": "INVALID_REQUEST", "message": "Session agent:main:main changed before reset.
  Retry.", "details": {"reason": "session-changed"}, "retryable": false}}.
- `openclaw sessions compact <key> --json` → {"ok": true, "key", "compacted": true, "result": {"summary",
  "firstKeptEntryId", "tokensBefore", "details"}} (one model call).
- Gateway down → exit 1, {"ok": false, "error": {"type": "gateway_transport_error", "kind": "closed",
  "message": "Gateway not reachable at ws://127.0.0.1:<port> (ECONNREFUSED).", ...}}.
- Wrong token → exit 1, error.type "gateway_request_error", details.code "AUTH_TOKEN_MISMATCH".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

from occd.errors import BusyError, NotFoundError, OccdError

DOWN_MARKERS = ("econnrefused", "gateway not reachable", "gateway is not running", "gateway not running",
                "no gateway", "connect failed: connect")


def gateway_endpoint(state_dir: Path, env: Mapping[str, str] | None = None, config: dict | None = None) -> dict:
    """{port, token, url}: OPENCLAW_GATEWAY_PORT / OPENCLAW_GATEWAY_TOKEN, else openclaw.json gateway.port /
    gateway.auth.token, else port 18789 (OpenClaw's default) and no token."""
    from occd.openclaw.state import load_openclaw_config

    env = os.environ if env is None else env
    if config is None:
        try:
            config = load_openclaw_config(state_dir, env)
        except OccdError:
            config = {}
    gw = config.get("gateway") if isinstance(config.get("gateway"), dict) else {}
    port = None
    raw = (env.get("OPENCLAW_GATEWAY_PORT") or "").strip()
    if raw.isdigit():
        port = int(raw)
    elif ":" in raw and raw.rsplit(":", 1)[1].isdigit():
        port = int(raw.rsplit(":", 1)[1])
    if port is None and isinstance(gw.get("port"), int) and gw["port"] > 0:
        port = gw["port"]
    port = port or 18789
    auth = gw.get("auth") if isinstance(gw.get("auth"), dict) else {}
    token = (env.get("OPENCLAW_GATEWAY_TOKEN") or "").strip() or (auth.get("token") if isinstance(auth.get("token"), str) else None)
    return {"port": port, "token": token or None, "url": f"ws://127.0.0.1:{port}"}


def parse_json_output(out: str):
    """The JSON document in a CLI's stdout (log lines may come first)."""
    out = out.strip()
    if not out:
        return None
    try:
        return json.loads(out)
    except ValueError:
        pass
    for i, line in enumerate(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads("\n".join(out.splitlines()[i:]))
            except ValueError:
                continue
    return None


def error_from_reply(what: str, returncode: int, data, stderr: str, stdout: str) -> OccdError:
    """The OccdError for a failed CLI call: gateway down → BusyError; a refused reset → SESSION_CHANGED; a bad
    token → GATEWAY_AUTH; anything else → OPENCLAW_FAILED with OpenClaw's own message."""
    err = data.get("error") if isinstance(data, dict) and isinstance(data.get("error"), dict) else {}
    details = err.get("details") if isinstance(err.get("details"), dict) else {}
    msg = err.get("message") if isinstance(err.get("message"), str) else None
    if not msg:
        lines = [ln for ln in (stderr or stdout or "").strip().splitlines() if ln.strip()]
        msg = lines[-1] if lines else f"exit {returncode}"
    low = f"{msg}\n{stderr}".lower()
    if err.get("type") == "gateway_transport_error" or any(m in low for m in DOWN_MARKERS):
        return BusyError("The OpenClaw gateway is not running", "start it (`openclaw gateway`); occd waits and "
                         "retries", code="GATEWAY_DOWN", details={"openclaw": msg[:300]})
    if details.get("reason") == "session-changed":
        return OccdError(f"{what}: {msg[:300]}", "the session changed under occd; it is looked at again next cycle",
                         code="SESSION_CHANGED", details=details)
    if details.get("code") == "AUTH_TOKEN_MISMATCH" or "unauthorized" in low:
        return OccdError("The OpenClaw gateway refused occd's token", "set gateway.auth.token in openclaw.json or "
                         "OPENCLAW_GATEWAY_TOKEN for occd", code="GATEWAY_AUTH", details=details)
    return OccdError(f"{what} failed: {msg[:300]}", "see `occd service logs` and OpenClaw's own logs",
                     code="OPENCLAW_FAILED", details=details or None)


class Gateway:
    """One OpenClaw install and state dir. Methods return the parsed JSON reply or raise OccdError/BusyError."""

    def __init__(self, state_dir: Path, openclaw_bin: str | None = None, timeout: float = 120.0,
                 env: Mapping[str, str] | None = None):
        base = dict(os.environ if env is None else env)
        self.state_dir = Path(state_dir)
        self.bin = openclaw_bin or base.get("OCCD_OPENCLAW_BIN") or shutil.which("openclaw", path=base.get("PATH"))
        self.timeout = timeout
        self.env = base
        self.env["OPENCLAW_STATE_DIR"] = str(self.state_dir)
        self.env.setdefault("NO_COLOR", "1")
        self.env.setdefault("OPENCLAW_NO_UPDATE_CHECK", "1")
        self._cleared: set[str] = set()  # agents whose schema occd may act on (guard)

    def endpoint(self) -> dict:
        return gateway_endpoint(self.state_dir, self.env)

    def status(self) -> dict:
        from occd.openclaw.dbstore import gateway_status

        return gateway_status(self.state_dir)

    def _run(self, args: list[str], what: str, timeout: float | None = None) -> dict:
        if not self.bin:
            raise OccdError("The openclaw command is not on PATH", "install OpenClaw or set OCCD_OPENCLAW_BIN",
                            code="OPENCLAW_MISSING")
        timeout = self.timeout if timeout is None else timeout
        try:
            p = subprocess.run([self.bin, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise BusyError(f"{what} timed out after {timeout:.0f}s",
                            "the gateway may be busy; occd retries next cycle", code="GATEWAY_TIMEOUT") from None
        except OSError as e:
            raise OccdError(f"Cannot run {self.bin}: {e.strerror}", "check the OpenClaw install or OCCD_OPENCLAW_BIN",
                            code="OPENCLAW_MISSING") from None
        data = parse_json_output(p.stdout)
        if p.returncode != 0 or (isinstance(data, dict) and data.get("ok") is False):
            raise error_from_reply(what, p.returncode, data, p.stderr, p.stdout)
        if not isinstance(data, dict):
            raise OccdError(f"{what} gave no JSON reply", "check the OpenClaw version (occd was verified with "
                            "2026.9.6)", code="OPENCLAW_FAILED", details={"stdout": p.stdout[-300:]})
        return data

    def guard(self, key: str | None) -> None:
        """Refuse (SCHEMA_UNVERIFIED, before any CLI call) to act on an agent whose OpenClaw database occd reads
        but was not shown to understand (occd.openclaw.dbschema.ensure_actionable). The agent is the one the
        session key names (`agent:<id>:...`), else the default agent `main`. Checked once per agent and Gateway."""
        from occd.openclaw.dbschema import ensure_actionable

        parts = key.split(":") if isinstance(key, str) else []
        agent = parts[1] if len(parts) >= 3 and parts[0] == "agent" and parts[1] else "main"
        if agent not in self._cleared:
            ensure_actionable(self.state_dir, agent)
            self._cleared.add(agent)

    def call(self, method: str, params: dict, timeout: float | None = None) -> dict:
        self.guard(params.get("key") or params.get("sessionKey"))
        return self._run(["gateway", "call", method, "--params", json.dumps(params), "--json"],
                         f"openclaw gateway call {method}", timeout)

    def sessions_describe(self, key: str) -> dict:
        """The reply ({"session": {...}}); an unknown key → NotFoundError."""
        reply = self.call("sessions.describe", {"key": key})
        if reply.get("session") is None:
            raise NotFoundError(f"OpenClaw has no session '{key}'", "run `openclaw sessions list`",
                                code="SESSION_NOT_FOUND")
        return reply

    def sessions_reset(self, key: str, expected_session_id: str, reason: str = "reset") -> dict:
        """Reset in place (same session id; lifecycleRevision and sessionStartedAt change). A wrong
        expected_session_id → OccdError SESSION_CHANGED. Releases whose sessions.reset does not take
        expectedSessionId yet (2026.8.1 refuses it as an unexpected property; 9.5 and 9.6 take it): the id is
        checked with sessions.describe right before a reset without it (a window of one call)."""
        try:
            return self.call("sessions.reset", {"key": key, "expectedSessionId": expected_session_id,
                                                "reason": reason})
        except OccdError as e:
            if "expectedSessionId" not in e.message or "unexpected property" not in e.message:
                raise
        current = (self.sessions_describe(key).get("session") or {}).get("sessionId")
        if current != expected_session_id:
            raise OccdError(f"openclaw gateway call sessions.reset: {key} now holds session {current}",
                            "the session changed under occd; it is looked at again next cycle",
                            code="SESSION_CHANGED", details={"reason": "session-changed", "sessionId": current})
        return self.call("sessions.reset", {"key": key, "reason": reason})

    def chat_send(self, key: str, message: str, idempotency_key: str, deliver: bool = False) -> dict:
        """One model turn with `message` as a user message; the same idempotency key never starts a second one."""
        return self.call("chat.send", {"sessionKey": key, "message": message, "deliver": deliver,
                                       "idempotencyKey": idempotency_key})

    def chat_history(self, key: str) -> dict:
        """The session's messages. Refused (COLD_SESSION) for a cold session: `chat.history` restores a cold
        transcript (a write); occd reads cold archives itself (occd.openclaw.cold), never restoring them."""
        self.guard(key)
        from occd.openclaw.dbstore import DbStore
        from occd.openclaw.state import get_agent

        parts = key.split(":")
        agent = parts[1] if len(parts) >= 3 and parts[0] == "agent" else "main"
        try:
            a = get_agent(self.state_dir, agent)
        except OccdError:
            a = None
        if a is not None and a.era == "db":
            with DbStore(self.state_dir, agent, a.dir) as store:
                try:
                    info = store.resolve(key)
                except OccdError:
                    info = None
                if info is not None and store.is_cold(info):
                    raise OccdError(f"Session '{key}' is in cold storage: chat.history would restore it",
                                    "occd reads its archive instead; OpenClaw restores it on the session's next use",
                                    code="COLD_SESSION")
        return self.call("chat.history", {"sessionKey": key})

    def sessions_compact(self, key: str) -> dict:
        self.guard(key)
        return self._run(["sessions", "compact", key, "--json"], f"openclaw sessions compact {key}")
