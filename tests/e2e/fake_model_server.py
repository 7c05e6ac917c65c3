#!/usr/bin/env python3
"""A scripted OpenAI-compatible model on 127.0.0.1, so a real OpenClaw runs agent turns offline, with no key.

    python tests/e2e/fake_model_server.py PORT LOGFILE

Serves GET /v1/models, POST /v1/chat/completions and /v1/responses (streamed or not). What it answers:
- the user's message of this turn says `READ <path>` within its first six words (after OpenClaw's "[timestamp]"
  envelope; OpenClaw's own context blocks, sent as separate user messages by 2026.9.6, are passed over; a READ
  quoted deep inside a message is no order) and the request offers a tool named `read`: a call `read {"path"}`;
  `READ a,b,c` reads each file in turn in the same agent run (one call per request), then answers with text;
- anything else: text that quotes the user's first eight words and says how many messages it was sent
  ("Reply to: ... | messages sent: N"), so a test sees what history the agent really sent.
Every request body is appended to LOGFILE as one JSON line ({"path", "t", "body"}). Usage reported: 40 prompt
tokens per message, or with FAKE_USAGE=size the request's messages and tool definitions in characters / 4 (context
figures and compaction then grow as with a real model).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT"
ENVELOPE = re.compile(r"^\s*\[[^\]]*\]\s*")          # OpenClaw's "[Mon 2026-11-27 18:00 UTC]" before a message
READ_ORDER = re.compile(r"\s*(?:\S+\s+){0,5}?READ (\S+)")


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def said(m: dict) -> str:
    """A user message's text without OpenClaw's timestamp envelope."""
    return ENVELOPE.sub("", text_of(m.get("content")))


def is_internal(m: dict) -> bool:
    """OpenClaw's own context block, sent as a user message (2026.9.6, also between a result and the next request)."""
    return m.get("role") == "user" and said(m).lstrip().startswith(INTERNAL)


def is_result(m: dict) -> bool:
    return m.get("role") == "tool" or m.get("type") == "function_call_output"


def is_model_turn(m: dict) -> bool:
    return m.get("role") in ("assistant", "tool") or m.get("type") in ("function_call", "function_call_output")


def read_order(messages: list[dict], *, within_turn: bool) -> tuple[list[str], int] | None:
    """The `READ a,b,c` the user gave this turn: (the paths, how many tool results came back since). With
    within_turn=False the order counts only when the model has not spoken since (a fresh request of the user)."""
    results = 0
    for m in reversed(messages):
        if is_result(m):
            results += 1
            if not within_turn:
                return None
        elif m.get("role") == "user":
            if is_internal(m):
                continue
            hit = READ_ORDER.match(said(m))
            if hit:
                return hit.group(1).split(","), results
            if within_turn:
                return None
        elif not within_turn and is_model_turn(m):
            return None
    return None


def decide(messages: list[dict], tools: set[str]) -> tuple[str, object]:
    """("tool", {"name", "args"}) or ("text", reply)."""
    last = next((m for m in reversed(messages) if not is_internal(m)), {})
    if is_result(last):
        order = read_order(messages, within_turn=True)
        if order and order[1] < len(order[0]) and "read" in tools:
            return "tool", {"name": "read", "args": {"path": order[0][order[1]]}}
        return "text", f"Done reading. I was sent {len(messages)} messages."
    order = read_order(messages, within_turn=False)
    if order and "read" in tools:
        return "tool", {"name": "read", "args": {"path": order[0][0]}}
    users = [m for m in messages if m.get("role") == "user"]
    first_words = " ".join(text_of(users[-1].get("content")).split()[:8]) if users else ""
    return "text", f"Reply to: {first_words} | messages sent: {len(messages)}"


def prompt_tokens(messages, tools=None) -> int:
    if os.environ.get("FAKE_USAGE") == "size":
        return len(json.dumps(messages)) // 4 + len(json.dumps(tools or [])) // 4
    return 40 * len(messages)


def new_id(prefix: str, n: int = 12) -> str:
    return prefix + uuid.uuid4().hex[:n]


def chat_completion(body: dict) -> tuple[dict, list[dict]]:
    """The non-streamed answer, and the chunks of the streamed one."""
    messages = body.get("messages") or []
    tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
    kind, what = decide(messages, tools)
    prompt = prompt_tokens(messages, body.get("tools"))
    usage = {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}
    if kind == "tool":
        call = {"index": 0, "id": new_id("call_", 10), "type": "function",
                "function": {"name": what["name"], "arguments": json.dumps(what["args"])}}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        delta = {"role": "assistant", "tool_calls": [call]}
    else:
        message, finish = {"role": "assistant", "content": what}, "stop"
        delta = dict(message)
    head = {"id": new_id("chatcmpl-"), "created": int(time.time()), "model": body.get("model", "fake-model")}
    whole = {**head, "object": "chat.completion", "choices": [{"index": 0, "message": message,
                                                               "finish_reason": finish}], "usage": usage}
    chunk = {**head, "object": "chat.completion.chunk"}
    chunks = [{**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}]
    return whole, chunks


def response(body: dict) -> dict:
    """The Responses API's answer (one output item)."""
    items = body.get("input") or []
    items = items if isinstance(items, list) else [{"role": "user", "content": items}]
    kind, what = decide(items, {t.get("name") for t in body.get("tools") or []})
    if kind == "tool":
        item = {"type": "function_call", "id": new_id("fc_", 10), "call_id": new_id("call_", 10),
                "name": what["name"], "arguments": json.dumps(what["args"]), "status": "completed"}
    else:
        item = {"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": what, "annotations": []}]}
    prompt = prompt_tokens(items, body.get("tools")) if os.environ.get("FAKE_USAGE") == "size" else 40
    return {"id": new_id("resp_"), "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": body.get("model", "fake-model"), "output": [item],
            "usage": {"input_tokens": prompt, "output_tokens": 7, "total_tokens": prompt + 7}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_file = None

    def log_message(self, *args):
        pass

    def send_json(self, obj, code: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list[tuple[str | None, object]]) -> None:
        """Server-sent events, then the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            self.wfile.write(((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode())
            self.wfile.flush()

    def do_GET(self):
        self.send_json({"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.log_file.write(json.dumps({"path": self.path, "t": round(time.time(), 3), "body": body}) + "\n")
        self.log_file.flush()
        if self.path.endswith("/chat/completions"):
            whole, chunks = chat_completion(body)
            if body.get("stream"):
                return self.send_events([(None, c) for c in chunks] + [(None, "[DONE]")])
            return self.send_json(whole)
        if self.path.endswith("/responses"):
            resp = response(body)
            if not body.get("stream"):
                return self.send_json(resp)
            item = resp["output"][0]
            steps = [("response.created", {"response": {**resp, "status": "in_progress", "output": []}}),
                     ("response.output_item.added", {"output_index": 0, "item": item}),
                     ("response.output_item.done", {"output_index": 0, "item": item}),
                     ("response.completed", {"response": resp})]
            return self.send_events([(kind, {"type": kind, "sequence_number": n, **kw})
                                     for n, (kind, kw) in enumerate(steps)])
        self.send_json({"error": {"message": "not found"}}, 404)


def main(argv: list[str]) -> None:
    port = int(argv[0]) if argv else 18555
    Handler.log_file = open(argv[1] if len(argv) > 1 else "fake_model_requests.jsonl", "a")
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
