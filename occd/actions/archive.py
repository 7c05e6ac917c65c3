"""Archiving a file-era transcript into `sessions/archive/` (the folder `occd list --archived` reads).

An archive is always complete before the original name goes: a hard link under the archive name (same
filesystem: the very same bytes, O(1), no disk space needed) or, where links are impossible, a verified copy
(temp file in the archive folder, fsync, check, rename, fsync the folder). The original is removed only
afterwards, by the caller, once nothing points at it any more. "Verified" means: the copy's first and last lines are valid JSON, it ends with a newline, its header id
is the source's, and it has the source's size and line count. A copy that fails any of these is deleted and the
source is left alone, so a full disk or a crash never costs a byte of the transcript.
"""

from __future__ import annotations

import time
from pathlib import Path

from occd.errors import BusyError, OccdError
from occd.transcript.archive import (  # noqa: F401 - the file-level primitives, one floor lower; names kept here
    ARCHIVE_DIR,
    archive_file,
    archive_path_for,
    copy_verified,
    count_lines,
    header_id,
    same_file,
    verify_against,
    verify_copy,
)


def archive_session(settings, *, agent: str | None = None, ref: str | None = None, trigger: str = "manual",
                    policy: str | None = None, reason: str | None = None, force: bool = False, dry_run: bool = False,
                    ledger=None, now: float | None = None) -> dict:
    """Archive a whole session: its transcript moves to sessions/archive/ (verified copy, then the index entry
    is removed, then the original), and the ledger records it. For sessions nobody continues (the idle-archive
    policy); a rotation archives the old transcript through occd.rotation instead, keeping the key."""
    from occd.actions.common import ensure_idle, record_action, resolve_target
    from occd.openclaw import update_index

    now = time.time() if now is None else now
    from occd.openclaw import load_index

    t = resolve_target(settings, agent, ref, action="archive")
    path = t.path
    _, warnings = load_index(path.parent)
    if warnings:  # the session may be indexed after all: archiving it would leave the key without a transcript
        raise OccdError(f"sessions.json is damaged: {warnings[0]}", "fix or restore it first (openclaw doctor); "
                        "nothing was changed", code="INDEX_DAMAGED")
    dst = archive_path_for(path)
    result = {"success": True, "mode": "archive", "agent": t.agent, "sessionId": t.session_id, "sessionKey": t.key,
              "path": str(path), "archivePath": str(dst), "dryRun": dry_run}
    if dry_run:
        return result
    from occd.actions.common import session_lock

    with session_lock(path):
        out = _archive_locked(settings, t, path, dst, result, trigger=trigger, policy=policy, reason=reason,
                              force=force, ledger=ledger, now=now)
    from occd.openclaw.fence import absorb_strays

    # the very last step: lines a writer appended to the old name after the fence go to the end of the archive
    # (a new headerless file there would otherwise hold them, indexed by nothing)
    absorb_strays(path, dst)
    return out


def _archive_locked(settings, t, path: Path, dst: Path, result: dict, *, trigger, policy, reason, force, ledger,
                    now) -> dict:
    from occd.actions.common import ensure_idle, record_action, record_archive_fingerprint
    from occd.openclaw import update_index
    from occd.openclaw.fence import file_stat, give_back, release, take_name, writer_seen

    ensure_idle(path, settings.idle_seconds, force, now)
    hid = header_id(path)
    if hid is not None and hid != t.session_id:
        raise OccdError(f"Refusing to archive {path}: its header names session {hid!r}, not {t.session_id!r}",
                        "the file does not belong to this session; check sessions.json", code="UNSAFE_PATH")
    planned = file_stat(path)
    archived_stat, _how = archive_file(path, dst, t.session_id)
    try:
        why = writer_seen(path, planned)
        if why:  # a run started while the archive was made: nothing changed yet but the spare archive copy
            raise BusyError(f"Session '{t.key or t.session_id}' became active while it was being archived ({why})",
                            "nothing was changed; it is archived when it is idle again")
        entry: dict = {}
        if t.key:
            def drop(index: dict) -> dict:
                e = index.get(t.key)
                if isinstance(e, dict) and e.get("sessionId") == t.session_id:
                    entry["e"] = index.pop(t.key)
                return index

            update_index(path.parent, drop, done=lambda idx: (idx.get(t.key) or {}).get("sessionId") != t.session_id)

        def revert(held: Path | None) -> None:
            # a run started on the session meanwhile: the key and the file (with every line) come back
            if entry:
                def back(index: dict) -> dict:
                    if t.key not in index:
                        index[t.key] = entry["e"]
                    return index

                update_index(path.parent, back, done=lambda idx: t.key in idx)
            if held is not None:
                give_back(held, path)
            raise BusyError(f"Session '{t.key or t.session_id}' was written to while it was being archived",
                            "nothing was lost; it is archived when it is idle again")

        held = take_name(path, planned, revert)
        release(path, held, dst, t.session_id, archived_stat)
    except BaseException:
        if path.exists():  # the original is still there: the archive copy is a spare, not a move
            dst.unlink(missing_ok=True)
        raise
    record_action("archive", t, outcome="ok", trigger=trigger, policy=policy, reason=reason,
                  after={"archivePath": str(dst)}, ledger=ledger)
    try:
        if ledger is not None:
            ledger.mark_session_archived(t.agent, t.session_id, str(dst), now=now)
            record_archive_fingerprint(ledger, t.agent, t.session_id, dst)
    except Exception:  # noqa: BLE001 - the move is done; the ledger row is informational
        pass
    return result
