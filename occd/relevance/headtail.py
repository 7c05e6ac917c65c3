"""Cheap reads of JSONL transcripts: the first and last lines (head/tail windows), and per-file message and
compaction counts kept up to date incrementally (each byte of a file is counted once; later reads start where
the last ended).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 128 * 1024
CHUNK = 1 << 20


def _parse(lines: Iterable[bytes]) -> list[dict]:
    from occd.transcript.jsonl import iter_objects

    return list(iter_objects(raw.strip() for raw in lines))


def head_tail(path: Path, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> tuple[list[dict], list[dict], bool]:
    """(objects of the first lines, objects of the last lines, whole file read). Partial lines at the window
    edges are dropped; when the file is small both lists come from the same single read."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= head_bytes + tail_bytes:
            objs = _parse(fh.read().split(b"\n"))
            return objs, objs, True
        head = fh.read(head_bytes)
        hl = head.split(b"\n")
        head_objs = _parse(hl[:-1])  # the last piece may be cut
        fh.seek(size - tail_bytes)
        tail = fh.read(tail_bytes)
        tail_objs = _parse(tail.split(b"\n")[1:])  # the first piece may be cut
        return head_objs, tail_objs, False


# A line is parsed only when one of these appears in it, whatever the spacing around the colon ("type":"user",
# "type": "user"): tool results, attachments and API records are skipped without parsing.
_CANDIDATE = re.compile(rb'"type"\s*:\s*"(?:user|assistant|system|message|compaction)"')
RECENT_IDS = 16


def _claude_line(o: dict, st: dict) -> None:
    """Claude Code, counted as Claude Code shows the conversation: a prompt the user typed (or a slash command)
    is a user message; one API reply is one assistant message however many lines it was written as (text and
    each tool call are separate `assistant` lines with the same message.id); tool results, meta lines, the
    /compact summary and command output are not messages. Side chains (subagents) are not the conversation."""
    from occd.relevance.prompts import claude_prompt_text

    t = o.get("type")
    if o.get("isSidechain") is True:
        return
    if t == "assistant":
        msg = o.get("message") if isinstance(o.get("message"), dict) else {}
        mid = msg.get("id") if isinstance(msg.get("id"), str) else None
        if mid is not None:
            recent = st.setdefault("recent", [])
            if mid in recent:
                return
            recent.append(mid)
            del recent[:-RECENT_IDS]
        st["assistant"] = st.get("assistant", 0) + 1
    elif t == "user":
        if claude_prompt_text(o) is not None:
            st["user"] = st.get("user", 0) + 1
    elif t == "system" and o.get("subtype") == "compact_boundary":
        st["compactions"] = st.get("compactions", 0) + 1


def _openclaw_line(o: dict, st: dict) -> None:
    """OpenClaw: user and assistant messages (a tool result is shown with its call, not as a message), and
    compaction entries."""
    t = o.get("type")
    if t == "message":
        m = o.get("message")
        role = m.get("role") if isinstance(m, dict) else None
        if role in ("user", "assistant"):
            st[role] = st.get(role, 0) + 1
    elif t == "compaction":
        st["compactions"] = st.get("compactions", 0) + 1


FORMATS = {"claude-code": _claude_line, "openclaw": _openclaw_line}


def _loads(data: bytes):
    """The cache file (megabytes for thousands of sessions): orjson when it can, json for what only json reads
    (the NaN json.dumps can write)."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class Counter:
    """Per-file message and compaction counts, remembered by (path, inode) and the offset counted up to (always a
    line end), so an appended-to transcript is only read from where the last count stopped. Only lines that can
    matter are parsed (see _CANDIDATE). A file that shrank or was replaced is recounted."""

    VERSION = 2

    def __init__(self, cache_file: Path | None = None):
        self.cache_file = cache_file
        self.data: dict[str, dict] = {}
        self.dirty = False
        self.bytes_read = 0
        if cache_file is not None:
            try:
                d = _loads(cache_file.read_bytes())
                if d.get("version") == self.VERSION and isinstance(d.get("files"), dict):
                    self.data = d["files"]
            except (OSError, ValueError):
                pass

    def counts(self, path: Path, fmt: str, st: os.stat_result | None = None) -> dict[str, int]:
        """{"user", "assistant", "compactions"} of the file in format `fmt` (claude-code | openclaw); `st`: its
        os.stat when the caller just took it."""
        from occd.transcript.jsonl import iter_objects

        fn = FORMATS[fmt]
        key = str(path)
        try:
            st = os.stat(path) if st is None else st
        except OSError:
            return {"user": 0, "assistant": 0, "compactions": 0}
        ent = self.data.get(key)
        if (not ent or ent.get("ino") != st.st_ino or ent.get("offset", 0) > st.st_size or ent.get("fmt") != fmt
                or not isinstance(ent.get("state"), dict)):
            ent = {"ino": st.st_ino, "offset": 0, "fmt": fmt, "state": {}}
        if ent["offset"] < st.st_size:
            state = ent["state"]
            with open(path, "rb") as fh:
                fh.seek(ent["offset"])
                carry = b""
                pos = ent["offset"]
                while True:
                    chunk = fh.read(CHUNK)
                    if not chunk:
                        break
                    self.bytes_read += len(chunk)
                    buf = carry + chunk
                    cut = buf.rfind(b"\n")
                    if cut < 0:
                        carry = buf
                        continue
                    whole, carry = buf[: cut + 1], buf[cut + 1:]
                    for o in iter_objects(ln for ln in whole.split(b"\n") if _CANDIDATE.search(ln)):
                        fn(o, state)
                    pos += len(whole)
                ent["offset"] = pos
            self.data[key] = ent
            self.dirty = True
        s = ent["state"]
        return {"user": int(s.get("user", 0)), "assistant": int(s.get("assistant", 0)),
                "compactions": int(s.get("compactions", 0))}

    def memo(self, path: Path, st: os.stat_result, tag: str) -> dict | None:
        """What was derived from the file when it was last read (`remember`), if the file (inode, size, mtime) and
        the `tag` (whatever else the derivation took) are the same: an unchanged transcript is not read again."""
        ent = self.data.get(str(path))
        m = ent.get("memo") if isinstance(ent, dict) else None
        if (isinstance(m, dict) and m.get("fp") == [st.st_ino, st.st_size, st.st_mtime_ns] and m.get("tag") == tag
                and isinstance(m.get("v"), dict)):
            return m["v"]
        return None

    def remember(self, path: Path, st: os.stat_result, tag: str, value: dict) -> None:
        """Keep `value` (JSON) for the file as it is now; kept with its counts (call `counts` first)."""
        ent = self.data.get(str(path))
        if isinstance(ent, dict):
            ent["memo"] = {"fp": [st.st_ino, st.st_size, st.st_mtime_ns], "tag": tag, "v": value}
            self.dirty = True

    def save(self) -> None:
        if not self.dirty or self.cache_file is None:
            return
        live = {k: v for k, v in self.data.items() if os.path.exists(k)}
        try:
            from occd.paths import write_private

            write_private(self.cache_file, json.dumps({"version": self.VERSION, "files": live}).encode())
            self.dirty = False
        except OSError:
            pass
