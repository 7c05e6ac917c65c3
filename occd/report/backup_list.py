"""`occd backups [SESSION]`: the backups occd keeps beside the transcripts (read-only)."""

from __future__ import annotations

from pathlib import Path


def list_backups(settings, *, agent: str | None = None, ref: str | None = None) -> dict:
    """One session's backups (ref), or every session's of the agent with at least one, newest first."""
    from occd.actions import backups
    from occd.actions.common import open_agent_store

    _state, aid, store = open_agent_store(settings, agent, ref)
    if getattr(store, "era", "file") != "file":
        return {"agent": aid, "era": store.era, "backups": [], "totalBytes": 0,
                "note": "database era: OpenClaw keeps the history; occd makes no backups"}
    infos = [store.resolve(ref)] if ref else store.sessions()
    rows = []
    for info in infos:
        if not getattr(info, "path", None):
            continue
        for b in reversed(backups.list_backups(Path(info.path))):
            try:
                st = b.path.stat()
            except OSError:
                continue
            rows.append({"sessionId": info.session_id, "key": info.key, "number": b.number, "path": str(b.path),
                         "size": st.st_size, "createdAt": st.st_ctime})  # ctime: when the link was made
    rows.sort(key=lambda r: r["createdAt"], reverse=True)
    return {"agent": aid, "era": "file", "backups": rows, "totalBytes": sum(r["size"] for r in rows)}
