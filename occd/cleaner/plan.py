"""The strip plan: which entries are removed or rewritten, re-parenting, reference fixes, statistics.

Pure: it takes the scanned metadata (occd.transcript.Transcript) and the preset numbers and returns a
StripPlan; `occd.transcript.rewrite(t, out, remove=plan.remove, edits=plan.transforms())` applies it.

Rules (docs/design.md "cleaner", ../shared/docs/openclaw-format.md):
- Turns on the active path (user message through the last entry before the next user message). Of the turns
  with tool calls, the newest `keep` are kept; of those the oldest `truncate_percent` % (rounded down) are
  truncated; older ones lose their tool calls and results.
- A result follows its call (matched by id to the latest open call before it on the path), wherever it is.
  A result with no call before it (an orphan, which providers reject) is removed when it lies in a turn that
  is removed or truncated; orphans in kept turns and calls without a result elsewhere are left as they are
  (kept turns are never touched; OpenClaw patches an unanswered call itself) and reported by `analyze`.
- Thinking blocks of assistant messages that carry tool calls in removed and truncated turns are removed;
  every other line stays byte-identical. User content and assistant text are never changed.
- An entry left with no content is removed; its children (on any branch) get its nearest surviving ancestor
  as parent. compaction.firstKeptEntryId moves to the next surviving entry after it on the compaction's path
  (the compaction itself when none is left, so nothing extra is sent); label.targetId and
  branch_summary.fromId move to the nearest surviving ancestor.
- An assistant message carrying a provider-native compaction checkpoint (`providerReplay`, OpenClaw 2026.10.2+)
  is never hidden or rewritten: the turns up to and including the newest one are kept whole.
- A session whose last tool call has no result yet (or whose last entry is a tool result waiting for the
  model's reply) is running: BusyError, no plan. Unless the caller says its run crashed (`crashed_run`): then
  that last turn is left exactly as it is and the rest is planned as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from occd.cleaner.truncate import truncate_args, truncate_result_content
from occd.errors import BusyError, OccdError, ParseError
from occd.transcript.model import EntryMeta, Transcript, gc_paused
from occd.transcript.rewrite import serialize, splice_parent
from occd.transcript import jsontext

REMOVED, TRUNCATED, KEPT = "removed", "truncated", "kept"


class EntryEdit:
    """How one entry line changes: content blocks dropped, tool-call arguments truncated, the tool result
    truncated, top-level reference fields replaced.

    base: when set, the line (serialized, with its newline) after `drop_blocks` alone, prepared by the scan
    from the same bytes (EntryMeta.stripped); the rewrite then starts from it instead of parsing the line."""

    __slots__ = ("drop_blocks", "truncate_calls", "truncate_result", "set_fields", "base")
    _FIELDS = ("drop_blocks", "truncate_calls", "truncate_result", "set_fields")

    def __init__(self, drop_blocks: frozenset = frozenset(), truncate_calls: frozenset = frozenset(),
                 truncate_result: bool = False, set_fields: dict | None = None, base: bytes | None = None):
        self.drop_blocks = drop_blocks
        self.truncate_calls = truncate_calls
        self.truncate_result = truncate_result
        self.set_fields = set_fields if set_fields is not None else {}
        self.base = base

    def __eq__(self, other) -> bool:  # base is a cache of drop_blocks' result, not part of the edit
        return isinstance(other, EntryEdit) and all(getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    def __repr__(self) -> str:
        return "EntryEdit(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS) + ")"

    def prepared(self, raw: bytes | None = None) -> bytes | None:
        """The new line without parsing it, when that can be done: from `base`, or from the line's bytes `raw`
        when the edit only sets a new parentId (splice_parent). None: parse the line and `apply` instead."""
        if self.truncate_calls or self.truncate_result:
            return None
        if self.base is not None:
            data = self.base
        elif raw is not None and not self.drop_blocks:
            data = raw
        else:
            return None
        fields = self.set_fields
        if not fields:
            return data if data is not raw else None  # (an edit that changes nothing: re-serialized as before)
        if len(fields) == 1 and "parentId" in fields:
            out = splice_parent(data, fields["parentId"])
            if out is not None:
                return out
        if data is raw:
            return None
        obj = jsontext.loads(data)
        for k, v in fields.items():
            obj[k] = v
        return serialize(obj)

    def apply(self, obj: dict) -> dict:
        msg = obj.get("message") if obj.get("type") == "message" else None
        if isinstance(msg, dict):
            content = msg.get("content")
            if isinstance(content, list) and (self.truncate_calls or self.drop_blocks):
                for i in self.truncate_calls:
                    b = content[i]
                    if isinstance(b, dict) and b.get("type") == "toolCall":
                        b["arguments"] = truncate_args(b.get("arguments"))
                if self.drop_blocks:
                    msg["content"] = [b for i, b in enumerate(content) if i not in self.drop_blocks]
            if self.truncate_result:
                msg["content"] = truncate_result_content(msg.get("content"))
        for k, v in self.set_fields.items():
            obj[k] = v
        return obj


class Transforms(Mapping):
    """Read-only mapping line -> EntryEdit.apply over a plan's edits."""

    __slots__ = ("_edits",)

    def __init__(self, edits: dict):
        self._edits = edits

    def __getitem__(self, line):
        return self._edits[line].apply

    def get(self, line, default=None):
        ed = self._edits.get(line)
        return ed.apply if ed is not None else default

    def prepared(self, line, raw: bytes | None = None) -> bytes | None:
        """The new bytes of `line` when they can be made without parsing it (EntryEdit.prepared), else None.
        raw: the line's bytes as read (without them only the plan's own prepared lines are used)."""
        ed = self._edits.get(line)
        return ed.prepared(raw) if ed is not None else None

    def __contains__(self, line) -> bool:
        return line in self._edits

    def __iter__(self):
        return iter(self._edits)

    def __len__(self) -> int:
        return len(self._edits)


@dataclass
class TurnRange:
    status: str
    first: int  # 1-based turn numbers on the active path
    last: int
    turns: int  # turns with tools in the range

    def to_json(self) -> dict:
        return {"status": self.status, "from": self.first, "to": self.last, "turnsWithTools": self.turns}


@dataclass
class StripPlan:
    remove: set = field(default_factory=set)            # line indices of removed entries
    edits: dict = field(default_factory=dict)           # line index -> EntryEdit
    keep_turns_with_tools: int = 0
    truncate_percent: float = 0
    turns: int = 0
    turns_with_tools: int = 0
    turn_ranges: list = field(default_factory=list)
    messages_original: int = 0
    messages_after: int = 0
    tool_calls_original: int = 0
    tool_calls_removed: int = 0
    tool_calls_truncated: int = 0
    tool_calls_preserved: int = 0
    size_original: int = 0
    reparented: int = 0
    refs_fixed: int = 0
    orphans_removed: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.remove or self.edits)

    def transforms(self) -> "Transforms":
        """line index -> function(entry dict) -> entry dict, as `rewrite` takes it (a read-only view of
        `edits`: no per-line objects are built up front)."""
        return Transforms(self.edits)

    def statistics(self, size_after: int | None = None, *, clone: bool = False) -> dict:
        """The CLI contract's statistics (EditResult; clone=True: CloneResult's key names)."""
        return contract_statistics(self, self.size_original if size_after is None else size_after, clone=clone)

    def turn_analysis(self) -> dict:
        return {"turns": self.turns, "turnsWithTools": self.turns_with_tools,
                "keepTurnsWithTools": self.keep_turns_with_tools, "truncatePercent": self.truncate_percent,
                "ranges": [r.to_json() for r in self.turn_ranges]}


def contract_statistics(s, size_after: int, *, clone: bool = False) -> dict:
    """The CLI contract's `statistics` object from anything with the plan's counters (StripPlan, the actions'
    StripStats): one place for the key names (EditResult; clone=True: CloneResult's)."""
    before = s.size_original
    return {
        "messagesOriginal": s.messages_original,
        ("messagesCloned" if clone else "messagesAfter"): s.messages_after,
        "toolCallsOriginal": s.tool_calls_original,
        "toolCallsRemoved": s.tool_calls_removed,
        "toolCallsTruncated": s.tool_calls_truncated,
        "toolCallsPreserved": s.tool_calls_preserved,
        "sizeOriginal": before,
        ("sizeCloned" if clone else "sizeAfter"): size_after,
        "reductionPercent": round(100.0 * (before - size_after) / before, 1) if before else 0.0,
    }


CRASHED_RUN_IDLE_S = 600  # an open call with no live lock and no change for this long is a crashed run


def check_running(t: Transcript, path: list[EntryMeta]) -> None:
    """BusyError when the active path ends mid-run: the last tool call has no result and no user message came
    after it, or the last entry is a tool result the model has not answered yet."""
    from occd.transcript.analysis import open_tail

    sid = t.session_id or "?"
    tail = open_tail(path)
    if tail == "result":
        raise BusyError(f"Session '{sid}' is in use", "its last tool result has no reply yet; try again when the agent "
                        "is idle (a run that crashed: `occd edit --crashed-run`)")
    if tail == "call":
        raise BusyError(f"Session '{sid}' is in use",
                        "its last tool call has no result yet (a run is in progress); try again when the agent is "
                        "idle (a run that crashed: `occd edit --crashed-run`)")


def plan_strip(t: Transcript, keep_turns_with_tools: int, truncate_percent: float | None, *,
               crashed_run: bool = False, keep_results: int | None = None) -> StripPlan:
    """Plan the strip of `t` (see the module docstring). truncate_percent None/0: no truncation.
    crashed_run: the path ends mid-run because its run crashed (the caller checked: no live lock, no change for
    a long time): plan anyway, and leave the last turn (with the unanswered call) exactly as it is.
    keep_results: instead of whole turns, keep the newest that many tool calls with their results (a turn of
    many calls is cut at the assistant message where its kept calls start; a message's calls stay together)."""
    with gc_paused():
        return _plan_strip(t, keep_turns_with_tools, truncate_percent, crashed_run, keep_results)


def _kept_by_results(path: list, tool_turns: list, keep: int) -> tuple[list, dict]:
    """The turns that hold the newest `keep` tool calls, and {turn index: the path index its kept part starts
    at} for the oldest of them when only its newest calls are needed."""
    kept, split, need = [], {}, keep
    for x in reversed(tool_turns):
        if need <= 0:
            break
        kept.append(x)
        if len(x.call_ids) <= need:
            need -= len(x.call_ids)
            continue
        cnt = 0
        for j in range(x.end, x.start - 1, -1):
            cnt += len(path[j].call_ids)
            if cnt >= need:
                split[x.index] = j
                break
        need = 0
    kept.reverse()
    return kept, split


def _plan_strip(t: Transcript, keep_turns_with_tools: int, truncate_percent: float | None,
                crashed_run: bool = False, keep_results: int | None = None) -> StripPlan:
    if keep_turns_with_tools < 0 or (truncate_percent is not None and not 0 <= truncate_percent <= 100):
        raise OccdError("Invalid preset values", "keep_turns_with_tools >= 0 and 0 <= truncate_percent <= 100")
    plan = StripPlan(keep_turns_with_tools=keep_turns_with_tools, truncate_percent=truncate_percent or 0,
                     size_original=t.size)
    if t.empty:
        return plan
    if not t.header_ok:
        raise ParseError("Failed to parse session file (line 1)",
                         "the first line is not a session header; OpenClaw would treat this file as a new session")
    t.check_cycles()
    path = t.active_path()
    open_turn = None
    if not crashed_run:
        check_running(t, path)
    turns = t.turns(path)
    if crashed_run and turns:
        from occd.transcript.analysis import open_tail

        if open_tail(path) is not None:
            open_turn = turns[-1].index  # the unanswered call stays as it is, whatever the preset says
    plan.turns = len(turns)
    tool_turns = [x for x in turns if x.has_tools]
    plan.turns_with_tools = len(tool_turns)
    # keep the newest min(n, keep) turns with tools (never a negative slice start: fewer turns than keep keeps all)
    kept = tool_turns[max(0, len(tool_turns) - keep_turns_with_tools):] if keep_turns_with_tools > 0 else []
    split: dict = {}  # turn index -> the path index where its kept calls start (keep_results)
    if keep_results is not None:
        kept, split = _kept_by_results(path, tool_turns, max(0, keep_results))
        plan.keep_turns_with_tools = len(kept)
    n_trunc = int(len(kept) * (truncate_percent or 0) // 100) if kept else 0
    status_of_turn: dict[int, str] = {}
    for x in tool_turns:
        status_of_turn[x.index] = REMOVED
    for i, x in enumerate(kept):
        status_of_turn[x.index] = TRUNCATED if i < n_trunc else KEPT
    if open_turn is not None and open_turn in status_of_turn:
        status_of_turn[open_turn] = KEPT
        split.pop(open_turn, None)
    # a provider-native compaction checkpoint (occd.transcript.compaction) is never hidden or rewritten: the path
    # up to and including the newest one stays byte-identical (its replay covers that prefix, which is then not
    # sent anyway; re-parenting or stripping in it would change what the provider's checkpoint was made from)
    cp = max((i for i, e in enumerate(path) if e.replay is not None), default=None)
    if cp is not None:
        for x in tool_turns:
            if x.start <= cp:
                status_of_turn[x.index] = KEPT
                split.pop(x.index, None)
    # turn ranges for --verbose
    for x in tool_turns:
        st = status_of_turn[x.index]
        if plan.turn_ranges and plan.turn_ranges[-1].status == st:
            plan.turn_ranges[-1].last = x.index + 1
            plan.turn_ranges[-1].turns += 1
        else:
            plan.turn_ranges.append(TurnRange(st, x.index + 1, x.index + 1, 1))
    # the active path in runs of one status: the entries before the first turn (none), then turn by turn (the
    # turns cover the rest of the path, in order)
    first = turns[0].start if turns else len(path)
    segments: list = [(None, path[:first])] if first else []
    for x in turns:
        cut = split.get(x.index)
        if cut is not None:  # its older calls go, its newest stay
            segments.append((REMOVED, path[x.start:cut]))
        segments.append((status_of_turn.get(x.index), path[x.start if cut is None else cut:x.end + 1]))
    remove_lines: set = set()  # lines of the removed entries (a line is one entry: it stands for the entry)
    remove_add = remove_lines.add
    # Re-parenting, computed on the way: the active path is a parent chain (path[i - 1] is the entry that
    # t.get(path[i].parent) returns), so the nearest surviving ancestor of a removed path entry is the last
    # surviving entry before it on the path. anc_of: id -> that ancestor (None: none), for every id whose
    # t.get() entry is removed; `x in anc_of` is exactly "x names a removed entry".
    anc_of: dict = {}
    last_surviving: EntryMeta | None = None
    removed_index: set = set()  # entry indices of the ids in anc_of
    by_id_get = t.by_id.get
    entries = t.entries
    edits: dict[int, EntryEdit] = {}
    open_calls: dict = {}            # call id -> status
    drop_sets: dict = {}             # (call_blocks, thinking_blocks) -> their frozenset (the tuples repeat)
    n_other = n_calls = n_removed = n_trunc_calls = n_kept = n_orphans = 0
    result_edit = EntryEdit(truncate_result=True)  # shared: edits are read-only once made
    no_blocks = frozenset()
    for st, seg in segments:
        call_st = st or KEPT
        for e in seg:
            if e.type != "message":
                n_other += 1
                last_surviving = e
                continue
            calls = e.call_ids
            if calls:
                n = len(calls)
                n_calls += n
                for cid in calls:
                    open_calls[cid] = call_st
                if call_st is REMOVED:
                    n_removed += n
                    key = (e.call_blocks, e.thinking_blocks)
                    drop = drop_sets.get(key)
                    if drop is None:
                        drop = drop_sets[key] = frozenset(key[0] + key[1])
                    if len(drop) < e.n_blocks:
                        edits[e.line] = EntryEdit(drop, no_blocks, False, None, e.stripped)
                        last_surviving = e
                        continue
                    # nothing left of it: removed (below)
                elif call_st is TRUNCATED:
                    n_trunc_calls += n
                    tr = frozenset(b for b, need in zip(e.call_blocks, e.call_trunc) if need)
                    drop = frozenset(e.thinking_blocks)
                    if tr or drop:
                        edits[e.line] = EntryEdit(drop, tr)
                    last_surviving = e
                    continue
                else:
                    n_kept += n
                    last_surviving = e
                    continue
            elif e.role == "toolResult":
                rf = e.result_for
                cst = open_calls.pop(rf, None) if rf is not None else None
                if cst is None:  # orphan: no call before it on the path
                    if st is REMOVED or st is TRUNCATED:
                        n_orphans += 1
                    else:
                        last_surviving = e
                        continue
                elif cst is not REMOVED:
                    if cst is TRUNCATED and e.result_trunc:
                        edits[e.line] = result_edit
                    last_surviving = e
                    continue
            else:
                last_surviving = e
                continue
            # e is removed
            remove_add(e.line)
            i = by_id_get(e.id)
            if i is not None and entries[i] is e:
                anc_of[e.id] = last_surviving
                removed_index.add(i)
    n_msgs = len(path) - n_other
    plan.messages_original, plan.tool_calls_original = n_msgs, n_calls
    plan.tool_calls_removed, plan.tool_calls_truncated, plan.tool_calls_preserved = n_removed, n_trunc_calls, n_kept
    plan.orphans_removed = n_orphans
    if not remove_lines and not edits:
        plan.messages_after = plan.messages_original
        return plan
    leaf = t.leaf
    if leaf is not None and leaf.line in remove_lines:  # cannot happen after check_running; never move the leaf
        raise OccdError("Internal error: the strip would remove the session's last entry",
                        "please report this with the output of `occd info`")

    def surviving_ancestor(eid):
        """Nearest ancestor-or-self of the entry with id `eid` that survives (None: none)."""
        if eid in anc_of:
            return anc_of[eid]
        return t.get(eid)

    path_pos: dict = {}  # id(entry) -> index on the active path, built on first use
    reparented = refs_fixed = 0
    # one pass over the file: entries whose parent or reference names a removed entry (removed ones never).
    # With the scan's parent indices (ids unique) the candidates are found without touching every entry: the
    # children of removed entries, and the entries with references.
    candidates = entries
    pidx = t.parent_index
    if pidx is not None and anc_of:
        js = {j for j, pi in enumerate(pidx) if pi in removed_index}
        js.update(by_id_get(r.id) for r in t.ref_entries())
        candidates = [entries[j] for j in sorted(js)]
    for e in (candidates if anc_of else ()):
        par = e.parent
        et = e.type
        fields: dict | None = None
        if par in anc_of:
            if e.line in remove_lines:
                continue
            anc = anc_of[par]
            fields = {"parentId": anc.id if anc is not None else None}
            reparented += 1
        if et == "message":
            pass
        elif et == "compaction":
            if e.first_kept in anc_of and e.line not in remove_lines:
                if fields is None:
                    fields = {}
                tgt = entries[by_id_get(e.first_kept)]
                fields["firstKeptEntryId"] = _next_surviving_on_path(t, e, tgt, remove_lines, surviving_ancestor,
                                                                     path, path_pos)
        elif et == "label":
            if e.target_id in anc_of and e.line not in remove_lines:
                if fields is None:
                    fields = {}
                anc = anc_of[e.target_id]
                fields["targetId"] = anc.id if anc is not None else e.id
        elif et == "branch_summary":
            if e.from_id in anc_of and e.line not in remove_lines:
                if fields is None:
                    fields = {}
                anc = anc_of[e.from_id]
                fields["fromId"] = anc.id if anc is not None else (fields.get("parentId", e.parent) or e.id)
        if fields:
            refs_fixed += len(fields) - (1 if "parentId" in fields else 0)
            ed = edits.get(e.line)
            if ed is None:
                edits[e.line] = EntryEdit(set_fields=fields)
            else:
                edits[e.line] = EntryEdit(ed.drop_blocks, ed.truncate_calls, ed.truncate_result,
                                          {**ed.set_fields, **fields}, ed.base)
    plan.reparented, plan.refs_fixed = reparented, refs_fixed
    plan.remove = remove_lines
    plan.edits = edits
    plan.messages_after = plan.messages_original - len(remove_lines)  # all removed entries are path messages
    return plan


def _next_surviving_on_path(t: Transcript, comp: EntryMeta, target: EntryMeta, removed: set, surviving_ancestor,
                            path: list[EntryMeta], path_pos: dict):
    """For a compaction whose firstKeptEntryId was removed: the next surviving entry after it on the
    compaction's own path (root → compaction), the compaction itself when none survives before it."""
    if not path_pos:
        path_pos.update((id(x), i) for i, x in enumerate(path))
    ci = path_pos.get(id(comp))
    if ci is not None:  # on the active path: its path is the active path's prefix
        cpath, k = path, path_pos.get(id(target))
        if k is not None and k > ci:
            k = None
    else:
        cpath = t.path_to_root(comp)
        cpath.reverse()
        ci = len(cpath) - 1
        k = next((i for i, x in enumerate(cpath) if x is target), None)
    if k is None:
        anc = surviving_ancestor(target.id)
        return anc.id if anc is not None else comp.id
    for x in cpath[k + 1:ci + 1]:
        if x.line not in removed:
            return x.id
    return comp.id
