"""`occd restore`: put a session back to its newest backup. The current file becomes a backup first, so a
restore can itself be undone by restoring again."""

from __future__ import annotations

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


def restore_session(settings, *, agent=None, ref=None, force=False, trigger="manual", ledger=None,
                    now: float | None = None, backup: int | None = None) -> RestoreResult:
    """Restore the newest backup, or backup number `backup` (`occd backups` lists them)."""
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

        def write(fh):
            src_fh.seek(0)
            shutil.copyfileobj(src_fh, fh, 1 << 20)

        # Backups are earlier versions occd itself wrote or replaced; restore them as they are (no invariant
        # rewrite), so a restore is exact. The replaced file becomes the newest backup.
        backup_path, pruned = replace_with_backup(path, write, expect, max(settings.backups_keep, 2), verify=None)
    except BusyError as e:
        record_action("restore", target, outcome="deferred", trigger=trigger, error=e.message, ledger=ledger)
        raise
    except OccdError as e:
        record_action("restore", target, outcome="failed", trigger=trigger, error=e.message, ledger=ledger)
        raise
    finally:
        lock.__exit__(None, None, None)
        src_fh.close()
    res = RestoreResult(target.session_id, path, source.path, backup_path, size_before, path.stat().st_size)
    _record_restored_figure(target, path, ledger)
    record_action("restore", target, outcome="ok", trigger=trigger, before={"size": size_before},
                  after={"size": res.size_after, "restoredFrom": str(source.path)}, backup_path=backup_path,
                  pruned=pruned, duration_ms=(time.monotonic() - t0) * 1000, ledger=ledger)
    return res


def _record_restored_figure(target, path, ledger) -> None:
    """The restored file's own figure as an observation (its usage measured it; any earlier post-strip
    estimate no longer applies), so every command shows it at once."""
    from occd.actions.edit import context_window_for, record_figure
    from occd.openclaw.figure import file_figure

    window = context_window_for(target)
    try:
        fig = file_figure(path, entry=getattr(target.info, "entry", None), window=window, session_id=target.session_id)
    except OSError:
        return
    record_figure(target, path, fig.tokens, fig.source, fig.window, ledger=ledger)
