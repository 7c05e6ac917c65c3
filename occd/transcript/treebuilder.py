"""Hand-built OpenClaw transcripts for tests: `TreeBuilder` appends entries one by one (each returns its id),
moves the leaf to make branches, then writes the file. Same shapes and key order as `synth.generate_transcript`
(whose id/time generator it shares)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from occd.transcript.synth import _MODEL, DEFAULT_CWD, DEFAULT_START, _Gen, _iso


class TreeBuilder:
    """Hand-built transcripts for tests: append entries explicitly (each returns its id), move the leaf to
    branch, then `write(path)`. Shapes as the writer makes them; `extra` adds unknown fields."""

    def __init__(self, session_id: str = "01a0f67a-3800-7000-8000-000000000001", *, version: int = 3,
                 seed: int = 7):
        self.g = _Gen(seed, DEFAULT_START, version)
        self.header = {"type": "session", "version": version, "id": session_id, "timestamp": _iso(DEFAULT_START),
                       "cwd": DEFAULT_CWD}
        self.lines: list[dict | bytes] = []
        self.leaf: str | None = None
        self.calls = 0

    def add(self, etype: str, fields: dict | None = None, *, parent: str | None | bool = False,
            eid: str | None = None, extra: dict | None = None) -> str:
        eid = eid or self.g.new_id()
        obj = {"type": etype, "id": eid, "parentId": self.leaf if parent is False else parent,
               "timestamp": self.g.now_iso()}
        obj.update(fields or {})
        obj.update(extra or {})
        self.lines.append(obj)
        self.leaf = eid
        return eid

    def raw(self, data: bytes) -> None:
        """A raw line (without newline), e.g. a malformed one."""
        self.lines.append(data)

    def model(self) -> str:
        return self.add("model_change", {"provider": "anthropic", "modelId": "claude-opus-4-6"})

    def user(self, text: str = "hello", *, images: int = 0, **kw) -> str:
        content: object = text
        if images:
            content = [{"type": "text", "text": text}] + [
                {"type": "image", "data": self.g.b64(10), "mimeType": "image/png"} for _ in range(images)]
        return self.add("message", {"message": {"role": "user", "content": content, "timestamp": self.g.tick()}}, **kw)

    def assistant(self, text: str | None = "ok", *, calls: list | int = 0, thinking: bool = False,
                  stop: str | None = None, usage: int | None = 1000, **kw) -> tuple[str, list[str]]:
        blocks: list[dict] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": self.g.sentence(8), "thinkingSignature": self.g.b64(8)})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        ids = []
        specs = [None] * calls if isinstance(calls, int) else calls
        for args in specs:
            self.calls += 1
            cid = f"toolu_{self.calls:04d}"
            ids.append(cid)
            blocks.append({"type": "toolCall", "id": cid, "name": "exec",
                           "arguments": args if args is not None else {"command": self.g.sentence(40)}})
        msg = {"role": "assistant", "content": blocks, **_MODEL}
        if usage is not None:
            msg["usage"] = {"input": usage, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": usage + 10}
        msg["stopReason"] = stop or ("toolUse" if ids else "stop")
        msg["timestamp"] = self.g.tick()
        return self.add("message", {"message": msg}, **kw), ids

    ZERO_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}

    def mirror(self, text: str = "delivered", *, model: str = "delivery-mirror", **kw) -> str:
        """A reply OpenClaw copies into the transcript when it delivers to a channel (or injects through the
        gateway): provider "openclaw", all-zero usage. Not a measurement of the context."""
        msg = {"role": "assistant", "content": [{"type": "text", "text": text}], "usage": dict(self.ZERO_USAGE),
               "api": "openai-responses", "provider": "openclaw", "model": model, "stopReason": "stop",
               "timestamp": self.g.tick()}
        return self.add("message", {"message": msg}, **kw)

    def overflow_notice(self, **kw) -> str:
        """OpenClaw's reply when the prompt does not fit any more (api "cli", the session's model, zero usage)."""
        text = ("Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session, "
                "or use a larger-context model.")
        msg = {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "cli",
               "provider": "anthropic", "model": "claude-opus-4-6", "usage": dict(self.ZERO_USAGE),
               "stopReason": "stop", "timestamp": self.g.tick()}
        return self.add("message", {"message": msg}, **kw)

    def result(self, call_id: str, text: str | None = None, *, images: int = 0, **kw) -> str:
        content = [{"type": "text", "text": text if text is not None else self.g.para(5, 10)}]
        content += [{"type": "image", "data": self.g.b64(10), "mimeType": "image/png"} for _ in range(images)]
        return self.add("message", {"message": {"role": "toolResult", "toolCallId": call_id, "toolName": "exec",
                                                "content": content, "isError": False,
                                                "timestamp": self.g.tick()}}, **kw)

    def tool_turn(self, text: str = "do it", *, calls: int = 1, thinking: bool = False) -> dict:
        """user → assistant(calls) → results → assistant(final). Returns the ids."""
        u = self.user(text)
        a, cids = self.assistant(f"running {calls}", calls=calls, thinking=thinking)
        rs = [self.result(c) for c in cids]
        f, _ = self.assistant(f"done: {text}", thinking=thinking)
        return {"user": u, "call_msg": a, "calls": cids, "results": rs, "final": f}

    def compaction(self, first_kept: str, **kw) -> str:
        return self.add("compaction", {"summary": "## Summary\n" + self.g.sentence(10), "firstKeptEntryId": first_kept,
                                       "tokensBefore": 5000}, **kw)

    def label(self, target: str, label: str = "bookmark", **kw) -> str:
        return self.add("label", {"targetId": target, "label": label}, **kw)

    def branch_summary(self, from_id: str, **kw) -> str:
        """branchWithSummary(from_id): a branch_summary child of from_id; the leaf moves there."""
        return self.add("branch_summary", {"fromId": from_id, "summary": "Abandoned: " + self.g.sentence(5)},
                        parent=from_id, **kw)

    def to_bytes(self) -> bytes:
        out = [orjson.dumps(self.header)]
        for x in self.lines:
            out.append(x if isinstance(x, bytes) else orjson.dumps(x))
        return b"\n".join(out) + b"\n"

    def write(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        p.write_bytes(self.to_bytes())
        return p
