"""`occd restore`: put a session back to its newest backup. The current file becomes a backup first, so a
restore can itself be undone by restoring again."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time

from occd.actions import backups
from occd.actions.common import ensure_idle, record_action, replace_with_backup, resolve_target, session_lock
from occd.actions.results import RestoreResult
from occd.errors import BusyError, OccdError


def _nonempty(p) -> bool:
    try:
        return os.path.islink(p) or p.stat().st_size > 0  # a symlink is kept in the list: refused, not skipped
    except OSError:
        return False


def open_backup(backup_path, live_path, session_id: str):
    """The backup opened for reading, checked to be what a restore may put back: not a symbolic link (never
    followed: O_NOFOLLOW), a regular file of the live file's owner, and a transcript of this session (its
    header's id). The bytes are then read from this very descriptor. OccdError otherwise."""
    from occd.transcript import jsontext

    def refuse(why: str):
        raise OccdError(f"Backup {backup_path.name} {why}; it was not restored",
                        "check the sessions folder (`occd backups` lists the backups); restore another with --backup N",
                        code="BAD_BACKUP")

    try:
        fd = os.open(backup_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if os.path.islink(backup_path):
            refuse("is a symbolic link")
        refuse(f"cannot be read ({e.strerror})")
    fh = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            refuse("is not a regular file")
        if st.st_uid != os.stat(live_path).st_uid:
            refuse("belongs to another user")
        try:
            h = jsontext.loads(fh.readline(1 << 20))
        except ValueError:
            h = None
        if not isinstance(h, dict) or h.get("type") != "session" or h.get("id") != session_id:
            refuse(f"is not a transcript of session {session_id}")
        fh.seek(0)
        return fh
    except BaseException:
        fh.close()
        raise


def _entry_keys(path) -> list:
    """Each line's identity in file order: the entry id, else (no id: old formats, the header) the raw line."""
    from occd.transcript import jsontext

    out = []
    if hasattr(path, "read"):  # an open backup (restore reads the descriptor it checked, never the path again)
        path.seek(0)
        fh = contextlib.nullcontext(path)
    else:
        fh = open(path, "rb")
    with fh as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                obj = jsontext.loads(line)
            except ValueError:
                out.append((line.rstrip(b"\r\n"), False))
                continue
            if not isinstance(obj, dict):
                out.append((line.rstrip(b"\r\n"), False))
                continue
            msg = obj.get("message") if isinstance(obj.get("message"), dict) else {}
            key = obj.get("id") if isinstance(obj.get("id"), str) else line.rstrip(b"\r\n")
            out.append((key, obj.get("type") == "message" and msg.get("role") == "user"))
    return out


def newer_entries(current, older) -> tuple[int, int]:
    """(entries, user turns) the current file has that `older` (a backup) does not and that come after the
    last entry the two share: what OpenClaw appended since that backup was the live file (OpenClaw only
    appends), which restoring it would drop. Entries a strip removed are not counted: they are older."""
    have = {k for k, _ in _entry_keys(older)}
    cur = _entry_keys(current)
    last = max((i for i, (k, _) in enumerate(cur) if k in have), default=-1)
    tail = [(k, user) for k, user in cur[last + 1:] if k not in have]
    return len(tail), sum(1 for _, user in tail if user)


def restore_session(settings, *, agent=None, ref=None, force=False, trigger="manual", ledger=None,
                    now: float | None = None, backup: int | None = None, discard_newer: bool = False) -> RestoreResult:
    """Restore the newest backup, or backup number `backup` (`occd backups` lists them). A backup older than
    entries appended since is refused (NEWER_ENTRIES) unless `discard_newer`: then the current file is kept as
    a pinned backup (never pruned) before the backup replaces it."""
    target = resolve_target(settings, agent, ref, action="restore")
    path = target.path
    # (an empty backup can only be the name a copy-mode backup reserved before a crash: never restored)
    found = [b for b in backups.list_backups(path) if _nonempty(b.path)]
    if not found:
        raise OccdError(f"No backup found for session '{target.session_id}'",
                        "the session was never edited by occd", code="NO_BACKUP")
    source = found[-1]
    if backup is not None:
        source = next((b for b in found if b.number == backup), None)
        if source is None:
            raise OccdError(f"No backup {backup} for session '{target.session_id}'",
                            "backups: " + ", ".join(str(b.number) for b in found) + " (`occd backups SESSION`)",
                            code="NO_BACKUP")
    t0 = time.monotonic()
    size_before = path.stat().st_size
    src_fh = open_backup(source.path, path, target.session_id)
    try:
        lock = session_lock(path)
        lock.__enter__()
    except BusyError as e:
        src_fh.close()
        record_action("restore", target, outcome="deferred", trigger=trigger, error=e.message, ledger=ledger)
        raise
    try:
        ensure_idle(path, settings.idle_seconds, force, now)
        from occd.transcript.model import file_stat

        expect = file_stat(path)
        figure = _current_figure(target, path)
        entries, turns = newer_entries(path, src_fh)
        if entries and not discard_newer:
            raise OccdError(
                f"Backup {source.number} is older than {turns} turn(s) ({entries} entries) added to session "
                f"'{target.session_id}' since; restoring it would drop them",
                f"`occd restore {ref or target.session_id} --backup {source.number} --discard-newer` keeps the current "
                "file as a pinned backup (never pruned) first; `occd clone` copies a session instead",
                code="NEWER_ENTRIES", details={"entries": entries, "turns": turns, "backup": source.number})
        pin = bool(entries)

        def write(fh):
            src_fh.seek(0)
            shutil.copyfileobj(src_fh, fh, 1 << 20)

        # Backups are earlier versions occd itself wrote or replaced; restore them as they are (no invariant
        # rewrite), so a restore is exact. The replaced file becomes the newest backup.
        backup_path, pruned = replace_with_backup(path, write, expect, max(settings.backups_keep, 2), verify=None,
                                                  pin=pin)
    except BusyError as e:
        record_action("restore", target, outcome="deferred", trigger=trigger, error=e.message, ledger=ledger)
        raise
    except OccdError as e:
        record_action("restore", target, outcome="failed", trigger=trigger, error=e.message, ledger=ledger)
        raise
    finally:
        lock.__exit__(None, None, None)
        src_fh.close()
    res = RestoreResult(target.session_id, path, source.path, backup_path, size_before, path.stat().st_size,
                        discarded_entries=entries, discarded_turns=turns, pinned=pin)
    _record_restored_figure(target, path, source.path, ledger)
    record_action("restore", target, outcome="ok", trigger=trigger,
                  before={"size": size_before, **figure, "newerEntries": entries, "newerTurns": turns},
                  after={"size": res.size_after, "restoredFrom": str(source.path), "pinnedBackup": pin,
                         "undoes": _undone(target, source.path, ledger)},
                  backup_path=backup_path, pruned=pruned, duration_ms=(time.monotonic() - t0) * 1000, ledger=ledger)
    return res


def _current_figure(target, path) -> dict:
    """The figure the file being replaced has now (what every command shows for it): kept with the restore,
    so restoring that backup later shows the same figure (a stripped file's usage is stale: an estimate)."""
    from occd.actions.edit import context_window_for
    from occd.openclaw.figure import file_figure, rewrite_marks

    try:
        fig = file_figure(path, entry=getattr(target.info, "entry", None), window=context_window_for(target),
                          mark=rewrite_marks(target.agent).get(target.session_id), session_id=target.session_id)
    except OSError:
        return {}
    return {"tokens": fig.tokens, "tokensSource": fig.source}


def _undone(target, backup_path, ledger) -> list[int]:
    """The ledger ids of the edits and strips this restore takes back: the one that made the backup put back and
    every later one of the session (their savings are withdrawn, occd.policy.savings). [] when unknown."""
    own = ledger is None
    try:
        if own:
            from occd.ledger import Ledger

            ledger = Ledger.open()
        try:
            made = ledger.action_for_backup(str(backup_path))
            if made is None:
                return []
            rows = ledger.history(agent=target.agent, session=target.session_id, since=made["ts"], limit=10_000)
        finally:
            if own:
                ledger.close()
    except Exception:  # noqa: BLE001 - the restore is done; the withdrawal then falls back to the backup's name
        return []
    return sorted(a["id"] for a in rows if a["kind"] in ("strip", "edit") and a["outcome"] == "ok"
                  and not a["dry_run"] and a["session_id"] == target.session_id
                  and (a["ts"], a["id"]) >= (made["ts"], made["id"]))


def _backup_figure(backup_path, size: int, ledger) -> tuple[int, str] | None:
    """The figure the backup's bytes had when they were the live file: recorded by the action that made the
    backup (an edit's figure before it, a restore's figure of the file it replaced), for that same size."""
    import json

    own = ledger is None
    try:
        if own:
            from occd.ledger import Ledger

            ledger = Ledger.open()
        try:
            row = ledger.action_for_backup(str(backup_path))
        finally:
            if own:
                ledger.close()
    except Exception:  # noqa: BLE001 - the ledger only refines the figure
        return None
    before = (row or {}).get("before") or {}
    if isinstance(before, str):
        before = json.loads(before)
    tokens, source = before.get("tokens"), before.get("tokensSource")
    if before.get("size") != size or not isinstance(tokens, int) or not isinstance(source, str):
        return None
    return tokens, source


def _record_restored_figure(target, path, source_path, ledger) -> None:
    """The restored file's figure as an observation, so every command shows it at once: the figure those bytes
    had when they were the live file when occd knows it (a stripped version's usage predates the strip: its
    figure is the estimate occd made then), else the file's own (its usage measured it)."""
    from occd.actions.edit import context_window_for, record_figure
    from occd.openclaw.figure import ESTIMATE, file_figure

    window = context_window_for(target)
    try:
        size = path.stat().st_size
        known = _backup_figure(source_path, size, ledger)
        if known is not None and known[1] == ESTIMATE:
            record_figure(target, path, known[0], ESTIMATE, window, ledger=ledger)
            return
        fig = file_figure(path, entry=getattr(target.info, "entry", None), window=window, session_id=target.session_id)
    except OSError:
        return
    record_figure(target, path, fig.tokens, fig.source, fig.window, ledger=ledger)
