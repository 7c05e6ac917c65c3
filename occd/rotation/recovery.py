"""Resuming rotations that were cut off (a crash, a kill, a deferral), as the daemon does when it starts and on
each cycle. The rules (see occd.rotation.machine): PENDING starts over; ARCHIVING checks the archive and redoes
it when it is not complete; ARCHIVED creates the new session (each sub-step skipped when already done);
INJECTED checks that the index points to the new session and that its file is valid. A rotation that another
occd process is driving right now (its per-key lock is held) is left alone.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from occd.errors import BusyError, OccdError

log = logging.getLogger("occd.rotation")


def _pre_reset_bytes(store, info) -> bytes:
    """A database-era transcript as it was before its latest reset marker, back to the reset before that (what
    the seed is built from once the rotation's reset is done); the whole transcript when it has no marker."""
    hist = store.read_history(info)
    return b"".join(hist) if hist else b"".join(store.read_lines(info))


def resume_one(settings, led, row: dict, *, state_dir: Path, gateway=None, now: float | None = None) -> dict:
    from occd.rotation.rotate import build_plan
    from occd.openclaw import open_store
    from occd.rotation.machine import FileRotation, KeyLock

    now = time.time() if now is None else now
    agent, key, rid = row["agent_id"], row["session_key"], row["id"]
    trigger = row.get("trigger") or "auto"
    policy = (row.get("details") or {}).get("policy")
    with KeyLock(agent, key):
        row = led.rotation_get(rid)
        if row["state"] not in ("PENDING", "ARCHIVING", "ARCHIVED", "INJECTED"):
            return {"rotationId": rid, "state": row["state"], "resumed": False}
        led.rotation_upsert(rid, now=now)  # `updated`: someone is on it
        store = open_store(state_dir, agent)
        if row.get("era") == "db":
            from occd.openclaw.gateway import Gateway
            from occd.rotation.db import drive_db

            plan = None
            details = row.get("details") or {}
            if not details.get("seedSent"):
                info = store.resolve(key)
                src = _pre_reset_bytes(store, info) if row["state"] in ("ARCHIVED", "INJECTED") else None
                plan = build_plan(settings, state_dir, agent, store, info, now=now,
                                  budget_percent=row.get("seed_budget_percent"), reason=row.get("reason") or "resumed",
                                  archive=row.get("archive_path"), source=src)
            return drive_db(settings, led, rid, plan, gateway or Gateway(state_dir), trigger=trigger, policy=policy,
                            state_dir=state_dir)
        fr = FileRotation(led, rid)
        from occd.actions.common import session_lock

        with session_lock(Path(row["old_path"])):
            return _resume_file(settings, led, fr, row, store, state_dir=state_dir, agent=agent, key=key, rid=rid,
                                now=now, trigger=trigger, policy=policy)


def _resume_file(settings, led, fr, row, store, *, state_dir, agent, key, rid, now, trigger, policy) -> dict:
    from occd.rotation.rotate import build_plan, drive_file
    from occd.rotation.machine import file_stat

    plan = {"agent": agent, "sessionKey": key, "sessionId": row["old_session_id"],
            "newSessionId": row["new_session_id"], "oldPath": row["old_path"], "newPath": row["new_path"],
            "reason": row.get("reason") or "resumed", "compactions": row.get("compactions_before"),
            "seed": (row.get("details") or {}).get("seed") or {"tokens": row.get("seed_tokens")}, "_lines": None}
    if row["state"] != "INJECTED" and not fr.switched():
        # before the switch: the old transcript is still the session; start from what it holds now
        old = Path(row["old_path"])
        if not old.exists() and fr.held_path.exists():
            fr._give_back(fr.held_path)  # cut off while a switch was being undone
        if not old.exists():
            fr.abort("the old transcript vanished before the switch")
            raise OccdError(f"The transcript {old} of '{key}' vanished during the rotation",
                            "see `occd status --rotations`", code="ROTATION_FAILED")
        from occd.openclaw import transcript_lock

        lock = transcript_lock(old)
        if lock is not None and getattr(lock, "alive", False):
            raise BusyError(f"Session '{key}' is running", "the rotation is resumed when the agent is idle")
        info = store.resolve(row["old_session_id"])
        full = build_plan(settings, state_dir, agent, store, info, now=now,
                          budget_percent=row.get("seed_budget_percent"), reason=plan["reason"],
                          new_id=row["new_session_id"], archive=row.get("archive_path"))
        plan.update(_lines=full["_lines"], seed=full["seed"])
        fr.details["oldStat"] = file_stat(old)
        fr.details["seed"] = full["seed"]
        led.rotation_upsert(rid, details=fr.details, seed_tokens=full["seed"]["tokens"], now=now)
    log.info("resuming rotation %s of %s from %s", rid, key, row["state"])
    return drive_file(settings, led, rid, plan, trigger=trigger, policy=policy)


def resume_all(settings, led, *, state_dir: Path, gateway=None, now: float | None = None) -> dict:
    """Resume every unfinished rotation; never raises. Returns counts and per-rotation outcomes."""
    out = {"resumed": 0, "deferred": 0, "failed": 0, "skipped": 0, "rotations": []}
    for row in led.unfinished_rotations():
        try:
            res = resume_one(settings, led, row, state_dir=state_dir, gateway=gateway, now=now)
            if res.get("resumed") is False:
                out["skipped"] += 1
            else:
                out["resumed"] += 1
            out["rotations"].append({"rotationId": row["id"], "outcome": "ok", "state": res.get("state")})
        except BusyError as e:
            out["deferred"] += 1
            out["rotations"].append({"rotationId": row["id"], "outcome": "deferred", "error": e.message})
        except OccdError as e:
            out["failed"] += 1
            log.warning("rotation %s of %s could not be resumed: %s", row["id"], row["session_key"], e.message)
            out["rotations"].append({"rotationId": row["id"], "outcome": "failed", "error": e.message})
    return out


def resume_at_start(ctx, now: float) -> None:
    """The daemon's start (and `run --once`): resume_all, said in the log when there was anything; never raises."""
    try:
        res = resume_all(ctx.settings, ctx.ledger, state_dir=ctx.state_dir, now=now)
    except Exception as e:  # noqa: BLE001 - the daemon starts anyway; the next start tries again
        log.error("resuming unfinished rotations failed: %s", e)
        log.debug("traceback", exc_info=True)
        return
    if any(res.get(k) for k in ("resumed", "deferred", "failed")):
        log.info("unfinished rotations: %s resumed, %s deferred, %s failed", res.get("resumed"),
                 res.get("deferred"), res.get("failed"))
