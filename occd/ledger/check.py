"""`occd check [--read-data]`: is everything occd keeps still there and intact?

Every backup and archive the ledger knows (live backups, archived sessions, the archives of finished file-era
rotations) must be present with the size and sha256 recorded when occd made it (rows made before occd recorded
hashes get theirs on the first check, and the report says so). With `read_data` each file is also parsed as a
transcript and held to the file-era invariants occd checks before any rename (occd.transcript.invariants), and its
header must name the session the ledger says it belongs to. The ledger itself: `PRAGMA integrity_check` and
`PRAGMA foreign_key_check`.

Each problem names the artifact (`backup:12`, `archive:34`, `rotation:7`), what is wrong and what to do: restore
from where, or accept the loss with `occd check --forget ID`. Problems are recorded in the ledger and stay open
until a later check passes or the artifact is forgotten (`occd status --check` and `occd doctor` fail meanwhile).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from occd import paths
from occd.errors import OccdError
from occd.ledger.digest import digest_with_prefix

SOURCE = "check"            # problems the cheap form finds (presence, size, hash, the ledger)
SOURCE_DATA = "check-data"  # problems only --read-data finds (the file does not load as the session's transcript)


@dataclass
class Artifact:
    id: str
    kind: str                       # backup | archive | rotation archive
    path: str
    agent: str | None = None
    session_id: str | None = None
    size: int | None = None         # recorded
    sha256: str | None = None       # recorded
    sha256_source: str | None = None
    pk: int | None = None
    table: str | None = None        # backups | sessions | None (nowhere to record a hash)
    status: str = "ok"              # ok | missing | changed | unreadable | recorded
    note: str | None = None
    problems: list[dict] = field(default_factory=list)


def _rotation_archives(led) -> list[dict]:
    """File-era rotations that finished (reached COOLDOWN, not undone) and kept their archive."""
    rows = led._rows("SELECT r.* FROM rotations r WHERE r.era = 'file' AND r.archive_path IS NOT NULL AND "
                     "r.state != 'UNDONE' AND EXISTS (SELECT 1 FROM rotation_transitions t WHERE "
                     "t.rotation_id = r.id AND t.to_state = 'COOLDOWN') ORDER BY r.id")
    from occd.ledger.common import _loads

    return [r for r in rows if not (_loads(r.get("details_json")) or {}).get("archiveDeleted")]


def collect(led) -> list[Artifact]:
    """The artifacts the ledger knows, one per path (a rotation's archive is also its old session's archive),
    leaving out those the user forgot."""
    forgotten = led.forgotten_paths()
    got = led.check_artifacts()
    out: list[Artifact] = []
    seen: set[str] = set()

    def add(a: Artifact) -> None:
        if a.path in seen or a.path in forgotten:
            return
        seen.add(a.path)
        out.append(a)

    for b in got["backups"]:
        add(Artifact(f"backup:{b['id']}", "backup", b["path"], b.get("agent_id"), b.get("session_id"), b.get("size"),
                     b.get("sha256"), b.get("sha256_source"), b["id"], "backups"))
    rot_paths = {r["archive_path"]: r["id"] for r in _rotation_archives(led)}
    for s in got["archives"]:
        if not Path(s["archive_path"]).is_absolute():
            continue  # a description (the database era keeps the old entries in OpenClaw's own database)
        kind = "rotation archive" if s["archive_path"] in rot_paths else "archive"
        add(Artifact(f"archive:{s['id']}", kind, s["archive_path"], s["agent_id"], s["session_id"],
                     s.get("archive_size"), s.get("archive_sha256"), s.get("archive_sha256_source"), s["id"],
                     "sessions"))
    for path, rid in rot_paths.items():
        if Path(path).is_absolute():
            r = next(x for x in _rotation_archives(led) if x["id"] == rid)
            add(Artifact(f"rotation:{rid}", "rotation archive", path, r["agent_id"], r.get("old_session_id")))
    return out


def _restore_hint(a: Artifact) -> str:
    where = (f"copy {paths.display_path(a.path)} back from your own system backups (occd keeps one copy only)")
    if a.kind == "backup" and a.session_id:
        where += f", or use another backup of the session (`occd backups {a.session_id[:8]}`)"
    elif a.session_id:
        where += f"; the session's backups may hold older states (`occd backups {a.session_id[:8]}`)"
    return f"{where}; if it is lost for good, accept it: `occd check --forget {a.id}`"


def _problem(a: Artifact, code: str, message: str, source: str = SOURCE, **details) -> dict:
    return {"source": source, "subject": a.id, "code": code, "severity": "fail", "agent_id": a.agent,
            "session_id": a.session_id, "path": a.path, "message": message, "hint": _restore_hint(a),
            "details": details or None}


def _read_data(a: Artifact) -> list[str]:
    """Why the file does not load as the session's transcript (empty: it does)."""
    from occd.errors import ParseError
    from occd.transcript.invariants import check_invariants
    from occd.transcript.scan import scan

    try:
        t = scan(a.path, check_cycles=False, prepare_strip=False)
    except (ParseError, OccdError) as e:
        return [getattr(e, "message", str(e))]
    except (OSError, ValueError) as e:
        return [f"{type(e).__name__}: {e}"]
    out = check_invariants(t)
    if t.size == 0:
        out.append("the file is empty")
    elif a.session_id and t.session_id and t.session_id != a.session_id:
        out.append(f"its header names session {t.session_id}, not {a.session_id}")
    return out


def verify(led, a: Artifact, read_data: bool) -> int:
    """Check one artifact; fills a.status/a.note/a.problems and records a first hash. Returns bytes read."""
    p = Path(a.path)
    if not p.exists() and not p.is_symlink():
        a.status = "missing"
        a.problems.append(_problem(a, "ARTIFACT_MISSING", f"{a.kind} {a.id} is gone: {paths.display_path(p)}"))
        return 0
    if not p.is_file():
        a.status = "missing"
        a.problems.append(_problem(a, "ARTIFACT_MISSING", f"{a.kind} {a.id} is not a regular file: "
                                   f"{paths.display_path(p)}"))
        return 0
    read_extra = 0
    try:
        size, sha, pre = digest_with_prefix(p, a.size if a.sha256 else None)
    except OSError as e:
        a.status = "unreadable"
        a.problems.append(_problem(a, "ARTIFACT_UNREADABLE", f"{a.kind} {a.id} cannot be read: {e.strerror or e}"))
        return 0
    if a.sha256 is None:
        if a.table is not None:
            setter = led.set_backup_fingerprint if a.table == "backups" else led.set_archive_fingerprint
            setter(a.pk, size, sha, "first-check")
            a.status, a.size, a.sha256, a.sha256_source = "recorded", size, sha, "first-check"
            a.note = ("made before occd recorded hashes: its size and sha256 were recorded now, by this check "
                      "(later checks compare against them)")
        else:
            a.note = "present; no hash recorded for it (only presence is checked)"
    elif size == a.size and sha == a.sha256:
        pass
    elif a.kind != "backup" and a.size is not None and size > a.size and pre == a.sha256:
        # an archive only ever grows at its end (lines occd absorbed after the rotation): the bytes it was made
        # with are intact, and the growth is accepted only as whole JSON lines (else the fingerprint stays)
        why, n = growth_problem(p, a.size, size)
        read_extra = n
        if why is not None:
            a.status = "changed"
            a.problems.append(_problem(a, "ARTIFACT_CHANGED", f"{a.kind} {a.id} grew by {size - a.size} bytes at its "
                                       f"end that are not whole JSON lines ({why}): {paths.display_path(p)}",
                                       recordedSize=a.size, size=size, recordedSha256=a.sha256, sha256=sha))
        else:
            if a.table == "sessions":
                led.set_archive_fingerprint(a.pk, size, sha, a.sha256_source or "creation")
            a.note = f"grew by {size - a.size} bytes at its end (whole JSON lines); the {a.size} bytes recorded are intact"
            a.size, a.sha256 = size, sha
    else:
        a.status = "changed"
        what = (f"size {size} bytes, {a.size} recorded" if size != a.size
                else "same size, different sha256 (bytes changed in place)")
        a.problems.append(_problem(a, "ARTIFACT_CHANGED", f"{a.kind} {a.id} changed since occd made it: {what}: "
                                   f"{paths.display_path(p)}", recordedSize=a.size, size=size,
                                   recordedSha256=a.sha256, sha256=sha))
    if read_data:
        why = _read_data(a)
        if why:
            a.status = "unreadable" if a.status in ("ok", "recorded") else a.status
            a.problems.append(_problem(a, "ARTIFACT_DAMAGED", f"{a.kind} {a.id} does not load as the transcript "
                                       f"of session {a.session_id or '?'}: {'; '.join(why[:3])}", SOURCE_DATA,
                                       invariants=why[:20]))
        return 2 * size + read_extra
    return size + read_extra


MAX_GROWTH = 32 << 20  # the most of an archive's growth a check reads (lines absorbed after a rotation are far less)


def growth_problem(p: Path, start: int, size: int) -> tuple[str | None, int]:
    """(why the bytes after `start` are not whole, parseable JSON object lines or None, bytes read). A bounded
    read: a growth beyond MAX_GROWTH is not accepted unread."""
    import orjson

    n = size - start
    if n > MAX_GROWTH:
        return f"more than the {MAX_GROWTH >> 20} MB a check reads of a growth", 0
    try:
        with open(p, "rb") as fh:
            if start > 0:
                fh.seek(start - 1)
                if fh.read(1) != b"\n":
                    return "the bytes recorded did not end a line", 1
            data = fh.read(n)
    except OSError as e:
        return f"cannot be read: {e.strerror or e}", 0
    if len(data) < n:
        return "the file shrank while it was read", len(data)
    if not data.endswith(b"\n"):
        return "it ends inside a line" + (" (NUL bytes)" if b"\0" in data else ""), n
    for i, line in enumerate(data[:-1].split(b"\n"), 1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return f"appended line {i} is not JSON" + (" (NUL bytes)" if b"\0" in line else ""), n
        if not isinstance(obj, dict):
            return f"appended line {i} is not a JSON object", n
    return None, n


def still_recorded(led, a: Artifact) -> bool:
    """Is the artifact still one the ledger keeps? Read again before a problem is called: a prune, a restore or an
    undo that removed the file and recorded it while this check ran is not an alarm."""
    if a.path in led.forgotten_paths():
        return False
    if a.table == "backups":
        rows = led._rows("SELECT path FROM backups WHERE id = ? AND pruned_at IS NULL", (a.pk,))
    elif a.table == "sessions":
        rows = led._rows("SELECT archive_path AS path FROM sessions WHERE id = ? AND archived_at IS NOT NULL", (a.pk,))
    else:
        rows = [{"path": r["archive_path"]} for r in _rotation_archives(led) if f"rotation:{r['id']}" == a.id]
    return any(r["path"] == a.path for r in rows)


SETTLE_S = 1.0  # a prune deletes the file, then records it: how long a check waits once for that record


def settle(led, arts: list[Artifact]) -> None:
    """Drop the problems of artifacts the ledger no longer keeps (read again now, and once more after SETTLE_S
    for a missing file whose removal may not be recorded yet)."""
    waited = False
    for a in arts:
        if not a.problems:
            continue
        gone = not still_recorded(led, a)
        if not gone and a.status == "missing" and not waited:
            time.sleep(SETTLE_S)
            waited = True
            gone = not still_recorded(led, a)
        if gone:
            a.problems, a.status = [], "released"
            a.note = "removed and recorded meanwhile (pruned, restored or undone): no longer kept"


UNRECORDED_GRACE_S = 120.0  # a backup this new (its inode changed since) may be a change still being recorded


def unrecorded(led, files) -> list[dict]:
    """Backup files on disk the ledger does not know (an edit whose record could not be written: a full
    OCCD_HOME), each a problem naming the file."""
    import os

    known = {r["path"] for r in led._rows("SELECT path FROM backups WHERE pruned_at IS NULL")} | led.forgotten_paths()
    known |= {os.path.realpath(k) for k in known}
    out = []
    now = time.time()
    for f in sorted(str(x) for x in files):
        if f in known or os.path.realpath(f) in known:
            continue
        try:  # pruned meanwhile, or made a moment ago by a change that is recording it right now: not judged
            if now - os.stat(f).st_ctime < UNRECORDED_GRACE_S:
                continue
        except OSError:
            continue
        name = os.path.basename(f)
        out.append({"source": SOURCE, "subject": f"file:{name}", "code": "BACKUP_UNRECORDED", "severity": "fail",
                    "path": f, "message": f"backup {paths.display_path(f)} is not in the ledger: the change that made "
                    "it was not recorded (was OCCD_HOME full?)",
                    "hint": f"`occd backups` lists it; keep it or delete it; `occd check --forget file:{name}` "
                            "accepts it unrecorded"})
    return out


def ledger_problems(led) -> tuple[dict, list[dict]]:
    """PRAGMA integrity_check and foreign_key_check on the ledger."""
    info: dict = {"path": str(led.path)}
    out: list[dict] = []
    copies = sorted(Path(led.path).parent.glob(f"{Path(led.path).name}.pre-*.bak"))
    restore = (f"stop the daemon, move {paths.display_path(led.path)} aside and copy back "
               f"{paths.display_path(copies[-1])} (made before the last schema upgrade)" if copies else
               f"stop the daemon and move {paths.display_path(led.path)} aside: occd starts a new ledger "
               "(its history is lost; the backups and archives on disk stay)")
    rows = led._rows("PRAGMA integrity_check")
    msgs = [str(next(iter(r.values()))) for r in rows]
    info["integrity"] = "ok" if msgs == ["ok"] else msgs[:10]
    if msgs != ["ok"]:
        out.append({"source": SOURCE, "subject": "ledger", "code": "LEDGER_CORRUPT", "severity": "fail",
                    "path": str(led.path), "message": f"the ledger fails PRAGMA integrity_check: {'; '.join(msgs[:3])}",
                    "hint": restore})
    fk = led._rows("PRAGMA foreign_key_check")
    info["foreignKeyViolations"] = len(fk)
    if fk:
        tables = sorted({str(r.get("table")) for r in fk})
        out.append({"source": SOURCE, "subject": "ledger", "code": "LEDGER_FOREIGN_KEYS", "severity": "fail",
                    "path": str(led.path), "message": f"{len(fk)} ledger row(s) point at rows that do not exist "
                    f"(PRAGMA foreign_key_check: {', '.join(tables)})", "hint": restore,
                    "details": {"rows": fk[:20]}})
    return info, out


def run_check(led, *, read_data: bool = False, trigger: str = "manual", now: float | None = None,
              stop=None, backup_files=None) -> dict:
    """Check everything, record the run and its problems in the ledger, return the report. `backup_files`: the
    backup files on disk (occd.actions.backups.backup_files), to find those the ledger does not know."""
    t0 = time.monotonic()
    started = time.time() if now is None else now
    linfo, found = ledger_problems(led)
    arts = collect(led)
    read = 0
    for a in arts:
        if stop is not None and stop.is_set():
            break
        read += verify(led, a, read_data)
    settle(led, arts)
    for a in arts:
        found.extend(a.problems)
    orphans = unrecorded(led, backup_files) if backup_files is not None else []
    found.extend(orphans)
    sources = (SOURCE, SOURCE_DATA) if read_data else (SOURCE,)
    led.sync_problems(sources, found, now=started)
    still = [p for p in led.open_problems() if p["source"] in (SOURCE, SOURCE_DATA)]
    recorded = sum(1 for a in arts if a.status == "recorded")
    report = {
        "success": not found and not still, "readData": read_data, "ledger": linfo,
        "artifacts": [{k: v for k, v in asdict(a).items() if k not in ("pk", "table", "problems", "sha256_source")}
                      | {"hashRecordedBy": a.sha256_source} for a in arts],
        "counts": {"artifacts": len(arts), "ok": sum(1 for a in arts if a.status == "ok"),
                   "hashesRecordedNow": recorded, "problems": len(found), "unrecorded": len(orphans)},
        "problems": [_public(p) for p in found],
        # open problems this run did not look at (a --read-data problem after a cheap run)
        "stillOpen": [_public(p) for p in still if (p["source"], p["subject"], p["code"]) not in
                      {(f["source"], f["subject"], f["code"]) for f in found}],
        "bytesRead": read, "durationS": round(time.monotonic() - t0, 3),
    }
    report["success"] = not report["problems"] and not report["stillOpen"]
    led.record_check_run(started, started + report["durationS"], read_data=read_data, trigger=trigger,
                         artifacts=len(arts), bytes_read=read, problems=len(found) + len(report["stillOpen"]),
                         summary=report["counts"])
    return report


def _public(p: dict) -> dict:
    return {"id": p["subject"], "code": p["code"], "message": p["message"], "hint": p.get("hint"),
            "path": p.get("path"), "agent": p.get("agent_id"), "sessionId": p.get("session_id"),
            "firstSeen": p.get("first_seen")}


def forget(led, artifact_id: str, now: float | None = None) -> dict:
    """Record that the user accepts the loss of one artifact (it must have an open problem)."""
    arts = {a.id: a for a in collect(led)}
    open_ = [p for p in led.open_problems() if p["subject"] == artifact_id]
    a = arts.get(artifact_id)
    if a is None and not open_:
        raise OccdError(f"No artifact {artifact_id!r} with an open problem", "`occd check` lists the problems "
                        "and their artifact ids (backup:N, archive:N, rotation:N)", code="NOT_FOUND")
    if not open_:
        raise OccdError(f"{artifact_id} has no open problem: nothing to forget", "run `occd check` first; only an "
                        "artifact a check found damaged or missing can be forgotten", code="NOTHING_TO_DO")
    path = a.path if a else (open_[0].get("path") or "")
    closed = led.forget_artifact(artifact_id, path, agent=a.agent if a else open_[0].get("agent_id"),
                                 session_id=a.session_id if a else open_[0].get("session_id"), now=now)
    return {"success": True, "forgotten": artifact_id, "path": path, "problemsClosed": closed,
            "note": "recorded: you accepted the loss; later checks skip this path"}


def open_check_problems(led) -> list[dict]:
    return [_public(p) for p in led.open_problems() if p["source"] in (SOURCE, SOURCE_DATA)]
