"""`occd restore SESSION --backup N -o FILE`: a backup written to a new file, nothing else touched.

The way back to an archived session's backups (a session stripped and then rotated: its key now names the new
session, which a restore in place must never overwrite), and a way to look at any backup beside the live
session. The copy is verified (size, lines, header) under a temp name, then linked to FILE, which must not
exist: an existing file is never replaced.
"""

from __future__ import annotations

import os
from pathlib import Path

from occd.errors import OccdError, UsageError, WriteError


def backups_of(settings, agent: str | None, ref: str):
    """(agent id, session info, its backups oldest first) for a live or archived session."""
    from occd.actions import backups
    from occd.actions.common import open_agent_store, resolve_session

    state_dir, aid, store = open_agent_store(settings, agent, ref)
    if getattr(store, "era", "file") != "file":
        from occd.actions.common import db_era_error

        raise db_era_error("restore", aid, ref if ref.startswith("agent:") else None)
    info = resolve_session(store, ref, state_dir, aid, command="restore", include_archived=True)
    where = store.sessions_dir / Path(info.path).name if getattr(info, "archived", False) else Path(info.path)
    found = [b for b in backups.list_backups(where) if b.path.stat().st_size > 0]
    return aid, info, found


def restore_to_file(settings, *, agent: str | None = None, ref: str, output: str | os.PathLike,
                    backup: int | None = None) -> dict:
    from occd.actions.common import record_action
    from occd.transcript.archive import copy_verified, header_id
    from occd.transcript.rewrite import fsync_dir

    out = Path(output).expanduser()
    if out.exists() or out.is_symlink():
        raise UsageError(f"{out} exists; restore -o writes a new file and never replaces one",
                         "name a file that does not exist yet")
    if not out.parent.is_dir():
        raise UsageError(f"Folder {out.parent} does not exist", "create it or name another file")
    aid, info, found = backups_of(settings, agent, ref)
    if not found:
        raise OccdError(f"No backup found for session '{info.session_id}'", "the session was never edited by occd",
                        code="NO_BACKUP")
    source = found[-1] if backup is None else next((b for b in found if b.number == backup), None)
    if source is None:
        raise OccdError(f"No backup {backup} for session '{info.session_id}'",
                        "backups: " + ", ".join(str(b.number) for b in found) + f" (`occd backups {ref}`)",
                        code="NO_BACKUP")
    staged = out.with_name(f".{out.name}.occd-restore")
    try:
        copy_verified(source.path, staged, header_id(source.path))
        try:
            os.link(staged, out)  # fails if FILE appeared meanwhile: never replaced
        except FileExistsError:
            raise UsageError(f"{out} exists; restore -o writes a new file and never replaces one",
                             "name a file that does not exist yet") from None
        except OSError as e:
            raise WriteError(f"Cannot write {out}", f"{e.strerror or e}; nothing was changed") from None
        fsync_dir(out.parent)
    finally:
        staged.unlink(missing_ok=True)
    size = out.stat().st_size
    record_action("restore", None, outcome="ok", agent=aid, session_id=info.session_id,
                  after={"size": size, "restoredFrom": str(source.path), "output": str(out)})
    return {"sessionId": info.session_id, "archived": bool(getattr(info, "archived", False)),
            "backupNumber": source.number, "restoredFrom": str(source.path), "output": str(out), "size": size}


def archived_hint(ref: str) -> str:
    return (f"`occd backups {ref}` lists its backups; `occd restore {ref} --backup N -o FILE` writes one to a new "
            "file (the key's live session is left as it is)")
