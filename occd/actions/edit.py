"""`occd edit --strip-tools`: strip old tool calls of a session in place (same session id), after a backup.

Used by the CLI (trigger manual) and by the daemon's apply job (trigger auto, with the policy that fired).
"""

from __future__ import annotations

import time

from occd.actions.common import ensure_idle, record_action, replace_with_backup, resolve_target
from occd.actions.results import EditResult, StripStats
from occd.errors import BusyError, OccdError, ParseError


def stats_from(plan, t, *, window: int | None, size_after: int | None = None, clone: bool = False) -> StripStats:
    from occd.transcript import context_tokens

    ctx = context_tokens(t)
    return StripStats(
        messages_original=plan.messages_original, messages_after=plan.messages_after,
        tool_calls_original=plan.tool_calls_original, tool_calls_removed=plan.tool_calls_removed,
        tool_calls_truncated=plan.tool_calls_truncated, tool_calls_preserved=plan.tool_calls_preserved,
        size_original=plan.size_original or t.size, size_after=t.size if size_after is None else size_after,
        tokens_before=ctx["tokens"] if ctx["source"] != "empty" else None, tokens_before_source=ctx["source"],
        context_window=window, turns=plan.turn_analysis())


def tokens_after(path_or_transcript) -> int | None:
    """chars/4 estimate of what the model is sent from the cleaned file (usage stays stale until the next
    reply, so 'after' is always an estimate). Pass the already scanned Transcript to avoid a second read."""
    from occd.transcript import Transcript, estimated_tokens, scan

    try:
        t = path_or_transcript if isinstance(path_or_transcript, Transcript) else scan(path_or_transcript,
                                                                                        prepare_strip=False)
        return estimated_tokens(t)
    except OccdError:
        return None


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


def edit_session(settings, *, agent=None, ref=None, preset=None, force=False, drop_malformed=False,
                 dry_run=False, trigger="manual", policy=None, reason=None, ledger=None,
                 now: float | None = None, target=None, strip=None, details: dict | None = None) -> EditResult:
    """`strip`: (name, PresetConfig) instead of a preset name (the daemon's strip to a target); `details`:
    recorded with the action (the daemon's prediction, for the savings view)."""
    from occd.cleaner import plan_strip
    from occd.config import resolve_preset
    from occd.transcript import scan

    name, p = strip if strip is not None else resolve_preset(settings, preset)
    target = target or resolve_target(settings, agent, ref, action="edit")
    kind = "strip" if trigger == "auto" else "edit"  # automatic edits are "strip" actions (breaker, history)
    path = target.path
    t0 = time.monotonic()
    try:
        if not dry_run:
            ensure_idle(path, settings.idle_seconds, force, now)
        t = scan(path)
        if not drop_malformed:
            refuse_malformed(t)
        plan = plan_strip(t, p.keep_turns_with_tools, p.truncate_percent)
        window = context_window_for(target)
        stats = stats_from(plan, t, window=window)
        dropping = bool(drop_malformed and t.malformed)
        if not plan.changed and not dropping:
            stats.tokens_after_estimate = stats.tokens_before
            res = EditResult(target.session_id, path, name, False, None, stats, dry_run=dry_run)
            record_action(kind, target, outcome="skipped", trigger=trigger,
                          policy=policy, reason=reason or "nothing to strip", before=stats.to_json(),
                          dry_run=dry_run, ledger=ledger)
            return res
        if dry_run:

            buf_size = rewrite_size(t, plan, drop_malformed)
            stats.size_after = buf_size
            res = EditResult(target.session_id, path, name, True, None, stats, dry_run=True)
            record_action(kind, target, outcome="ok", trigger=trigger, policy=policy, reason=reason,
                          before={"size": t.size}, after=stats.to_json(), dry_run=True, ledger=ledger)
            return res
        from occd.transcript import rewrite

        scanned: dict = {}
        backup, pruned = replace_with_backup(
            path, lambda fh: rewrite(t, fh, remove=plan.remove, edits=plan.transforms(), drop_malformed=drop_malformed),
            t.stat, settings.backups_keep, verify=t, scanned=scanned)
    except BusyError as e:
        record_action(kind, target, outcome="deferred", trigger=trigger, policy=policy, reason=reason,
                      error=e.message, ledger=ledger)
        raise
    except OccdError as e:
        record_action(kind, target, outcome="failed", trigger=trigger, policy=policy, reason=reason,
                      error=e.message, ledger=ledger)
        raise
    stats.size_after = path.stat().st_size
    stats.tokens_after_estimate = tokens_after(scanned.get("new") or path)
    res = EditResult(target.session_id, path, name, True, backup, stats, pruned_backups=pruned,
                     dropped_malformed=[m.lineno for m in t.malformed] if drop_malformed else [])
    record_action(kind, target, outcome="ok", trigger=trigger, policy=policy, reason=reason,
                  before={"size": stats.size_original, "messages": stats.messages_original,
                          "toolCalls": stats.tool_calls_original, "tokens": stats.tokens_before, **(details or {})},
                  after=stats.to_json(), backup_path=backup, pruned=pruned,
                  duration_ms=(time.monotonic() - t0) * 1000, ledger=ledger)
    return res


class _Counter:
    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)
        return len(b)


def rewrite_size(t, plan, drop_malformed=False) -> int:
    """Size the rewrite would have, without writing anything."""
    from occd.transcript import rewrite

    c = _Counter()
    rewrite(t, c, remove=plan.remove, edits=plan.transforms(), drop_malformed=drop_malformed)
    return c.n
