"""`occd status --rotations`: the rotations the ledger holds, with where their files are now (read-only)."""

from __future__ import annotations

import os


def _open_ledger():
    from occd import paths
    from occd.ledger import Ledger

    if not paths.ledger_path().exists():
        return None
    return Ledger.open(readonly=True)


def _stat_obj(v):
    """The machine's (size, mtime_ns, inode) file identity as an object for people and scripts."""
    if isinstance(v, (list, tuple)) and len(v) == 3:
        return {"size": v[0], "mtimeNs": v[1], "inode": v[2]}
    return v


def rotations(settings, now=None) -> list[dict]:
    led = _open_ledger()
    if led is None:
        return []
    with led:
        rows = led.rotations(limit=100)
    for r in rows:
        d = r.get("details")
        if isinstance(d, dict):
            for k in ("archivedStat", "oldStat", "newStat"):
                if k in d:
                    d[k] = _stat_obj(d[k])
        _where_now(r)
    return rows


def _where_now(r: dict) -> None:
    """Where the rotation's files are now: an undone rotation's archive is gone (the old session is back under
    its key) and the seeded session was archived beside it instead (`seededArchive`); an archive removed since
    is `archiveExists` false, never shown as if it were there."""
    a = r.get("archive_path")
    r["archiveExists"] = bool(a) and os.path.exists(a)
    if r.get("state") == "UNDONE" and a and r.get("new_path"):
        seeded = os.path.join(os.path.dirname(a), os.path.basename(r["new_path"]))
        r["seededArchive"] = seeded if os.path.exists(seeded) else None
