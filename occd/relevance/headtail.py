"""Cheap reads of JSONL transcripts: the first and last lines (head/tail windows), and per-file counters
kept up to date incrementally (each byte of a file is counted once; later reads start where the last ended).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import orjson

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 128 * 1024
CHUNK = 1 << 20


def _parse(lines: Iterable[bytes]) -> list[dict]:
    out = []
    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            o = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(o, dict):
            out.append(o)
    return out


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


class Counter:
    """Counts of byte patterns per file, remembered by (path, inode) and the offset counted up to (always a
    line end), so an appended-to transcript is only read from where the last count stopped. Patterns never
    contain a newline, so counting whole lines is exact. A file that shrank or was replaced is recounted."""

    VERSION = 1

    def __init__(self, cache_file: Path | None = None):
        self.cache_file = cache_file
        self.data: dict[str, dict] = {}
        self.dirty = False
        self.bytes_read = 0
        if cache_file is not None:
            try:
                d = json.loads(cache_file.read_text())
                if d.get("version") == self.VERSION and isinstance(d.get("files"), dict):
                    self.data = d["files"]
            except (OSError, ValueError):
                pass

    def counts(self, path: Path, patterns: tuple[bytes, ...]) -> dict[str, int]:
        key = str(path)
        try:
            st = os.stat(path)
        except OSError:
            return {p.decode(): 0 for p in patterns}
        pat_keys = [p.decode() for p in patterns]
        ent = self.data.get(key)
        if (not ent or ent.get("ino") != st.st_ino or ent.get("offset", 0) > st.st_size
                or sorted(ent.get("counts", {})) != sorted(pat_keys)):
            ent = {"ino": st.st_ino, "offset": 0, "counts": {k: 0 for k in pat_keys}}
        if ent["offset"] < st.st_size:
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
                    for p, k in zip(patterns, pat_keys):
                        ent["counts"][k] += whole.count(p)
                    pos += len(whole)
                ent["offset"] = pos
            self.data[key] = ent
            self.dirty = True
        return dict(ent["counts"])

    def save(self) -> None:
        if not self.dirty or self.cache_file is None:
            return
        live = {k: v for k, v in self.data.items() if os.path.exists(k)}
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.cache_file.with_name(self.cache_file.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": self.VERSION, "files": live}))
            os.replace(tmp, self.cache_file)
            self.dirty = False
        except OSError:
            pass
