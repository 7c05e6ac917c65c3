"""`occd rotate`: archive a session that keeps compacting and start a fresh one for the same session key, seeded
with the agent's memory and the last exchanges. The one code path for the CLI and the daemon (occd.jobs.rotate),
and for resuming a rotation that was cut off (occd.rotation.recovery).

File era: occd does every step itself (occd.rotation.machine explains the order that keeps the key valid at
every instant). Database era: through OpenClaw's gateway (occd.rotation.db); occd never writes OpenClaw's
database.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from datetime import date, datetime, timezone
from pathlib import Path

from occd.actions.common import check_writable_path, ensure_idle, open_agent_store, resolve_session, session_lock
from occd.errors import BusyError, OccdError
from occd.policy.cost import record_fields as cost_fields

log = logging.getLogger("occd.rotation")


def _seed_tokens(lines: list[bytes]) -> int:
    """The new session's context as occd counts everywhere else (occd.transcript's estimate of what is sent)."""
    from occd.transcript import estimated_tokens
    from occd.transcript.scan import scan_stream

    return estimated_tokens(scan_stream(io.BytesIO(b"".join(lines))))


def build_plan(settings, state_dir: Path, agent: str, store, info, *, now: float, budget_percent: float | None,
               reason: str, new_id: str | None = None, archive: str | None = None,
               source: Path | bytes | None = None) -> dict:
    """Everything a rotation will do, including the exact content the new session starts with (pure apart
    from reading the old transcript, the memory files and the OpenClaw config)."""
    from occd.openclaw import context_window_for_session, new_session_id, workspace_dir
    from occd.rotation.newsession import read_old, seed_lines
    from occd.rotation.seed import SeedInputs, build_seed, memory_files, rotation_note

    policy = settings.policy_for(agent)
    budget = budget_percent if budget_percent is not None else policy.rotation.seed_budget_percent
    window = context_window_for_session(state_dir, agent, info)
    era = getattr(store, "era", "file")
    now_dt = datetime.fromtimestamp(now, tz=timezone.utc)
    if source is None:
        source = Path(info.path) if era == "file" else b"".join(store.read_lines(info))
    old = read_old(source)
    comp = info.compaction_count or old["compactions"]
    mem, today, yesterday = memory_files(workspace_dir(state_dir, agent), date.fromtimestamp(now))
    plan = {"agent": agent, "era": era, "sessionKey": info.key, "sessionId": info.session_id,
            "contextWindow": window, "seedBudgetPercent": budget, "compactions": comp, "reason": reason,
            "workspace": str(workspace_dir(state_dir, agent)), "modelCall": era == "db",
            "openCall": old.get("openCall", False)}
    if era == "file":
        old_path = Path(info.path)
        new_id = new_id or new_session_id()
        new_path = old_path.parent / f"{new_id}.jsonl"
        from occd.transcript.archive import archive_path_for

        archive = archive or str(archive_path_for(old_path))
        note = rotation_note(info.session_id, comp, archive, now_dt, reason)
        seed = build_seed(SeedInputs(mem, today, yesterday, old["exchanges"], note), window, budget)
        lines = seed_lines(new_id, seed, cwd=old["header"].get("cwd"), parent_session=archive, model=old["model"],
                           now=now_dt)
        plan.update(newSessionId=new_id, oldPath=str(old_path), newPath=str(new_path), archivePath=archive,
                    seed=seed.to_json() | {"tokens": _seed_tokens(lines)},
                    content=[ln.decode("utf-8") for ln in lines], _lines=lines,
                    steps=[f"copy {old_path.name} to {Path(archive).parent}/ and verify it",
                           f"write the new session {new_id} ({len(lines) - 1} entries, ending with an assistant "
                           "message)",
                           f"point {info.key} in sessions.json to it (compactionCount 0, token counters 0)",
                           f"remove {old_path.name} (its verified archive stays: `occd list --archived`)"])
    else:
        # OpenClaw resets the session in place (its own archive: the old entries stay behind a reset marker) and
        # puts MEMORY.md into the system prompt itself: the seed carries the exchanges and the rotation note.
        archive = archive or f"OpenClaw database, session {info.session_id} before its reset at {now_dt:%Y-%m-%d %H:%M} UTC"
        note = rotation_note(info.session_id, comp, archive, now_dt, reason, memory_in_prompt=True)
        seed = build_seed(SeedInputs(None, None, None, old["exchanges"], note), window, budget,
                          include_memory=False)
        text = seed.message_text()
        plan.update(newSessionId=info.session_id, oldPath=None, newPath=None, archivePath=archive,
                    seed=seed.to_json(include_memory=False), content=[text], _message=text,
                    steps=[f"sessions.describe {info.key} (current id and status)",
                           f"sessions.reset {info.key} with expectedSessionId {info.session_id}",
                           "chat.send the seed with deliver:false — this costs one model call",
                           "wait for the seed turn's reply (sessions.describe / chat.history)"])
    return plan


def public(plan: dict) -> dict:
    return {k: v for k, v in plan.items() if not k.startswith("_")}


def _reason(trigger: str, reason: str | None, info) -> str:
    if reason:
        return reason
    if trigger == "manual":
        return "manual rotation"
    return f"{info.compaction_count or 0} compactions"


def rotate_session(settings, *, agent=None, ref=None, dry_run=False, force=False, trigger="manual", policy=None,
                   reason=None, budget_percent=None, ledger=None, now: float | None = None, gateway=None,
                   overhead: int | None = None, cost: dict | None = None) -> dict:
    """Rotate one session (see the module doc). Returns a JSON-able summary; raises BusyError (deferred: retry
    later) or OccdError. `overhead`: the prompt overhead (system prompt, tools) the daemon predicted for the
    session, else it is learned from OpenClaw's last check of the old session (else OpenClaw's typical size):
    the new session's figure is its seed plus that overhead, what its first turn sends. `cost`: the daemon's
    pricing record (occd.jobs.rotate._cost_record), kept with the action so `stats` can price the rotation."""
    from occd.ledger import Ledger

    now = time.time() if now is None else now
    state_dir, aid, store = open_agent_store(settings, agent, ref)
    era = getattr(store, "era", "file")
    if era not in ("file", "db"):
        raise OccdError(f"Agent '{aid}' has sessions OpenClaw has not migrated yet", "run `openclaw doctor --fix` "
                        "first; occd only reads such a state", code="UNSUPPORTED_ERA")
    info = resolve_session(store, ref, state_dir, aid, command="rotate") if ref else store.latest()
    times = _file_times(info) if era == "file" else None  # before occd reads it: an undo gives them back
    if not info.key:
        raise OccdError(f"Session '{info.session_id}' has no session key in the index",
                        "only indexed sessions can be rotated (the key is what continues)", code="NOT_ROTATABLE")
    why = _reason(trigger, reason, info)
    if dry_run:
        plan = build_plan(settings, state_dir, aid, store, info, now=now, budget_percent=budget_percent, reason=why)
        return public(plan) | {"dryRun": True}
    lock = contextlib.nullcontext()
    if era == "file":
        path = Path(info.path)
        check_writable_path(store, info, path)
        if not path.is_file():
            raise OccdError(f"{path} is not a session file", "run `occd list` to see what exists",
                            code="SESSION_NOT_FOUND")
        from occd.transcript.archive import header_id

        hid = header_id(path)
        if hid is not None and hid != info.session_id:
            raise OccdError(f"Refusing to rotate {path}: its header names session {hid!r}, not {info.session_id!r}",
                            "the file does not belong to this session; check sessions.json", code="UNSAFE_PATH")
        lock = session_lock(path)
    own = ledger is None
    try:
        with lock:
            if era == "file":
                ensure_idle(Path(info.path), settings.idle_seconds, force, now)
            led = Ledger.open() if own else ledger
            try:
                res = _rotate_locked(settings, led, state_dir, aid, store, info, era=era, why=why, now=now,
                                     budget_percent=budget_percent, trigger=trigger, policy=policy, gateway=gateway,
                                     times=times, overhead=overhead, cost=cost)
            finally:
                if own:
                    led.close()
        if era == "file" and res.get("archivePath"):
            from occd.rotation.machine import absorb_strays

            # the very last step: lines a writer appended to the old name after the rotation's checks go to the
            # end of the archive (a new headerless file there would otherwise hold them, indexed by nothing)
            absorb_strays(Path(info.path), Path(res["archivePath"]))
    except FileNotFoundError as e:
        # a file occd had just seen is gone: another process moved it meanwhile (another occd with its own
        # OCCD_HOME rotating the same state, or OpenClaw). Every step is fenced and resumable: try again.
        raise vanished(info.key or info.session_id, e) from None
    return res


def _file_times(info) -> list[int] | None:
    """[size, atime_ns, mtime_ns] of a session's transcript, or None."""
    import os

    try:
        st = os.stat(info.path)
    except (OSError, TypeError):
        return None
    return [st.st_size, st.st_atime_ns, st.st_mtime_ns]


def _learned_overhead(info) -> int:
    """The prompt overhead from OpenClaw's last pre-prompt check of the session (occd.policy.budget), else
    OpenClaw's typical size."""
    from occd.policy.budget import (DEFAULT_OVERHEAD_TOKENS, context_messages, estimate_context, learn_overhead,
                                    slim_entry)
    from occd.transcript.jsonl import iter_objects

    status = (getattr(info, "entry", None) or {}).get("contextBudgetStatus")
    if not isinstance(status, dict):
        return DEFAULT_OVERHEAD_TOKENS
    try:
        with open(info.path, "rb") as fh:
            entries = [slim_entry(o) for o in iter_objects(fh)]
        learned = learn_overhead(status, estimate_context(context_messages(entries)))
    except (OSError, TypeError, ValueError):
        learned = None
    return learned if learned is not None else DEFAULT_OVERHEAD_TOKENS


def vanished(what: str, e: FileNotFoundError) -> BusyError:
    name = Path(e.filename).name if e.filename else "a file"
    return BusyError(f"Session '{what}' changed while occd worked on it: {name} vanished (another occd or "
                     "OpenClaw moved it)", "nothing was lost; try again in a moment (`occd status --rotations` "
                     "shows an unfinished rotation, which the daemon resumes)")


def _rotate_locked(settings, led, state_dir, aid, store, info, *, era, why, now, budget_percent, trigger, policy,
                   gateway, times=None, overhead=None, cost=None) -> dict:
    from occd.rotation.machine import KeyLock

    with KeyLock(aid, info.key):
        busy = led.rotations(aid, info.key, states=("PENDING", "ARCHIVING", "ARCHIVED", "INJECTED"), limit=1)
        if busy:
            raise BusyError(f"A rotation of '{info.key}' is already in progress (state {busy[0]['state']})",
                            "the daemon resumes it; see `occd status --rotations`")
        plan = build_plan(settings, state_dir, aid, store, info, now=now, budget_percent=budget_percent,
                          reason=why)
        if plan["openCall"]:
            raise BusyError(f"Session '{info.key}' has a tool call waiting for its result",
                            "a run is in progress; the rotation waits until it ends")
        plan["_cost"] = cost  # the pricing record, kept with the "rotate ok" action (both eras)
        if era == "file":
            plan["promptOverheadTokens"] = overhead if overhead is not None else _learned_overhead(info)
            return _rotate_file(settings, led, plan, trigger=trigger, policy=policy, now=now, times=times)
        from occd.rotation.db import rotate_db

        return rotate_db(settings, led, plan, state_dir=state_dir, trigger=trigger, policy=policy, now=now,
                         gateway=gateway)


def _rotate_file(settings, led, plan: dict, *, trigger: str, policy: str | None, now: float,
                 times: list[int] | None = None) -> dict:
    from occd.rotation.machine import file_stat, maybe_crash

    old_path = Path(plan["oldPath"])
    rid = led.rotation_upsert(agent_id=plan["agent"], session_key=plan["sessionKey"], era="file", trigger=trigger,
                              reason=plan["reason"], old_session_id=plan["sessionId"],
                              new_session_id=plan["newSessionId"], old_path=plan["oldPath"], new_path=plan["newPath"],
                              archive_path=plan["archivePath"], seed_budget_percent=plan["seedBudgetPercent"],
                              seed_tokens=plan["seed"]["tokens"], compactions_before=plan["compactions"],
                              details={"oldStat": file_stat(old_path), "seedEntries": len(plan["_lines"]) - 1,
                                       "seed": plan["seed"], "policy": policy, "oldTimes": times}, now=now)
    maybe_crash("PENDING")
    return drive_file(settings, led, rid, plan, trigger=trigger, policy=policy)


def drive_file(settings, led, rid: int, plan: dict, *, trigger: str, policy: str | None) -> dict:
    """Run (or resume) file-era rotation `rid` to COOLDOWN; records the outcome and notifies."""
    from occd.rotation.machine import FileRotation
    from occd.rotation.newsession import write_new_session
    from occd.rotation.notify import notify

    t0 = time.monotonic()
    mode = (Path(plan["oldPath"]).stat().st_mode & 0o7777) if Path(plan["oldPath"]).exists() else 0o644
    fr = FileRotation(led, rid)
    agent, key, old_id = plan["agent"], plan["sessionKey"], plan["sessionId"]
    try:
        try:
            fr.run(lambda p: write_new_session(p, plan["_lines"], mode),
                   settings.policy_for(agent).rotation.old_session_policy)
        except FileNotFoundError as e:
            raise vanished(key, e) from None
    except BusyError as e:
        led.record_action("rotate", agent, old_id, key, trigger=trigger, policy=policy, reason=plan["reason"],
                          outcome="deferred", error=e.message)
        raise
    except OccdError as e:
        led.rotation_upsert(rid, error=e.message)
        led.record_action("rotate", agent, old_id, key, trigger=trigger, policy=policy, reason=plan["reason"],
                          outcome="failed", error=e.message)
        raise
    row = led.rotation_get(rid)
    archive = None if (row.get("details") or {}).get("archiveDeleted") else row.get("archive_path")
    summary = {"success": True, "mode": "rotate", "rotationId": rid, "agent": agent, "era": "file",
               "sessionKey": key, "oldSessionId": old_id, "newSessionId": plan["newSessionId"],
               "newPath": plan["newPath"], "archivePath": archive, "state": row["state"], "seed": plan["seed"],
               "reason": plan["reason"], "trigger": trigger}
    led.record_action("rotate", agent, old_id, key, trigger=trigger, policy=policy, reason=plan["reason"],
                      outcome="ok", before={"compactions": plan["compactions"], "path": plan["oldPath"],
                                            **cost_fields(plan.get("_cost"))},
                      after={"newSessionId": plan["newSessionId"], "seedTokens": plan["seed"]["tokens"],
                             "archivePath": archive, "rotationId": rid},
                      duration_ms=(time.monotonic() - t0) * 1000)
    _observe_new_session(led, plan)
    try:
        led.mark_session_archived(agent, old_id, archive)
    except Exception:  # noqa: BLE001 - informational
        log.debug("could not mark %s archived", old_id, exc_info=True)
    summary["notified"] = notify(settings, summary, desktop=trigger == "auto")
    fr.absorb_late_strays()  # the very last step: lines a writer appended to the old name go to the archive
    if archive:
        from occd.actions.common import record_archive_fingerprint

        try:
            record_archive_fingerprint(led, agent, old_id, archive)
        except Exception:  # noqa: BLE001 - the first `occd check` records it instead
            log.debug("could not record the fingerprint of %s", archive, exc_info=True)
    return summary


def undo_rotation(settings, *, agent=None, ref=None, ledger=None, force=False, now: float | None = None) -> dict:
    """Put the archived session back under its key while the new one has no turn beyond its seed. The seeded
    session goes to the archive folder in its place (nothing is deleted)."""
    from occd.transcript.archive import copy_verified
    from occd.transcript.rewrite import fsync_dir
    from occd.ledger import Ledger
    from occd.openclaw.fence import absorb_strays, file_stat, take_name
    from occd.openclaw import update_index
    from occd.transcript import scan

    now = time.time() if now is None else now
    state_dir, aid, store = open_agent_store(settings, agent, ref)
    if getattr(store, "era", "file") != "file":
        raise OccdError("Undo is for file-era rotations", "in the database era OpenClaw keeps the old history "
                        "behind its reset marker in its database", code="UNSUPPORTED_ERA")
    if not ref:
        raise OccdError("Which rotation? `occd rotate --undo SESSION` needs the session key or id",
                        "see `occd status --rotations`", code="USAGE")
    own = ledger is None
    led = Ledger.open() if own else ledger
    stack = contextlib.ExitStack()
    try:
        r = _rotation_for(led.rotations(agent=aid, states=("INJECTED", "COOLDOWN"), limit=500), ref)
        details = r.get("details") or {}
        new_path, old_path = Path(r["new_path"]), Path(r["old_path"])
        archive = Path(r["archive_path"]) if r.get("archive_path") else None
        if archive is None or not archive.exists():
            raise OccdError("The archive of the old session is gone (old_session_policy = \"delete\"?)",
                            "nothing to restore", code="NO_ARCHIVE")
        from occd.transcript.archive import no_symlink

        no_symlink(archive.parent)  # the seeded session moves there: never into a symlink's target
        no_symlink(archive, "file")
        lock = session_lock(old_path)
        lock.__enter__()
        stack.callback(lock.__exit__, None, None, None)
        planned_new = file_stat(new_path)  # before the seed is counted: a turn after this shows in the stat
        if new_path.exists():
            t = scan(new_path)
            if len(t.entries) != details.get("seedEntries"):
                raise OccdError(f"Session '{r['new_session_id'][:13]}' already has turns beyond its seed",
                                f"undo is only possible before the first new turn; the old session stays in {archive}",
                                code="UNDO_TOO_LATE")
            # no entry beyond the seed: nothing was appended, so only a live run lock can make it busy
            ensure_idle(new_path, settings.idle_seconds, True, now)
        if not old_path.exists():
            copy_verified(archive, old_path, r["old_session_id"])
            _give_times_back(old_path, details.get("oldTimes"))
        planned_old = file_stat(old_path)
        now_ms = int(now * 1000)
        seeded_entry: dict = {}
        old_entry = details.get("oldEntry")

        def back(index: dict) -> dict:
            e = index.get(r["session_key"])
            if not isinstance(e, dict) or e.get("sessionId") != r["new_session_id"]:
                raise BusyError("The session key changed since the rotation", "nothing was changed")
            seeded_entry["e"] = e
            if isinstance(old_entry, dict) and old_entry.get("sessionId") == r["old_session_id"]:
                index[r["session_key"]] = old_entry  # exactly as it was (tokens, updatedAt, every field)
                return index
            e = dict(e)
            e["sessionId"] = r["old_session_id"]
            if "sessionFile" in e:
                e["sessionFile"] = str(old_path) if Path(str(e["sessionFile"])).is_absolute() else old_path.name
            e["compactionCount"] = r.get("compactions_before") or 0
            e["updatedAt"] = now_ms
            index[r["session_key"]] = e
            return index

        try:
            update_index(old_path.parent, back,
                         done=lambda idx: (idx.get(r["session_key"]) or {}).get("sessionId") == r["old_session_id"])
        except BaseException:
            if archive.exists() and old_path.exists():
                old_path.unlink()  # the copy was only for the switch; the archive still holds it
            raise
        seeded = archive.parent / new_path.name
        if new_path.exists():
            # the seeded session's first turn may be starting right now: its name is taken away behind the same
            # fence as a rotation's (occd.openclaw.fence); a writer → the key goes back to it, every line kept
            held = take_name(new_path, planned_new, lambda h: _undo_revert(r, old_path, new_path, h, seeded_entry,
                                                                            planned_old, archive))
            absorb_strays(new_path, held)
            os.replace(held, seeded)
        archive.unlink()
        fsync_dir(old_path.parent)
        led.rotation_transition(r["id"], "UNDONE", now=now, note="undone: the old session is back under its key")
        led.mark_session_unarchived(aid, r["old_session_id"], str(old_path), now=now)
        led.mark_session_archived(aid, r["new_session_id"], str(archive.parent / new_path.name), now=now)
        from occd.actions.common import record_archive_fingerprint

        record_archive_fingerprint(led, aid, r["new_session_id"], archive.parent / new_path.name)
        undoes = [a["id"] for a in led.history(agent=aid, session=r["old_session_id"], kind="rotate", limit=50)
                  if a["outcome"] == "ok" and not a["dry_run"] and (a.get("after") or {}).get("rotationId") == r["id"]]
        led.record_action("rotate-undo", aid, r["old_session_id"], r["session_key"], outcome="ok",
                          after={"restored": str(old_path), "seededSessionArchived": str(archive.parent / new_path.name),
                                 "rotationId": r["id"], "undoes": undoes})  # its savings are withdrawn
        out = {"success": True, "mode": "rotate-undo", "sessionKey": r["session_key"], "sessionId": r["old_session_id"],
               "path": str(old_path), "rotationId": r["id"], "seededSessionArchivedAt": str(seeded)}
    finally:
        stack.close()
        if own:
            led.close()
    if seeded.exists():
        absorb_strays(new_path, seeded)  # the very last step: lines appended to the seeded name go to its archive
    return out


def _undo_revert(r: dict, old_path: Path, new_path: Path, held: Path | None, seeded_entry: dict, planned_old,
                 archive: Path) -> None:
    """A run wrote to the seeded session while the undo took its name: the key goes back to it, the file (with
    every line) back under its name, and the old session's restored copy goes (its archive holds it) unless
    something wrote to it too (then it stays where it is, unindexed, rather than lose a line)."""
    from occd.openclaw import update_index
    from occd.openclaw.fence import give_back, writer_seen

    def forward(index: dict) -> dict:
        e = index.get(r["session_key"])
        if isinstance(e, dict) and e.get("sessionId") == r["old_session_id"] and "e" in seeded_entry:
            index[r["session_key"]] = seeded_entry["e"]
        return index

    update_index(new_path.parent, forward,
                 done=lambda idx: (idx.get(r["session_key"]) or {}).get("sessionId") != r["old_session_id"])
    if held is not None:
        give_back(held, new_path)
    if archive.exists() and old_path.exists() and not writer_seen(old_path, planned_old):
        old_path.unlink()
    raise BusyError(f"Session '{r['new_session_id'][:13]}' started its first turn during the undo",
                    "nothing was lost; undo is only possible before the first new turn")


def _give_times_back(path: Path, times) -> None:
    """The transcript's access and modification times as they were before the rotation, when the restored
    file is the same size as then (nothing was appended to the archive since)."""
    import os

    try:
        size, atime_ns, mtime_ns = times
        if os.stat(path).st_size == size:
            os.utime(path, ns=(atime_ns, mtime_ns))
    except (TypeError, ValueError, OSError) as e:
        log.debug("could not give %s its times back: %s", path, e)


def _rotation_for(rows: list[dict], ref: str) -> dict:
    """The newest undoable file-era rotation `ref` names: its session key, or its old or new session id in any
    form every command takes (occd.openclaw.ids: the part `status --rotations` shows, a unique part, a prefix)."""
    from occd.openclaw.ids import resolve

    rows = [r for r in rows if r.get("era") == "file"]
    items = [(sid, r) for r in rows for sid in (r.get("new_session_id"), r.get("old_session_id")) if sid]
    try:
        return resolve(items, ref, id_of=lambda x: x[0], key_of=lambda x: x[1].get("session_key"),
                       hint_list="see `occd status --rotations`")[1]
    except OccdError as e:
        if e.code == "AMBIGUOUS_SESSION":
            raise
        raise OccdError(f"No finished rotation to undo for '{ref}'", e.hint, code="NO_ROTATION") from None


def _observe_new_session(led, plan: dict) -> None:
    """The new session's figure as an observation, at once (as after every occd action): the seed's estimate plus
    the prompt overhead its first turn sends with it (a figure comparable with every measured one), labelled an
    estimate until its first reply measures it (occd.openclaw.figure)."""
    try:
        p = Path(plan["newPath"])
        st = p.stat()
        led.record_observations([dict(agent=plan["agent"], session_id=plan["newSessionId"],
                                      session_key=plan["sessionKey"], path=str(p), era="file", compaction_count=0,
                                      context_tokens=plan["seed"]["tokens"] + (plan.get("promptOverheadTokens") or 0),
                                      tokens_source="estimate",
                                      context_window=plan.get("contextWindow"), size=st.st_size, entry_count=None,
                                      last_activity=st.st_mtime)])
    except (OSError, OccdError, KeyError) as e:
        log.warning("could not record the new session's figure: %s", e)
