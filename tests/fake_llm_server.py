"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks (no network).

    srv = FakeLLM(rules=[("webhook", 0.9)]).start()     # in-process, a thread
    srv.base_url  -> "http://127.0.0.1:<port>/v1"
    srv.script(["429", "ok"])                            # what the next requests get, in order
    srv.requests                                         # every request body received (parsed JSON)
    srv.stop()

    python tests/fake_llm_server.py --log FILE [--rules JSON]   # as a process: prints the base URL

Behaviours: ok (rates every "[i] ..." session line of the prompt with the first matching rule's value,
else `default`), slow:<seconds>, 500, 429 (with Retry-After: 0), malformed (not JSON), bad (rates index 99
and gives index 0 the relevance 7). Usage figures count prompt tokens with tiktoken (litellm's bundled
encodings) when available, else characters / 4.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.M)
_ENC = None


def _encoding():
    global _ENC
    if _ENC is None:
        _ENC = False
        try:
            import importlib.util

            spec = importlib.util.find_spec("litellm")
            if spec and spec.submodule_search_locations:
                d = os.path.join(list(spec.submodule_search_locations)[0], "litellm_core_utils", "tokenizers")
                os.environ.setdefault("TIKTOKEN_CACHE_DIR", d)
            import tiktoken

            for name in ("o200k_base", "cl100k_base"):
                try:
                    _ENC = tiktoken.get_encoding(name)
                    break
                except Exception:  # noqa: BLE001 - not bundled
                    continue
        except Exception:  # noqa: BLE001
            _ENC = False
    return _ENC


def count_tokens(text: str) -> int:
    enc = _encoding()
    return len(enc.encode(text)) if enc else (len(text) + 3) // 4


def prompt_text(body: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m, dict))


def session_lines(body: dict) -> list[tuple[int, str]]:
    return [(int(i), t) for i, t in _LINE.findall(prompt_text(body))]


class FakeLLM:
    def __init__(self, rules: list[tuple[str, float]] | None = None, default: float = 0.0, log: str | None = None):
        self.rules = list(rules or [])
        self.default = default
        self.log = log
        self.requests: list[dict] = []
        self.raw_bodies: list[bytes] = []
        self.behaviours: list[str] = []
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None

    # -- control --
    def script(self, behaviours: list[str]) -> "FakeLLM":
        with self.lock:
            self.behaviours = list(behaviours)
        return self

    def next_behaviour(self) -> str:
        with self.lock:
            return self.behaviours.pop(0) if self.behaviours else "ok"

    def rate(self, text: str) -> float:
        low = text.lower()
        for needle, value in self.rules:
            if needle.lower() in low:
                return value
        return self.default

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> "FakeLLM":
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, body: bytes, ctype="application/json", headers=None):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._send(200, b'{"data":[{"id":"fake-model","object":"model"}],"object":"list"}')

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with srv.lock:
                    srv.raw_bodies.append(raw)
                    srv.requests.append(body)
                    if srv.log:
                        with open(srv.log, "ab") as fh:
                            fh.write(raw.replace(b"\n", b" ") + b"\n")
                b = srv.next_behaviour()
                if b.startswith("slow:"):
                    time.sleep(float(b.split(":", 1)[1]))
                    b = "ok"
                if b == "500":
                    return self._send(500, b'{"error":{"message":"internal error","type":"server_error"}}')
                if b == "429":
                    return self._send(429, b'{"error":{"message":"rate limited","type":"rate_limit_error"}}',
                                      headers={"Retry-After": "0"})
                lines = session_lines(body)
                if b == "malformed":
                    content = "Sure! Here are the scores: session 0 looks related"
                elif b == "bad":
                    content = json.dumps({"scores": [{"index": 99, "relevance": 0.9}, {"index": 0, "relevance": 7}]})
                else:
                    content = json.dumps({"scores": [{"index": i, "relevance": srv.rate(t)} for i, t in lines]})
                pt = count_tokens(prompt_text(body))
                resp = {"id": f"chatcmpl-fake-{len(srv.requests)}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model") or "fake-model",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": pt, "completion_tokens": count_tokens(content),
                                  "total_tokens": pt + count_tokens(content)}}
                self._send(200, json.dumps(resp).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--rules", default="[]", help='JSON list of [substring, relevance]')
    ap.add_argument("--default", type=float, default=0.0)
    a = ap.parse_args(argv)
    srv = FakeLLM([tuple(r) for r in json.loads(a.rules)], a.default, a.log).start()
    _encoding()
    print(srv.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
