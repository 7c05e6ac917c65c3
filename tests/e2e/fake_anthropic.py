#!/usr/bin/env python3
"""A scripted Anthropic Messages API on 127.0.0.1, so the real Claude Code CLI runs offline with no login.

    FAKE_LOG=requests.jsonl python tests/e2e/fake_anthropic.py PORT

POST /v1/messages (streamed or not), POST /v1/messages/count_tokens; anything else answers {}. Every request is
appended to $FAKE_LOG. Its working directory is the one it names in tool calls when the request does not say.
What it answers, from the request:
- occd's relevance scorer ("Rate every session" with lines "[i] ..."): ratings, 0.9 for a session whose line
  mentions "subtract", else 0.0 (FAKE_RATING=zero: all 0.0), through the `json_tool_call` tool when offered;
- the newest user message carries a tool result: text quoting the start of the result, unless the turn was
  ordered with USE_OCCD / USE_PSTAT and occd's MCP tool was not called yet (then that call);
- trigger words in the user's text, when the request offers the tool: USE_BASH -> Bash (git status and log),
  USE_READ -> Read <cwd>/calc.py, USE_OCCD -> mcp__occd__openclaw_session_list {"repo": cwd} (USE_OCCD_TASK adds a
  task), USE_PSTAT -> mcp__occd__openclaw_project_status; an MCP tool not offered yet is first looked up with
  ToolSearch (Claude Code defers MCP tools); USE_SLEEP waits 25 s first (a run to catch while busy);
- a request without tools (titles, summaries): "Calculator work"; anything else a short greeting.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ.get("FAKE_LOG") or "anthropic-requests.jsonl"
RATING = os.environ.get("FAKE_RATING", "subtract")
TASK = "add a subtract function to the calculator"
SESSION_LIST, PROJECT_STATUS = "mcp__occd__openclaw_session_list", "mcp__occd__openclaw_project_status"
_lock = threading.Lock()
_count = [0]


def log(entry: dict) -> None:
    with _lock, open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def texts(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def last_text(content) -> str:
    """The last text block of a message (Claude Code puts reminders first, the user's words last)."""
    if isinstance(content, str):
        return content
    blocks = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    return blocks[-1].get("text") or "" if blocks else ""


def cwd_of(body: dict) -> str:
    found = re.search(r"[Ww]orking directory: ([^\\\n\"]+)",
                      json.dumps(body.get("system", "")) + json.dumps((body.get("messages") or [])[:2]))
    return found.group(1).strip() if found else os.getcwd()


def ratings(body: dict) -> dict | None:
    text = "\n".join(texts(m.get("content")) for m in body.get("messages") or [])
    if "Rate every session" not in text:
        return None
    return {"scores": [{"index": int(i), "relevance": 0.9 if RATING != "zero" and "subtract" in line.lower() else 0.0}
                       for i, line in re.findall(r"^\[(\d+)\] (.*)$", text, re.M)]}


def call(name: str, args: dict) -> tuple[list, str]:
    return [("tool_use", name, args)], "tool_use"


def after_result(body: dict, tools: set[str], result: dict) -> tuple[list, str]:
    messages = body.get("messages") or []
    order = ""
    for m in messages:
        if m.get("role") == "user" and any(w in last_text(m.get("content")) for w in ("USE_OCCD", "USE_PSTAT")):
            order = last_text(m.get("content"))
    sent = json.dumps(messages)
    cwd = cwd_of(body)
    if "USE_OCCD" in order and SESSION_LIST in tools and f'"name": "{SESSION_LIST}"' not in sent:
        return call(SESSION_LIST, {"repo": cwd, "limit": 5, **({"task": TASK} if "USE_OCCD_TASK" in order else {})})
    if "USE_PSTAT" in order and PROJECT_STATUS in tools and f'"name": "{PROJECT_STATUS}"' not in sent:
        return call(PROJECT_STATUS, {"path": cwd})
    out = result.get("content")
    out = out if isinstance(out, str) else texts(out)
    status = "error" if result.get("is_error") else "ok"
    return [("text", f"The tool returned ({status}, {len(out)} chars): {' '.join(out.split())[:300]}")], "end_turn"


def decide(body: dict) -> tuple[list, str]:
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    rated = ratings(body)
    if rated is not None:
        return call("json_tool_call", rated) if "json_tool_call" in tools else ([("text", json.dumps(rated))], "end_turn")
    user = next((m for m in reversed(body.get("messages") or []) if m.get("role") == "user"), None)
    if user is None:
        return [("text", "OK.")], "end_turn"
    content = user.get("content")
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []
    if results:
        return after_result(body, tools, results[-1])
    said, cwd = last_text(content), cwd_of(body)
    if "USE_SLEEP" in said and tools:
        time.sleep(25)
    for word, name in (("USE_OCCD", SESSION_LIST), ("USE_PSTAT", PROJECT_STATUS)):
        if word in said and name not in tools and "ToolSearch" in tools:
            return call("ToolSearch", {"query": "select:" + name, "max_results": 5})
    if "USE_BASH" in said and "Bash" in tools:
        return [("text", "Let me check the repository."),
                ("tool_use", "Bash", {"command": "git status --short && git log --oneline -1",
                                      "description": "Show git status"})], "tool_use"
    if "USE_READ" in said and "Read" in tools:
        return call("Read", {"file_path": os.path.join(cwd, "calc.py")})
    if "USE_OCCD" in said and SESSION_LIST in tools:
        return call(SESSION_LIST, {"repo": cwd, **({"task": TASK} if "USE_OCCD_TASK" in said else {}), "limit": 5})
    if "USE_PSTAT" in said and PROJECT_STATUS in tools:
        return call(PROJECT_STATUS, {"path": cwd})
    if not tools:
        return [("text", "Calculator work")], "end_turn"
    return [("text", f"Hello from the fake API. You said: {' '.join(said.split())[:80]}")], "end_turn"


def blocks(plan: list) -> list[dict]:
    return [{"type": "text", "text": b[1]} if b[0] == "text" else
            {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": b[1], "input": b[2]} for b in plan]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, obj, code: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("request-id", "req_fake")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        log({"t": time.time(), "method": "GET", "path": self.path, "ua": self.headers.get("user-agent")})
        if self.path.startswith("/v1/models"):
            return self.send_json({"data": [], "has_more": False, "first_id": None, "last_id": None})
        self.send_json({})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw[:2000].decode("utf-8", "replace")}
        with _lock:
            _count[0] += 1
            n = _count[0]
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in ("user-agent", "anthropic-version", "anthropic-beta", "x-app")}
        log({"t": time.time(), "n": n, "method": "POST", "path": self.path, "headers": headers, "body": body})
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.send_json({"input_tokens": 1234})
        if not path.endswith("/v1/messages"):
            return self.send_json({})
        plan, stop = decide(body)
        content = blocks(plan)
        usage = {"input_tokens": 1500 + n, "output_tokens": 20, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        message = {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                   "model": body.get("model") or "claude-sonnet-fake", "content": content, "stop_reason": stop,
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return self.send_json(message)
        self.stream(message)

    def stream(self, message: dict) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_fake")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(kind: str, **data) -> None:
            self.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
            self.wfile.flush()

        start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
        event("message_start", message=start)
        event("ping")
        for i, b in enumerate(message["content"]):
            if b["type"] == "text":
                event("content_block_start", index=i, content_block={"type": "text", "text": ""})
                for j in range(0, len(b["text"]), 40):
                    event("content_block_delta", index=i, delta={"type": "text_delta", "text": b["text"][j:j + 40]})
            else:
                event("content_block_start", index=i, content_block={**b, "input": {}})
                args = json.dumps(b["input"])
                for j in range(0, len(args), 30):
                    event("content_block_delta", index=i, delta={"type": "input_json_delta",
                                                                 "partial_json": args[j:j + 30]})
            event("content_block_stop", index=i)
        event("message_delta", delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
              usage={"output_tokens": 20})
        event("message_stop")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 18765), Handler).serve_forever()
