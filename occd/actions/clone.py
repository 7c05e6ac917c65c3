"""`occd clone`: copy a session under a new session id (optionally stripped), registered in sessions.json.

The clone's header records its source (`parentSession`); the source is only read, never changed.
"""

from __future__ import annotations

import time
from pathlib import Path

from occd.actions.common import check_header, record_action, resolve_target, session_lock
from occd.actions.edit import context_window_for, record_figure, refuse_malformed, stats_from, tokens_after
from occd.actions.results import CloneResult
from occd.errors import OccdError


def _clone_key(agent: str, source_key: str | None, new_id: str) -> str:
    # the id's random tail: its first 8 characters are a UUIDv7's clock (the same for ~65 s: a second clone
    # within that minute was refused as "key exists")
    return f"agent:{agent}:occd-clone-{new_id.replace('-', '')[-12:]}"


def resume_command(agent: str, key: str | None, session_id: str) -> str:
    if key:
        return f"openclaw agent --agent {agent} --session-key {key} --message \"…\""
    return f"openclaw agent --agent {agent} --session-id {session_id} --message \"…\""


def clone_session(settings, *, agent=None, ref=None, output=None, preset=False, register=True, trigger="manual",
                  ledger=None, now: float | None = None) -> CloneResult:
    """preset: False = copy as is; None = the configured default preset; a name = that preset. The source is
    held under occd's session lock (no occd edit of it meanwhile), the registration goes through update_index."""
    target = resolve_target(settings, agent, ref, action="clone")
    with session_lock(target.path):
        return _clone_locked(settings, target, output=output, preset=preset, register=register, trigger=trigger,
                             ledger=ledger, now=now)


def _clone_locked(settings, target, *, output, preset, register, trigger, ledger, now) -> CloneResult:
    from occd.cleaner import plan_strip
    from occd.config import resolve_preset
    from occd.openclaw import new_session_id
    from occd.transcript import atomic_write, check_invariants, clone_header, rewrite, scan

    src = target.path
    t0 = time.monotonic()
    t = scan(src)
    if t.header is None and not t.entries and not t.malformed:
        raise OccdError(f"Session '{target.session_id}' is empty: there is nothing to clone",
                        "OpenClaw writes a transcript on the session's first turn", code="EMPTY_SESSION")
    check_header(t, target.session_id, unindexed=getattr(target.info, "unindexed", False))
    refuse_malformed(t)
    name = None
    if preset is not False:
        name, p = resolve_preset(settings, preset)
        plan = plan_strip(t, p.keep_turns_with_tools, p.truncate_percent)
    else:
        plan = plan_strip(t, 10**9, 0)  # keeps everything: the statistics of an unchanged copy
    new_id = new_session_id()
    dest = Path(output).expanduser().resolve() if output else src.parent / f"{new_id}.jsonl"
    if dest.exists():
        raise OccdError(f"Refusing to overwrite {dest}", "choose another --output path", code="OUTPUT_EXISTS")
    if not dest.parent.is_dir():
        raise OccdError(f"Directory {dest.parent} does not exist", "create it or choose another --output path",
                        code="OUTPUT_DIR_MISSING")
    header = clone_header(t, new_id, parent_session=str(src))

    scanned: dict = {}

    def validate(tmp: Path) -> None:
        scanned["new"] = scan(tmp, prepare_strip=False)
        problems = check_invariants(scanned["new"], t, clone=True)
        if problems:
            raise OccdError(f"Refusing to write the clone: the result would be invalid ({problems[0]})",
                            "this is a bug in occd; nothing was written — please report it", code="INVARIANT_VIOLATION")

    mode = src.stat().st_mode & 0o7777
    atomic_write(dest, lambda fh: rewrite(t, fh, remove=plan.remove, edits=plan.transforms(), header=header),
                 mode=mode, validate=validate)
    key = None
    try:
        if register:
            key = _register(target, new_id, dest, now)
    except BaseException:
        dest.unlink(missing_ok=True)  # an unregistered clone we were asked to register is not left behind
        raise
    stats = stats_from(plan, t, window=context_window_for(target), size_after=dest.stat().st_size, target=target)
    stats.tokens_after_estimate = tokens_after(scanned.get("new") or dest, stats)
    if preset is False and stats.turns:  # copied as is: no preset's limits to report
        stats.turns = {**stats.turns, "keepTurnsWithTools": None, "truncatePercent": None}
    # the clone's own figure: an unchanged copy measures what the source measures; a stripped one is an estimate
    # until its first reply (its usage measured the source). A clone written outside the agent's sessions folder
    # is not one of its sessions (the daemon never scans it): the ledger does not count it among them.
    if dest.parent == src.parent:
        record_figure(target, dest, stats.tokens_after_estimate,
                      "estimate" if plan.changed else stats.tokens_before_source, stats.context_window,
                      session_id=new_id, key=key, ledger=ledger)
    if key is None and dest.parent != src.parent:
        resume = None  # OpenClaw only resumes sessions in the agent's sessions folder that its index names
    else:
        resume = resume_command(target.agent, key, new_id)
    res = CloneResult(target.session_id, new_id, dest, resume, key, name, stats)
    record_action("clone", target, outcome="ok", trigger=trigger, before={"size": stats.size_original},
                  after=res.to_json()["statistics"] | {"clonedSessionId": new_id, "clonedPath": str(dest)},
                  duration_ms=(time.monotonic() - t0) * 1000, ledger=ledger)
    return res


def _register(target, new_id: str, dest: Path, now: float | None) -> str:
    from occd.openclaw import update_index

    now_ms = int((time.time() if now is None else now) * 1000)
    key = _clone_key(target.agent, target.key, new_id)
    src_entry = dict(getattr(target.info, "entry", None) or {})

    def mutate(index: dict) -> dict:
        if key in index:
            raise OccdError(f"Session key {key} already exists", "run the clone again", code="KEY_EXISTS")
        entry = {k: v for k, v in src_entry.items()
                 if k not in ("sessionId", "sessionFile", "totalTokens", "totalTokensFresh", "inputTokens",
                              "outputTokens", "cacheRead", "cacheWrite", "contextTokens", "compactionCount",
                              "memoryFlushAt", "memoryFlushCompactionCount", "lastInteractionAt", "sessionStartedAt",
                              "origin", "deliveryContext", "lastChannel", "lastTo", "lastAccountId")}
        entry.update({"sessionId": new_id, "sessionFile": str(dest), "updatedAt": now_ms, "sessionStartedAt": now_ms,
                      "compactionCount": 0})
        index[key] = entry
        return index

    update_index(target.path.parent, mutate, done=lambda idx: (idx.get(key) or {}).get("sessionId") == new_id)
    return key
