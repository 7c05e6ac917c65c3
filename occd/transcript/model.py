"""Compact per-entry metadata of a transcript, and the tree built from it.

A `Transcript` never holds the parsed entries: each line becomes one `EntryMeta` (a few ints, short strings and
tuples). Everything the analysis and the cleaner need is extracted at scan time; the rewrite reads the file
again for the few lines it has to change.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from occd.errors import ParseError

CURRENT_VERSION = 3


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while tens of thousands of small, acyclic objects are built: each
    full collection walks all of them (measured: it doubles the scan time of a 100 MB transcript). Reference
    counting still frees everything; the collector is re-enabled (if it was on) on the way out.

    On the way out the objects made meanwhile are moved to the oldest generation (gc.freeze() then
    gc.unfreeze(): two list splices, nothing walked) instead of being left young: otherwise the first young
    collection after the pause walks all of them at once (measured: ~0.05 s after the scan of a 100 MB
    transcript). Nothing is kept from the collector: a full collection still walks them, and any garbage cycle
    made meanwhile is collected by it. Skipped when the process has frozen objects of its own (unfreeze would
    release those too)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
MESSAGE_TYPES = ("message", "custom_message", "branch_summary")
REF_TYPES = frozenset(("compaction", "label", "branch_summary"))  # entry types that name entries besides parentId


class EntryMeta:
    """One entry (one line after the header). `line` is the 0-based physical line index in the file (the
    header is line 0), `offset`/`length` its bytes (length includes the newline, if any).

    Slots, all set at construction: tens of thousands are built per scan and visited by every pass over the
    path; slot reads are the cheapest attribute reads (an instance dict would be grown in a different key
    order per kind of entry, and reads of defaults would fall through to the class)."""

    __slots__ = ("line", "offset", "length", "pos", "type", "id", "parent", "role", "stop_reason", "call_ids",
                 "call_blocks", "call_trunc", "thinking_blocks", "signed_thinking", "n_blocks", "has_text", "images",
                 "result_for", "result_trunc", "usage_tokens", "est_tokens", "first_kept", "target_id", "from_id",
                 "summary", "display", "stripped", "replay")

    def __init__(self, line: int, offset: int, length: int, pos: int, etype: str, eid, parent):
        self.line = line
        self.offset = offset
        self.length = length
        self.pos = pos                       # position among parsed JSON objects (header = 0), for v1 refs
        self.type = etype
        self.id = eid
        self.parent = parent
        self.role: str | None = None
        self.stop_reason: str | None = None
        self.call_ids: tuple = ()           # toolCall ids, in block order
        self.call_blocks: tuple = ()        # their indices in `content`
        self.call_trunc: tuple = ()         # per call: True when its arguments exceed the truncation limit
        self.thinking_blocks: tuple = ()    # indices of thinking blocks in `content`
        self.signed_thinking = 0
        self.n_blocks = 0                   # number of content blocks (0 for string content)
        self.has_text = False               # any non-empty text (string content or a text block)
        self.images = 0
        self.result_for: str | None = None  # toolResult: the toolCallId it answers
        self.result_trunc = False           # toolResult: text over the limit, or images present
        self.usage_tokens: int | None = None  # assistant with usable usage: OpenClaw's calculateContextTokens
        self.est_tokens = 0                 # OpenClaw's estimateTokens for the message this entry sends
        self.first_kept = None              # compaction.firstKeptEntryId
        self.target_id = None               # label.targetId
        self.from_id = None                 # branch_summary.fromId
        self.summary = False                # branch_summary has a non-empty summary (it is then sent)
        self.display = None
        self.replay: str | None = None      # assistant carrying a provider-native compaction checkpoint: its
                                            # providerReplay type (occd.transcript.compaction); never rewritten
        self.stripped: bytes | None = None  # assistant with tool calls and other content, v3+: its line serialized
                                            # with the toolCall and thinking blocks dropped (scan(prepare_strip=True))

    @property
    def lineno(self) -> int:
        return self.line + 1

    @property
    def is_compaction(self) -> bool:
        """A compaction (occd.transcript.compaction.is_compaction): OpenClaw's entry or a provider checkpoint."""
        return self.type == "compaction" or self.replay is not None

    @property
    def is_message(self) -> bool:
        return self.type == "message"

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<Entry L{self.lineno} {self.type}/{self.role} id={self.id} parent={self.parent}>"


@dataclass(frozen=True)
class Malformed:
    """A line OpenClaw would silently skip. kind: invalid-json | not-object | non-utf8 | torn | too-long."""

    lineno: int
    kind: str
    offset: int
    length: int

    def to_json(self) -> dict:
        return {"line": self.lineno, "kind": self.kind}


@dataclass
class Transcript:
    path: Path | None
    header: dict | None
    header_length: int
    version: int
    entries: list[EntryMeta]
    malformed: list[Malformed]
    size: int
    stat: tuple[int, int, int] | None          # (size, mtime_ns, inode) at scan time
    missing_final_newline: bool = False        # last line is a complete entry but has no newline
    header_ok: bool = True                     # first parsed line is {"type":"session","id":<str>}
    extra_sessions: list[int] = field(default_factory=list)  # lines of further "session" objects (ignored)
    by_id: dict = field(default_factory=dict)  # id -> index into entries (a later duplicate wins)
    duplicate_ids: list = field(default_factory=list)
    lines: int = 0                             # physical lines, header included
    header_offset: int = 0
    _acyclic: bool = False
    _refs: list | None = None
    # entries[i]'s parent as an index into entries (-1: none); set by the scan only when every parentId names
    # an earlier entry and ids are unique (then it is what by_id gives); None otherwise
    parent_index: object = None

    # -- basic facts ----------------------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self.header.get("id") if isinstance(self.header, dict) else None

    @property
    def needs_migration(self) -> bool:
        return self.version < CURRENT_VERSION

    @property
    def empty(self) -> bool:
        return not self.entries

    @property
    def leaf(self) -> EntryMeta | None:
        """OpenClaw's leaf when it opens a file: the last entry in the file."""
        return self.entries[-1] if self.entries else None

    def ref_entries(self) -> list[EntryMeta]:
        """Entries that reference other entries besides their parent (compaction, label, branch_summary)."""
        if self._refs is None:
            self._refs = [e for e in self.entries if e.type in REF_TYPES]
        return self._refs

    def get(self, eid) -> EntryMeta | None:
        i = self.by_id.get(eid)
        return self.entries[i] if i is not None else None

    # -- tree ------------------------------------------------------------------------------------------------
    def path_to_root(self, start: EntryMeta) -> list[EntryMeta]:
        """start → root, through parentId (as OpenClaw walks; a missing parent ends the walk).
        Raises ParseError on a parent cycle instead of looping."""
        out: list[EntryMeta] = []
        entries, by_id = self.entries, self.by_id
        limit = len(entries)
        cur: EntryMeta | None = start
        while cur is not None:
            out.append(cur)
            if len(out) > limit:  # longer than the file: the walk has entered a cycle
                self.check_cycles()
                raise ParseError("Failed to parse session file", "parent cycle in the entry tree",
                                 details={"cycle": True})
            p = cur.parent
            if p is None:
                break
            i = by_id.get(p)
            cur = entries[i] if i is not None else None
        return out

    def active_path(self) -> list[EntryMeta]:
        """root → leaf: the branch the model sees (before compaction is applied)."""
        if not self.entries:
            return []
        pidx = self.parent_index
        if pidx is None:
            p = self.path_to_root(self.entries[-1])
        else:  # the same walk over the scan's parent indices (they only go up the file: it ends)
            entries = self.entries
            p = []
            append = p.append
            i = len(entries) - 1
            while i >= 0:
                append(entries[i])
                i = pidx[i]
        p.reverse()
        return p

    def broken_parent(self, path: list[EntryMeta] | None = None) -> EntryMeta | None:
        """The entry on the active path whose parentId points nowhere (history before it is lost), if any."""
        for e in (path if path is not None else self.active_path()):
            if e.parent is not None and e.parent not in self.by_id:
                return e
        return None

    def sent_entries(self, path: list[EntryMeta] | None = None) -> list[EntryMeta]:
        """The entries whose messages OpenClaw sends, in order (buildSessionContext): with a compaction on the
        path, the latest one's summary, then the path from firstKeptEntryId up to it, then what follows."""
        path = self.active_path() if path is None else path
        comp_idx = None
        for i, e in enumerate(path):
            if e.type == "compaction":
                comp_idx = i
        if comp_idx is None:
            return [e for e in path if _sends(e)]
        comp = path[comp_idx]
        out = [comp]
        found = False
        for e in path[:comp_idx]:
            if e.id == comp.first_kept:
                found = True
            if found and _sends(e):
                out.append(e)
        out.extend(e for e in path[comp_idx + 1:] if _sends(e))
        return out

    def turns(self, path: list[EntryMeta] | None = None) -> list["Turn"]:
        """Turns on the active path: a user message through the last entry before the next user message.
        Entries before the first user message are not in any turn."""
        path = self.active_path() if path is None else path
        out: list[Turn] = []
        cur: Turn | None = None
        for i, e in enumerate(path):  # one pass: a user message opens a turn, which ends before the next one
            if e.role == "user" and e.type == "message":
                if cur is not None:
                    cur.end = i - 1
                cur = Turn(len(out), i, i)
                out.append(cur)
            if cur is not None and e.call_ids:
                cur.call_ids.extend(e.call_ids)
        if cur is not None:
            cur.end = len(path) - 1
        return out

    def check_cycles(self) -> None:
        """Raise ParseError if any parent chain in the file loops (OpenClaw would hang walking it)."""
        if self._acyclic:
            return
        entries, get = self.entries, self.by_id.get
        state = bytearray(len(entries))  # entry index -> 0 not seen, 1 on the chain being walked, 2 done
        for start in range(len(entries)):
            if state[start]:
                continue
            chain: list[int] = []
            cur: int | None = start
            while cur is not None and state[cur] != 2:
                if state[cur] == 1:
                    e = entries[cur]
                    raise ParseError(f"Failed to parse session file (line {e.lineno})",
                                     "parent cycle in the entry tree: OpenClaw would hang on this session",
                                     details={"line": e.lineno, "cycle": True})
                state[cur] = 1
                chain.append(cur)
                p = entries[cur].parent
                cur = get(p) if p is not None else None
            for c in chain:
                state[c] = 2
        self._acyclic = True


def _sends(e: EntryMeta) -> bool:
    if e.type == "message" or e.type == "custom_message":
        return True
    return e.type == "branch_summary" and e.summary


class Turn:
    """A turn on the active path: `start`..`end` are indices into the active path list (inclusive)."""

    __slots__ = ("index", "start", "end", "call_ids")

    def __init__(self, index: int, start: int, end: int, call_ids: list | None = None):
        self.index = index
        self.start = start
        self.end = end
        self.call_ids = call_ids if call_ids is not None else []

    def __repr__(self) -> str:  # pragma: no cover
        return f"Turn({self.index}, {self.start}..{self.end}, calls={len(self.call_ids)})"

    @property
    def has_tools(self) -> bool:
        return bool(self.call_ids)


def file_stat(path: str | os.PathLike) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino)
