"""Reading what a rotation carries over from the old transcript, and writing the new one.

The new transcript is in OpenClaw's current file format (v3). The seed is a user message (memory, notes and the
rotation note: user messages reach the model) answered by an assistant message, then the last exchanges as real
user/assistant turns, text only. It ends with an assistant message: OpenClaw's writer does not append to a file
that has none yet, and would later write every entry again (duplicate ids). The last assistant message carries
occd's chars/4 estimate of the seed as its usage (cost 0), so context measures (OpenClaw's and occd's) start from
a realistic figure, not from 0; the next real reply replaces it with the provider's own count.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

import orjson

from occd.rotation.seed import ACK, Seed


def _read_entry(fh, e) -> dict:
    fh.seek(e.offset)
    return orjson.loads(fh.read(e.length))


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(b.get("text"), str))


def read_old(source: Path | bytes, n: int = 5) -> dict:
    """What a rotation carries over from the old transcript (a file, or the bytes of a database-era
    transcript): the last n exchanges of the active path as (user text, assistant text) — text only, no tool
    calls, no thinking, no failed replies — the header, the model of the last good reply, and the number of
    compactions on the path."""
    import io

    from occd.transcript.scan import scan_stream

    fh = open(source, "rb") if isinstance(source, (str, Path)) else io.BytesIO(source)
    with fh:
        t = scan_stream(fh, path=Path(source) if isinstance(source, (str, Path)) else None)
        path_entries = t.active_path()
        turns = t.turns(path_entries)
        out = {"header": t.header or {}, "exchanges": [], "model": None, "compactions": 0}
        for e in reversed(path_entries):
            if e.type == "message" and e.role == "assistant":
                m = _read_entry(fh, e).get("message", {})
                if m.get("stopReason") not in ("error", "aborted"):
                    out["model"] = {k: m.get(k) for k in ("api", "provider", "model") if m.get(k)}
                    break
        out["compactions"] = sum(1 for e in path_entries if e.type == "compaction")
        from occd.transcript import tool_pairing

        out["openCall"] = bool(tool_pairing(t)[1])  # a tool call still waiting for its result: mid-run
        for turn in turns[-n:]:
            entries = path_entries[turn.start: turn.end + 1]
            user = _text(_read_entry(fh, entries[0]).get("message", {}).get("content"))
            answer = []
            for e in entries[1:]:
                if e.type == "message" and e.role == "assistant" and e.has_text:
                    m = _read_entry(fh, e).get("message", {})
                    if m.get("stopReason") not in ("error", "aborted"):
                        answer.append(_text(m.get("content")))
            a = "\n".join(x for x in answer if x.strip())
            if user.strip() and a.strip():
                out["exchanges"].append((user, a))
    return out


def _iso(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def seed_lines(new_id: str, seed: Seed, *, cwd: str | None, parent_session: str | None, model: dict | None,
               now: datetime, include_memory: bool = True) -> list[bytes]:
    model = model or {}
    ms = int(now.timestamp() * 1000)
    header = {"type": "session", "version": 3, "id": new_id, "timestamp": _iso(now), "cwd": cwd or os.getcwd()}
    if parent_session:
        header["parentSession"] = parent_session
    lines = [header]
    used: set[str] = set()
    parent = None

    def add(obj: dict) -> None:
        nonlocal parent
        eid = secrets.token_hex(4)
        while eid in used:
            eid = secrets.token_hex(4)
        used.add(eid)
        lines.append({"type": obj.pop("type"), "id": eid, "parentId": parent, "timestamp": _iso(now), **obj})
        parent = eid

    if model.get("provider") and model.get("model"):
        add({"type": "model_change", "provider": model["provider"], "modelId": model["model"]})
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}

    def assistant(text: str, usage: dict = zero) -> dict:
        return {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                                               **{k: v for k, v in model.items() if v}, "usage": usage,
                                               "stopReason": "stop", "timestamp": ms}}

    estimate = {**zero, "input": seed.tokens(include_memory), "totalTokens": seed.tokens(include_memory)}

    add({"type": "message", "message": {"role": "user", "content": seed.context_text(include_memory), "timestamp": ms}})
    add(assistant(ACK, zero if seed.exchanges else estimate))
    for i, (u, a) in enumerate(seed.exchanges):
        add({"type": "message", "message": {"role": "user", "content": u, "timestamp": ms}})
        add(assistant(a, estimate if i == len(seed.exchanges) - 1 else zero))
    return [orjson.dumps(x) + b"\n" for x in lines]


def write_new_session(path: Path, lines: list[bytes], mode: int = 0o644) -> None:
    from occd.transcript import atomic_write

    if path.exists():
        path.unlink()  # only ever a leftover of this same rotation (the id is new)

    def write(fh):
        for line in lines:
            fh.write(line)

    atomic_write(path, write, mode=mode)
