"""Deterministic generator of realistic OpenClaw session transcripts (for tests, the demo and benchmarks).

The output has exactly the shapes OpenClaw's writer (`@mariozechner/pi-coding-agent` SessionManager, the same
code as tests/oracle/make-session.mjs) produces: the header, `model_change`, `thinking_level_change`,
user / assistant / toolResult messages with usage, `toolCall` blocks, signed thinking blocks, compactions with
`firstKeptEntryId`, a second branch with a `branch_summary`, labels, `custom` / `custom_message` /
`session_info` entries, images, aborted replies, an unanswered call at the end, and very large tool results.
Key order of every entry is the writer's key order, so lines look byte-for-byte like real ones.

Everything is derived from `seed` and `start`: the same arguments give the same bytes.

    info = generate_transcript(tmp_path, turns=40, thinking=True, compactions=2, branch=True)
    info.path, info.id, info.entries, info.size

`target_bytes=` keeps adding turns until the file reaches that size (for 100 MB benchmarks); `version=1`/`2`
writes the old formats (no ids / `hookMessage` role) for migration tests.
"""

from __future__ import annotations

import base64
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

import orjson

__all__ = ["SynthInfo", "generate_transcript", "DEFAULT_START", "DEFAULT_CWD"]

DEFAULT_START = datetime(2026, 10, 1, 8, 0, 0, tzinfo=timezone.utc)
DEFAULT_CWD = "/home/molt/.openclaw/workspace"

_WORDS = ("the session agent context tool result file config error build test deploy memory channel telegram "
          "discord gateway compaction token budget retry queue branch commit review schema parser index cache "
          "lock backup restore rotate archive summary thread user reply").split()
_TOOLS = ("exec", "read", "write", "edit", "web_fetch", "memory_search", "browser", "message")
_MODEL = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-opus-4-6"}


@dataclass
class SynthInfo:
    """What was written: session id, file path (None for a file handle), number of entries (header excluded),
    size in bytes, and a few facts tests like to assert on."""

    id: str
    path: Path | None
    entries: int
    size: int
    version: int = 3
    turns: int = 0
    tool_calls: int = 0
    leaf_id: str | None = None
    open_call_id: str | None = None
    entry_ids: list[str] = field(default_factory=list, repr=False)


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class _Gen:
    def __init__(self, seed: int, start: datetime, version: int):
        self.rnd = random.Random(seed)
        self.clock_ms = int(start.timestamp() * 1000)
        self.version = version
        self.ids: set[str] = set()

    # -- randomness ---------------------------------------------------------------------------------------
    def pick(self, seq):
        return seq[self.rnd.randrange(len(seq))]

    def sentence(self, n: int) -> str:
        return " ".join(self.pick(_WORDS) for _ in range(n))

    def para(self, lines: int, words: int) -> str:
        return "\n".join(self.sentence(words) for _ in range(lines))

    def tick(self) -> int:
        self.clock_ms += 1000 + self.rnd.randrange(20000)
        return self.clock_ms

    def now_iso(self) -> str:
        return _iso(datetime.fromtimestamp(self.clock_ms / 1000, tz=timezone.utc))

    def new_id(self) -> str:
        while True:
            if self.version >= 4:  # database era: entry ids are full UUIDs
                h = f"{self.rnd.getrandbits(128):032x}"
                i = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
            else:
                i = f"{self.rnd.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def session_id(self) -> str:
        """A UUIDv7 (timestamp from the clock, random bits from the seed): OpenClaw's id style."""
        ms = self.clock_ms & ((1 << 48) - 1)
        ra = self.rnd.getrandbits(12)
        rb = self.rnd.getrandbits(62)
        v = (ms << 80) | (0x7 << 76) | (ra << 64) | (0b10 << 62) | rb
        h = f"{v:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def b64(self, words: int) -> str:
        return base64.b64encode(self.sentence(words).encode()).decode()


def generate_transcript(
    dest: str | os.PathLike | IO[bytes],
    *,
    session_id: str | None = None,
    turns: int = 30,
    tools_per_turn: int = 2,
    plain_every: int = 4,
    thinking: bool = False,
    compactions: int = 0,
    branch: bool = False,
    images: bool = False,
    aborted: bool = False,
    custom: bool = False,
    big_results: bool = False,
    open_call: bool = False,
    seed: int = 1,
    start: datetime | None = None,
    cwd: str = DEFAULT_CWD,
    version: int = 3,
    target_bytes: int | None = None,
    parent_session: str | None = None,
    name: str | None = None,
    orphan_results: int = 0,
    torn: str | None = None,
    cut_head: int = 0,
) -> SynthInfo:
    """Write one transcript and return what was written.

    dest: a file path, an existing directory (the file is then `<dest>/<session id>.jsonl`), or a binary
    file handle. `turns` user turns are written (or, with `target_bytes`, as many as needed to reach that
    size; compactions and the branch are then placed by size). Every `plain_every`-th turn has no tool calls
    (0: all turns use tools). `open_call`: the last tool call has no result and no reply follows (a run in
    progress). `version` 1 or 2 writes the old formats (v1: no ids, compaction `firstKeptEntryIndex`, no
    branch; v1/v2: custom messages with role `hookMessage`).

    Shapes seen in transcripts in the wild: `name` a file name other than the header's id;
    `orphan_results` tool results whose call is not in the file (after the first turns' user messages);
    `torn="glued"` a write cut short mid-line by a crash, the next append glued onto it (one invalid line,
    the entry after it loses its parent), `torn="tail"` a snapshot taken mid-write (a partial last line);
    `cut_head=N` a hand-truncated file: the header and the first N entries dropped (no header line, the first
    entry's parent missing).
    """
    if version not in (1, 2, 3, 4):
        raise ValueError(f"unsupported version {version}")
    if version == 1 and branch:
        raise ValueError("version 1 transcripts have no tree, so no branches")
    start = start or DEFAULT_START
    g = _Gen(seed, start, version)
    sid = session_id or g.session_id()

    fh: IO[bytes]
    path: Path | None = None
    own = False
    if hasattr(dest, "write"):
        fh = dest  # type: ignore[assignment]
    else:
        p = Path(dest)
        path = p / f"{name or sid}.jsonl" if p.is_dir() else p
        fh = open(path, "wb")
        own = True

    size = 0
    leaf: str | None = None
    n_entries = 0
    entry_ids: list[str] = []
    # v1: entries are chained in file order and referenced by line index (header = index 0)
    line_index = 0

    grown = [0]  # tokens the messages written since the last usage add to the next usage (see `usage`)

    glue = [False]  # torn="glued": cut the next line short, without its newline
    skip = [cut_head + 1 if cut_head else 0]  # cut_head: lines not written (the header first)

    def emit(obj: dict) -> None:
        nonlocal size, n_entries, line_index
        data = orjson.dumps(obj) + b"\n"
        if glue[0]:
            glue[0] = False
            data = data[:len(data) // 2]  # the crash: half a line; the next append continues on it
        if skip[0]:
            skip[0] -= 1
            line_index += 1
            if obj.get("type") != "session":
                n_entries += 1
            return
        if obj.get("type") in ("message", "custom_message"):
            # real usage grows with what is sent (chars/4 of the text undercounts it: openclaw-format.md)
            grown[0] += len(data) // 4
        fh.write(data)
        size += len(data)
        line_index += 1
        if obj.get("type") != "session":
            n_entries += 1

    def entry(etype: str, fields: dict, *, lead: dict | None = None, parent: str | None | bool = False) -> str:
        """Append an entry in the writer's key order: type, [lead fields], id, parentId, timestamp, fields.
        (custom / custom_message put their own fields before id, as the writer does.)"""
        nonlocal leaf
        eid = g.new_id()
        pid = leaf if parent is False else parent
        obj: dict = {"type": etype}
        if lead:
            obj.update(lead)
        if version >= 2:
            obj["id"] = eid
            obj["parentId"] = pid
        obj["timestamp"] = g.now_iso()
        obj.update(fields)
        if version == 1:
            eid = f"#{line_index}"  # position stands in for the id
        emit(obj)
        leaf = eid
        entry_ids.append(eid)
        return eid

    header = {"type": "session"}
    if version >= 2:
        header["version"] = version
    header.update({"id": sid, "timestamp": _iso(start), "cwd": cwd})
    if parent_session is not None:
        header["parentSession"] = parent_session
    emit(header)

    entry("model_change", {"provider": "anthropic", "modelId": "claude-opus-4-6"})
    if thinking:
        entry("thinking_level_change", {"thinkingLevel": "medium"})
    if custom:
        entry("session_info", {"name": f"synthetic session {seed}"})

    ctx_tokens = 4000
    call_n = 0
    user_ids: list[str] = []
    user_lines: list[int] = []
    total_calls = 0
    open_call_id: str | None = None

    def usage(_: int) -> dict:
        nonlocal ctx_tokens
        ctx_tokens += grown[0]
        grown[0] = 0
        inp = ctx_tokens
        return {"input": inp, "output": 200 + g.rnd.randrange(800), "cacheRead": int(inp * 0.7),
                "cacheWrite": int(inp * 0.1), "totalTokens": inp + 1000,
                "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0.0001, "cacheWrite": 0.0002,
                         "total": 0.0033}}

    def args_for(tool: str, i: int) -> dict:
        if tool == "exec":
            cmd = g.pick(["npm test", "git status --short", "ls -la src", "grep -rn TODO src", "python3 -m pytest -q"])
            return {"command": f"cd /home/molt/projects/app && {cmd}", "timeout": 120}
        if tool == "read":
            return {"path": f"/home/molt/projects/app/src/{g.pick(_WORDS)}_{i}.ts"}
        if tool == "write":
            return {"path": f"/home/molt/projects/app/notes/{g.pick(_WORDS)}.md", "content": g.para(12, 10)}
        if tool == "edit":
            return {"path": f"/home/molt/projects/app/src/{g.pick(_WORDS)}.ts", "oldText": g.para(3, 8),
                    "newText": g.para(4, 8)}
        if tool == "web_fetch":
            return {"url": f"https://example.org/docs/{g.pick(_WORDS)}/{i}", "maxChars": 20000}
        if tool == "memory_search":
            return {"query": g.sentence(5), "maxResults": 5}
        if tool == "browser":
            return {"action": "snapshot", "targetId": f"tab-{i}"}
        return {"action": "send", "channel": "telegram", "to": "user:42", "text": g.sentence(12)}

    def result_text(tool: str) -> str:
        return g.para(400, 14) if big_results else g.para(6 + g.rnd.randrange(60), 10)

    by_size = target_bytes is not None
    n_turns = turns if not by_size else 1 << 62
    compact_at = {((k + 1) * turns) // (compactions + 1) for k in range(compactions)} if not by_size else set()
    compact_marks = [target_bytes * (k + 1) // (compactions + 1) for k in range(compactions)] if by_size else []
    branch_turn = turns // 2 if not by_size else -1
    branched = False
    t = 0
    while t < n_turns:
        last_turn = (t == n_turns - 1)
        if by_size:
            # the turn that crosses the target is the last one
            last_turn = size >= target_bytes * 0.995  # type: ignore[operator]
        if images and t % 7 == 3:
            content: object = [{"type": "text", "text": f"[Telegram Alice id:42] {g.sentence(20)}"},
                               {"type": "image", "data": g.b64(40), "mimeType": "image/png"}]
        else:
            content = f"[Telegram Alice id:42 +{t}m] {g.para(1 + g.rnd.randrange(3), 14)}"
        user_lines.append(line_index)
        user_ids.append(entry("message", {"message": {"role": "user", "content": content, "timestamp": g.tick()}}))
        if t < orphan_results:  # a result whose call is nowhere in the file
            entry("message", {"message": {"role": "toolResult", "toolCallId": f"toolu_gone{t:03d}",
                                          "toolName": "exec", "content": [{"type": "text", "text": g.sentence(6)}],
                                          "isError": False, "timestamp": g.tick()}})
        if torn == "glued" and t == n_turns // 2:
            glue[0] = True  # the next entry (this turn's first reply) is cut short; the one after is glued on
        with_tools = tools_per_turn > 0 and (plain_every == 0 or t % plain_every != plain_every - 1)
        rounds = (1 + g.rnd.randrange(2)) if with_tools else 0
        stop_turn = False
        for r in range(rounds):
            blocks: list[dict] = []
            if thinking:
                blocks.append({"type": "thinking", "thinking": g.para(2, 12), "thinkingSignature": g.b64(30)})
            blocks.append({"type": "text", "text": g.sentence(10)})
            calls = []
            for _ in range(1 + g.rnd.randrange(tools_per_turn)):
                tool = g.pick(_TOOLS)
                call_n += 1
                calls.append({"type": "toolCall", "id": f"toolu_{call_n:04d}{g.pick('abc')}", "name": tool,
                              "arguments": args_for(tool, call_n)})
            blocks.extend(calls)
            total_calls += len(calls)
            entry("message", {"message": {"role": "assistant", "content": blocks, **_MODEL,
                                          "usage": usage(ctx_tokens), "stopReason": "toolUse",
                                          "timestamp": g.tick()}})
            final_round = last_turn and r == rounds - 1
            for c in calls:
                if open_call and final_round and c is calls[-1]:
                    open_call_id = c["id"]
                    stop_turn = True
                    continue
                is_err = g.rnd.random() < 0.08
                text = f"Error: {g.sentence(8)}" if is_err else result_text(c["name"])
                res: dict = {"role": "toolResult", "toolCallId": c["id"], "toolName": c["name"],
                             "content": [{"type": "text", "text": text}], "isError": is_err, "timestamp": g.tick()}
                if c["name"] == "exec":
                    res["details"] = {"exitCode": 1 if is_err else 0, "durationMs": g.rnd.randrange(5000)}
                if images and c["name"] == "browser":
                    res["content"].append({"type": "image", "data": g.b64(60), "mimeType": "image/png"})
                entry("message", {"message": res})
        if stop_turn:
            break
        if aborted and t % 11 == 5:
            entry("message", {"message": {"role": "assistant", "content": [{"type": "text", "text": g.sentence(6)}],
                                          **_MODEL, "usage": usage(ctx_tokens), "stopReason": "aborted",
                                          "errorMessage": "Request was aborted", "timestamp": g.tick()}})
        final: list[dict] = []
        if thinking:
            final.append({"type": "thinking", "thinking": g.para(1, 12), "thinkingSignature": g.b64(20)})
        final.append({"type": "text", "text": g.para(1 + g.rnd.randrange(4), 16)})
        entry("message", {"message": {"role": "assistant", "content": final, **_MODEL, "usage": usage(ctx_tokens),
                                      "stopReason": "stop", "timestamp": g.tick()}})
        if custom and t % 9 == 4:
            entry("custom", {}, lead={"customType": "openclaw.cache-ttl", "data": {"ts": g.clock_ms}})
            sys_text = f"System: [{_iso(datetime.fromtimestamp(g.clock_ms / 1000, tz=timezone.utc))}] Model switched."
            if version >= 3:
                entry("custom_message", {}, lead={"customType": "openclaw.system-event", "content": sys_text,
                                                  "display": False})
            else:  # old files: a message with role hookMessage
                entry("message", {"message": {"role": "hookMessage", "customType": "openclaw.system-event",
                                              "content": sys_text, "display": False, "timestamp": g.tick()}})
        if custom and t == 2 and len(user_ids) > 1 and version >= 2:
            entry("label", {"targetId": user_ids[1], "label": "checkpoint"})
        do_compact = t in compact_at
        if by_size and compact_marks and size >= compact_marks[0]:
            compact_marks.pop(0)
            do_compact = True
        if do_compact and user_ids:
            k = max(0, len(user_ids) - 3)
            summary = f"## Summary\n{g.para(8, 12)}"
            if version >= 2:
                entry("compaction", {"summary": summary, "firstKeptEntryId": user_ids[k], "tokensBefore": ctx_tokens})
            else:
                entry("compaction", {"summary": summary, "firstKeptEntryIndex": user_lines[k],
                                     "tokensBefore": ctx_tokens})
            ctx_tokens = 12000
        do_branch = branch and not branched and (t == branch_turn or (by_size and size >= target_bytes // 2))
        if do_branch and len(user_ids) >= 2:
            branched = True
            frm = user_ids[-2]
            # the writer's branchWithSummary: the leaf moves to `frm`, a branch_summary child of it follows
            entry("branch_summary", {"fromId": frm, "summary": f"Abandoned path: {g.sentence(20)}"}, parent=frm)
        t += 1
        if by_size and last_turn:
            break

    if torn == "tail":  # the snapshot was taken while the writer was appending a line
        part = orjson.dumps({"type": "message", "id": g.new_id(), "parentId": leaf, "timestamp": g.now_iso(),
                             "message": {"role": "user", "content": g.sentence(12), "timestamp": g.tick()}})
        fh.write(part[:len(part) // 2])
        size += len(part) // 2
    if own:
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
    return SynthInfo(id=sid, path=path, entries=n_entries, size=size, version=version, turns=len(user_ids),
                     tool_calls=total_calls, leaf_id=leaf if version >= 2 else None, open_call_id=open_call_id,
                     entry_ids=entry_ids if version >= 2 else [])
