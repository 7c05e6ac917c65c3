"""`occd backups [SESSION]`: the backups occd keeps beside the transcripts (read-only), of live sessions and of
archived ones (a session stripped and then rotated keeps its backups beside where its transcript was)."""

from __future__ import annotations

from pathlib import Path


def list_backups(settings, *, agent: str | None = None, ref: str | None = None) -> dict:
    """One session's backups (ref: live or archived), or every session's of the agent with at least one, newest
    first. An archived session's rows say so (`archived`) and carry the key the ledger saw last."""
    from occd.actions import backups
    from occd.actions.common import open_agent_store, resolve_session

    state_dir, aid, store = open_agent_store(settings, agent, ref)
    if getattr(store, "era", "file") != "file":
        return {"agent": aid, "era": store.era, "backups": [], "totalBytes": 0,
                "note": "database era: OpenClaw keeps the history; occd makes no backups"}
    if ref:
        infos = [resolve_session(store, ref, state_dir, aid, command="backups", include_archived=True)]
    else:
        infos = store.sessions() + store.archived_sessions()
    keys = _archived_keys(aid) if any(getattr(i, "archived", False) for i in infos) else {}
    rows, seen = [], set()
    for info in infos:
        if not getattr(info, "path", None):
            continue
        archived = bool(getattr(info, "archived", False))
        # an archived transcript's backups stay where it lived: beside the live transcripts
        where = store.sessions_dir / Path(info.path).name if archived else Path(info.path)
        for b in reversed(backups.list_backups(where)):
            if b.path in seen:
                continue
            seen.add(b.path)
            try:
                st = b.path.stat()
            except OSError:
                continue
            rows.append({"sessionId": info.session_id, "key": info.key or keys.get(info.session_id),
                         "archived": archived, "number": b.number, "path": str(b.path), "size": st.st_size,
                         "createdAt": st.st_ctime,  # ctime: when the link was made
                         "pinned": b.pinned})  # kept by a restore that discarded newer turns: never pruned
    rows.sort(key=lambda r: r["createdAt"], reverse=True)
    return {"agent": aid, "era": "file", "backups": rows, "totalBytes": sum(r["size"] for r in rows)}


def _archived_keys(agent: str) -> dict[str, str]:
    """An archived session has left the index: its key is what the ledger saw last."""
    from occd import paths

    if not paths.ledger_path().exists():
        return {}
    try:
        from occd.ledger import Ledger

        with Ledger.open(readonly=True) as led:
            return {o["session_id"]: o["session_key"] for o in led.latest_observations(agent, include_archived=True)
                    if o.get("session_key")}
    except Exception:  # noqa: BLE001 - informative only
        return {}
