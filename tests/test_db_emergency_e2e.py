"""The database era's emergencies against a real OpenClaw 2026.9.6 (offline): a session OpenClaw has blocked
("Context overflow: prompt too large for the model. Try /reset (or /new)") is found from the read-only database
and rotated by one daemon cycle in act mode (`occd run --once --act`: sessions.reset + a seed through the
gateway, never a compaction); the next real turn reaches the model, and its request holds the seed, not the old
history.

The model here is the project's scripted one behind a small proxy that behaves like a real provider with a
context limit: a request larger than LIMIT tokens (characters / 4, as the scripted model counts with
FAKE_USAGE=size) is refused with OpenAI's `context_length_exceeded` error. OpenClaw's configured window is larger
than that limit (a model entry that promises more than the provider takes), so OpenClaw's own budget does not
save it: a long paste ends with OpenClaw's overflow notice, and every later turn carries the paste again."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, free_port, message_text, releases, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
RELEASE = "2026.9.6"
WINDOW = 64_000          # what openclaw.json promises (OpenClaw 9.6's budget: 64,000 - 16,000 = 48,000)
LIMIT = 30_000           # what the "provider" takes
KNOBS = {"OCCD_IDLE_SECONDS": "1", "OCCD_POLICY__MIN_IDLE_MINUTES": "0"}
OVERFLOW = "Context overflow"


class LimitedModel:
    """A proxy in front of the scripted model: requests over LIMIT tokens get HTTP 400 context_length_exceeded."""

    def __init__(self, upstream_port: int):
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self.refused = 0
        proxy = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code: int, ctype: str, body: bytes):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, method: str, body: bytes | None):
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method=method,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        self._send(r.status, r.headers.get("Content-Type", "application/json"), r.read())
                except urllib.error.HTTPError as e:
                    self._send(e.code, "application/json", e.read())

            def do_GET(self):
                self._forward("GET", None)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    req = json.loads(body)
                except ValueError:
                    req = {}
                msgs = req.get("messages", req.get("input", []))
                n = len(json.dumps(msgs)) // 4 + len(json.dumps(req.get("tools") or [])) // 4
                if n > LIMIT:
                    proxy.refused += 1
                    err = {"error": {"message": f"This model's maximum context length is {LIMIT} tokens. However, "
                                                f"your messages resulted in {n} tokens. Please reduce the length of "
                                                "the messages.", "type": "invalid_request_error",
                                     "param": "messages", "code": "context_length_exceeded"}}
                    self._send(400, "application/json", json.dumps(err).encode())
                    return
                self._forward("POST", body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _dry(a: dict) -> bool:
    return bool(a.get("dryRun") or a.get("dry_run"))


def _history(oc) -> list[dict]:
    out = json.loads(_occd(oc, "history", "--json").stdout)
    return out if isinstance(out, list) else out.get("actions", out.get("data", []))


def _occd(oc, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True,
                          env={**oc.env, **KNOBS}, timeout=timeout)


@pytest.mark.skipif(RELEASE not in releases("db"), reason=f"OCCD_E2E_RELEASES does not choose {RELEASE}")
def test_blocked_db_session_is_rotated_by_one_act_cycle(tmp_path, monkeypatch):
    require_e2e()
    from test_rotation_e2e import Gateway

    monkeypatch.setenv("FAKE_USAGE", "size")
    oc = OpenClawHome(RELEASE, tmp_path)
    oc.__enter__()
    model = LimitedModel(oc.port)
    gw = None
    try:
        cfg_path = Path(oc.env["OPENCLAW_CONFIG_PATH"])
        cfg = cfg_path.read_text().replace('"contextWindow": 128000', f'"contextWindow": {WINDOW}')
        cfg_path.write_text(cfg.replace(f"127.0.0.1:{oc.port}/v1", f"127.0.0.1:{model.port}/v1"))
        assert f":{model.port}/v1" in cfg_path.read_text()
        oc.turn("plain question oldturn1")
        # occd sees the session before it is blocked: it acts only on sessions it saw run (policy.act_on_unseen off)
        r = _occd(oc, "run", "--once")
        assert r.returncode == 0, r.stderr
        log = "here is my build log oldpaste: " + " ".join(f"line{i} error warning retry" for i in range(4000))  # < 128 KB: one argv string
        # OpenClaw's answer to the paste: its overflow notice, after its own recovery (compaction) failed
        # ("livenessState=blocked suggestedAction=reset_or_new" in its log; the CLI exits non-zero)
        p = oc.openclaw("agent", "--local", "--agent", "main", "--message", log, "--json")
        assert p.returncode != 0 and OVERFLOW in p.stdout + p.stderr, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
        assert "livenessState=blocked" in p.stdout + p.stderr
        assert model.refused >= 1
        from occd.openclaw import open_store

        store = open_store(oc.state_dir, "main")
        info = store.sessions()[0]
        sig = store.signals(info)
        store.close()
        assert sig["blocked"], sig  # what occd reads from the database (read-only)

        gw = Gateway(oc, free_port())
        gw.wait_ready()
        n = len(oc.requests())
        # observe mode: the ledger says what would be done, nothing is done
        r = _occd(oc, "run", "--once")
        assert r.returncode == 0, r.stderr
        rows = _history(oc)
        would = [a for a in rows if a["kind"] == "rotate" and _dry(a)]
        assert would and (would[0].get("before") or {}).get("emergency") == "BLOCKED", json.dumps(rows)[:3000]
        assert len(oc.requests()) == n
        # act mode: one cycle rotates it (reset + seed through the gateway), no compaction
        r = _occd(oc, "run", "--once", "--act")
        assert r.returncode == 0, r.stderr
        rows = _history(oc)
        acted = [a for a in rows if a["kind"] == "rotate" and a.get("outcome") == "ok" and not _dry(a)
                 and a.get("policy") == "emergency:blocked"]
        assert acted, json.dumps(rows)[:3000]
        assert not [a for a in rows if a["kind"] == "compact"], "never a compaction in an emergency"
        st = json.loads(_occd(oc, "status", "--json").stdout)
        assert [e["kind"] for e in st["agents"][0]["emergencies"]] == ["BLOCKED"], st["agents"][0]
        # the next real turn reaches the model; its request holds the seed, not the old history
        p = oc.openclaw("agent", "--agent", "main", "--message", "final question omega", "--json", timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        assert OVERFLOW not in p.stdout, p.stdout[-2000:]
        sent = oc.requests()[-1]["body"]["messages"]
        users = [message_text(m) for m in sent if m.get("role") == "user"]
        seeds = [u for u in users if "[occd] This session continues session" in u]
        assert len(seeds) == 1 and "oldturn1" in seeds[0], users
        assert any("final question omega" in u for u in users[-2:])
        assert not any(("oldturn1" in u or "oldpaste" in u) and "[occd]" not in u for u in users)
        # ... and OpenClaw did not have to compact (its own recovery would have summarised the history away)
        after = open_store(oc.state_dir, "main")
        assert (after.sessions()[0].compaction_count or 0) == 0
        after.close()
    finally:
        if gw is not None:
            gw.stop()
        model.close()
        oc.close()
