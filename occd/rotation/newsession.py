"""Reading what a rotation carries over from the old transcript, and writing the new one.

The new transcript is in OpenClaw's current file format (v3). The seed is one user message (the rotation note,
memory, notes and the last exchanges as quoted history said to be finished — never as real user/assistant turns,
so no old request reads as a new order; `Seed.history_text`, shared with the database era) answered by one
assistant message. It ends with an assistant message: OpenClaw's writer does not append to a file
that has none yet, and would later write every entry again (duplicate ids). No model call made the seed's
assistant message: its usage is occd's estimate of the seed; the next real reply brings the provider's own count.

Reading the old transcript costs only its tail: the exchanges are found by walking parent ids back from the
leaf (the last entry) through a window at the end of the file that grows until it holds the last exchanges or
the whole file. A 50 MB transcript is not parsed to rotate it.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timezone
from pathlib import Path


from occd.rotation.seed import ACK, Seed, is_seed_text
from occd.transcript.jsonl import iter_objects
from occd.transcript import jsontext


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(b.get("text"), str))


TAIL_WINDOW = 1 << 20


def _tail(source, size: int, window: int) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        return bytes(source[max(0, size - window):])
    from occd.transcript.scan import open_transcript

    with open_transcript(source) as fh:  # never blocks: a FIFO or device is refused
        fh.seek(max(0, size - window))
        return fh.read()


def _first_line(source) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        i = source.find(b"\n", 0, 1 << 20)
        return bytes(source[: i if i >= 0 else 1 << 20])
    from occd.transcript.scan import open_transcript

    with open_transcript(source) as fh:
        return fh.readline(1 << 20)


def read_old(source: Path | bytes, n: int = 5) -> dict:
    """What a rotation carries over from the old transcript (a file, or the bytes of a database-era
    transcript): the last n exchanges of the active path as (user text, assistant text) — text only, no tool
    calls, no thinking, no failed replies — the header, the model of the last good reply, the compactions seen
    on the path, and whether a tool call is still waiting for its result (a run in progress)."""
    size = len(source) if isinstance(source, (bytes, bytearray)) else os.stat(source).st_size
    try:
        header = jsontext.loads(_first_line(source))
    except ValueError:
        header = {}
    header = header if isinstance(header, dict) and header.get("type") == "session" else {}
    window = TAIL_WINDOW
    while True:
        data = _tail(source, size, window)
        whole = window >= size
        raw = data.split(b"\n")
        if not whole:
            raw = raw[1:]  # the first piece may be the end of a longer line
        entries = [o for o in iter_objects(raw) if o.get("type") != "session" and isinstance(o.get("id"), str)]
        by_id = {e["id"]: e for e in entries}
        chain = []
        e = entries[-1] if entries else None
        seen = set()
        while e is not None and e["id"] not in seen:
            seen.add(e["id"])
            chain.append(e)
            e = by_id.get(e.get("parentId"))
        reached_root = not chain or chain[-1].get("parentId") is None
        chain.reverse()
        out = _carry_over(header, chain, n)
        if whole or reached_root or len(out["exchanges"]) >= n:
            return out
        window *= 4


def openclaw_notice(m: dict) -> bool:
    """An assistant message OpenClaw wrote itself, not the model: its overflow notice ("Context overflow: prompt
    too large for the model. Try /reset ..."), a refusal to compact, or another error reply of its own — all-zero
    usage with api "cli", or all-zero usage and an overflow/refusal text. Never quoted as a reply in a seed."""
    from occd.policy.emergency import OVERFLOW_MARKERS, REFUSAL_MARKERS
    from occd.transcript.entries import _usage_tokens

    u = m.get("usage")
    if isinstance(u, dict) and _usage_tokens(u) is not None:
        return False  # a model's reply: real usage
    if m.get("api") == "cli":
        return True
    text = _text(m.get("content")).lower()
    return any(k.lower() in text for k in OVERFLOW_MARKERS + REFUSAL_MARKERS)


def _carry_over(header: dict, chain: list[dict], n: int) -> dict:
    out = {"header": header, "exchanges": [], "model": None, "compactions": 0, "openCall": False}
    turns: list[list[dict]] = []
    open_calls: set = set()
    for e in chain:
        if e.get("type") == "compaction":
            out["compactions"] += 1
        if e.get("type") != "message":
            continue
        m = e.get("message") or {}
        role = m.get("role")
        if role == "user":
            turns.append([m])
        elif turns:
            turns[-1].append(m)
        if role == "assistant":
            for b in m.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("id"):
                    open_calls.add(b["id"])
            if m.get("stopReason") not in ("error", "aborted"):
                out["model"] = {k: m.get(k) for k in ("api", "provider", "model") if m.get(k)}
        elif role == "toolResult":
            open_calls.discard(m.get("toolCallId"))
    out["openCall"] = bool(open_calls)
    for turn in turns:
        user = _text(turn[0].get("content"))
        if is_seed_text(user):  # an earlier rotation's seed and its reply: not an exchange (no nested seeds)
            continue
        answer = [_text(m.get("content")) for m in turn[1:] if m.get("role") == "assistant"
                  and m.get("stopReason") not in ("error", "aborted") and not openclaw_notice(m)]
        a = "\n".join(x for x in answer if x.strip())
        if user.strip() and a.strip():
            out["exchanges"].append((user, a))
    out["exchanges"] = out["exchanges"][-n:]  # the last n exchanges that have text on both sides
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

    text = seed.file_text() if include_memory else seed.message_text()
    add({"type": "message", "message": {"role": "user", "content": text, "timestamp": ms}})
    add(assistant(ACK, estimate))
    return [jsontext.dumps(x) + b"\n" for x in lines]  # a lone surrogate quoted from the old session stays an escape


def write_new_session(path: Path, lines: list[bytes], mode: int = 0o644) -> None:
    from occd.transcript import atomic_write

    if path.exists():
        path.unlink()  # only ever a leftover of this same rotation (the id is new)

    def write(fh):
        for line in lines:
            fh.write(line)

    atomic_write(path, write, mode=mode)
