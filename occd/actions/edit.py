"""`occd edit --strip-tools`: strip old tool calls of a session in place (same session id), after a backup.

Used by the CLI (trigger manual) and by the daemon's apply job (trigger auto, with the policy that fired).
"""

from __future__ import annotations

import contextlib
import time

from occd.actions.common import (check_header, check_writable_path, ensure_idle, record_action, replace_with_backup, resolve_target,
                                 session_lock)
from occd.actions.results import EditResult, StripStats
from occd.errors import BusyError, OccdError, ParseError


def stats_from(plan, t, *, window: int | None, size_after: int | None = None, clone: bool = False,
               target=None) -> StripStats:
    """The plan's counters, and the session's context figure before (occd.openclaw.figure: the same figure `list`,
    `info`, `status` and the daemon show; with `target`, OpenClaw's index and occd's own earlier rewrites count)."""
    from occd.transcript import context_tokens, estimated_tokens

    ctx = context_tokens(t)
    measured = (ctx["tokens"], ctx["source"]) if ctx["source"] in ("usage", "estimate") else (None, None)
    fig = figure_before(target, t, measured, window)
    return StripStats(
        messages_original=plan.messages_original, messages_after=plan.messages_after,
        tool_calls_original=plan.tool_calls_original, tool_calls_removed=plan.tool_calls_removed,
        tool_calls_truncated=plan.tool_calls_truncated, tool_calls_preserved=plan.tool_calls_preserved,
        size_original=plan.size_original or t.size, size_after=t.size if size_after is None else size_after,
        tokens_before=fig.tokens, tokens_before_source=fig.source,
        context_window=fig.window if fig.window is not None else window, turns=plan.turn_analysis(),
        estimate_before=estimated_tokens(t) if not t.empty else None)


def figure_before(target, t, measured, window):
    from occd.openclaw.figure import file_figure, rewrite_marks, session_figure

    if target is None or target.path is None:
        return session_figure(transcript=measured, window=window)
    return file_figure(target.path, entry=getattr(target.info, "entry", None), window=window,
                       mark=rewrite_marks(target.agent).get(target.session_id), session_id=target.session_id,
                       transcript=measured)


def tokens_after(path_or_transcript, stats: StripStats | None = None) -> int | None:
    """The figure after the rewrite, like with like: the figure before minus what the chars/4 estimate says the
    rewrite saved (usage stays stale until the next reply, so 'after' is always an estimate). Without `stats`:
    the chars/4 estimate of the new file. Pass the already scanned Transcript to avoid a second read."""
    from occd.transcript import Transcript, estimated_tokens, scan

    try:
        t = path_or_transcript if isinstance(path_or_transcript, Transcript) else scan(path_or_transcript,
                                                                                        prepare_strip=False)
        est = estimated_tokens(t)
    except OccdError:
        return None
    if stats is not None:
        stats.estimate_after = est
        if stats.tokens_before is not None and stats.estimate_before is not None:
            return max(0, stats.tokens_before - max(0, stats.estimate_before - est))
    return est


def record_figure(target, path, tokens: int | None, source: str | None, window: int | None, *, session_id=None,
                  key=None, ledger=None) -> None:
    """An observation of the session's figure right after a manual action (as the daemon records one after
    its strips), so `status`, `list`, `info`, `select` and the daemon's next scan show it at once. Never fails
    the action (the ledger only records)."""
    import logging
    import os

    try:
        own = ledger is None
        if own:
            from occd.ledger import Ledger

            ledger = Ledger.open()
        try:
            st = os.stat(path)
            info = getattr(target, "info", None)
            ledger.record_observations([dict(
                agent=target.agent, session_id=session_id or target.session_id,
                session_key=key if session_id else target.key, path=str(path), era="file",
                compaction_count=(getattr(info, "compaction_count", None) or 0) if not session_id else 0,
                context_tokens=tokens, tokens_source=source if tokens is not None else None,
                context_window=window, size=st.st_size, entry_count=None, last_activity=st.st_mtime)])
        finally:
            if own:
                ledger.close()
    except Exception as e:  # noqa: BLE001 - the action is done; its observation is a refinement
        logging.getLogger("occd.actions").warning("could not record the session's figure: %s", e)


def refuse_malformed(t) -> None:
    if t.malformed:
        m = t.malformed[0]
        raise ParseError(f"Failed to parse session file (line {m.lineno})",
                         f"{len(t.malformed)} malformed line(s) ({m.kind}); the file may be damaged: `occd info` shows "
                         "where; `occd edit --drop-malformed` removes them (they stay in the backup)",
                         details={"lines": [x.lineno for x in t.malformed[:50]]})


def context_window_for(target) -> int | None:
    try:
        from occd.openclaw import context_window_for_session

        return context_window_for_session(target.state_dir, target.agent, target.info)
    except Exception:  # noqa: BLE001 - the window is informative only
        return None


def ensure_crashed(path, now: float | None = None) -> None:
    """For `--crashed-run`: no live lock (ensure_idle checks it) and no change for CRASHED_RUN_IDLE_S, so the
    unanswered call is a crashed run's, not a running one's (the age is not skipped by --force)."""
    from occd.cleaner.plan import CRASHED_RUN_IDLE_S

    now = time.time() if now is None else now
    age = now - path.stat().st_mtime
    if age < CRASHED_RUN_IDLE_S:
        raise BusyError(f"Session '{path.stem}' may still be running",
                        f"it changed {age:.0f}s ago; a run counts as crashed after {CRASHED_RUN_IDLE_S // 60} minutes "
                        "without a change and without a live lock")


def edit_session(settings, *, agent=None, ref=None, preset=None, force=False, drop_malformed=False,
                 dry_run=False, trigger="manual", policy=None, reason=None, ledger=None,
                 now: float | None = None, target=None, crashed_run: bool = False, strip=None,
                 details: dict | None = None) -> EditResult:
    """`strip`: (name, PresetConfig) instead of a preset name (the daemon's strip to a target); `details`:
    recorded with the action (the daemon's prediction, for the savings view)."""
    from occd.config import resolve_preset
    from occd.transcript.scan import open_transcript

    name, p = strip if strip is not None else resolve_preset(settings, preset)
    target = target or resolve_target(settings, agent, ref, action="edit")
    kind = "strip" if trigger == "auto" else "edit"  # automatic edits are "strip" actions (breaker, history)
    path = target.path
    if not dry_run:  # also when the daemon hands its own Target in
        check_writable_path(target.store, target.info, path)
    t0 = time.monotonic()
    lock = contextlib.nullcontext() if dry_run else session_lock(path)
    try:
        with lock, open_transcript(path, follow_symlinks=dry_run) as src:
            return _edit_locked(settings, target, src, name=name, p=p, kind=kind, force=force,
                                drop_malformed=drop_malformed, dry_run=dry_run, trigger=trigger, policy=policy,
                                reason=reason, ledger=ledger, now=now, t0=t0, crashed_run=crashed_run,
                                details=details)
    except BusyError as e:  # a refused dry run writes nothing either (record_action skips it)
        record_action(kind, target, outcome="deferred", trigger=trigger, policy=policy, reason=reason,
                      error=e.message, dry_run=dry_run, ledger=ledger)
        raise
    except OccdError as e:
        record_action(kind, target, outcome="failed", trigger=trigger, policy=policy, reason=reason,
                      error=e.message, dry_run=dry_run, ledger=ledger)
        raise


def _edit_locked(settings, target, src, *, name, p, kind, force, drop_malformed, dry_run, trigger, policy, reason,
                 ledger, now, t0, crashed_run=False, details=None) -> EditResult:
    """The edit under occd's session lock, reading only `src` (the file opened once: the rewrite copies the
    very inode that was scanned, whatever happens to the name meanwhile)."""
    from occd.cleaner import plan_strip
    from occd.transcript import scan

    path = target.path
    if not dry_run or crashed_run:
        ensure_idle(path, settings.idle_seconds, force, now)
    if crashed_run:
        ensure_crashed(path, now)
    t = scan(path, src=src)
    check_header(t, target.session_id, unindexed=getattr(target.info, "unindexed", False))
    if not drop_malformed:
        refuse_malformed(t)
    plan = plan_strip(t, p.keep_turns_with_tools, p.truncate_percent, crashed_run=crashed_run,
                      keep_results=p.keep_tool_results)
    window = context_window_for(target)
    stats = stats_from(plan, t, window=window, target=target)
    dropping = bool(drop_malformed and t.malformed)
    edits = plan.transforms()
    if dropping:  # children of a dropped line hang on its parent (or the edit is refused): the chain stays whole
        from occd.transcript.dropped import reparent_for_dropped

        edits = reparent_for_dropped(t, src, edits)
    if not plan.changed and not dropping:
        stats.tokens_after_estimate = stats.tokens_before
        stats.estimate_after = stats.estimate_before
        res = EditResult(target.session_id, path, name, False, None, stats, dry_run=dry_run)
        record_action(kind, target, outcome="skipped", trigger=trigger,
                      policy=policy, reason=reason or "nothing to strip", before=stats.to_json(),
                      dry_run=dry_run, ledger=ledger)
        return res
    if dry_run:
        buf_size, new_t = rewrite_dry(t, plan, drop_malformed, src=src, edits=edits)
        stats.size_after = buf_size
        stats.tokens_after_estimate = tokens_after(new_t, stats)
        res = EditResult(target.session_id, path, name, True, None, stats, dry_run=True)
        record_action(kind, target, outcome="ok", trigger=trigger, policy=policy, reason=reason,
                      before={"size": t.size}, after=stats.to_json(), dry_run=True, ledger=ledger)
        return res
    from occd.transcript import rewrite

    scanned: dict = {}
    backup, pruned = replace_with_backup(
        path, lambda fh: rewrite(t, fh, remove=plan.remove, edits=edits, drop_malformed=drop_malformed,
                                 src=src),
        t.stat, settings.backups_keep, verify=t, scanned=scanned)
    stats.size_after = path.stat().st_size
    stats.tokens_after_estimate = tokens_after(scanned.get("new") or path, stats)
    if trigger != "auto":  # the daemon records its own (jobs.apply), with its scan cache
        record_figure(target, path, stats.tokens_after_estimate, "estimate", stats.context_window, ledger=ledger)
    res = EditResult(target.session_id, path, name, True, backup, stats, pruned_backups=pruned,
                     dropped_malformed=[m.lineno for m in t.malformed] if drop_malformed else [])
    record_action(kind, target, outcome="ok", trigger=trigger, policy=policy, reason=reason,
                  before={"size": stats.size_original, "messages": stats.messages_original,
                          "toolCalls": stats.tool_calls_original, "tokens": stats.tokens_before,
                          "tokensSource": stats.tokens_before_source, **(details or {})},
                  after=stats.to_json(), backup_path=backup, pruned=pruned,
                  duration_ms=(time.monotonic() - t0) * 1000, ledger=ledger)
    return res


def rewrite_dry(t, plan, drop_malformed=False, src=None, edits=None):
    """(size, scanned Transcript) of what the rewrite would write, in memory, without writing anything."""
    import io

    from occd.transcript import rewrite
    from occd.transcript.scan import scan_stream

    buf = io.BytesIO()
    rewrite(t, buf, remove=plan.remove, edits=plan.transforms() if edits is None else edits,
            drop_malformed=drop_malformed, src=src)
    n = buf.tell()
    buf.seek(0)
    return n, scan_stream(buf)
