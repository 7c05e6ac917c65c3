"""The one safe path every transcript write goes through (CLI and daemon alike).

resolve the session → refuse if it is running or changed recently → build the new content in a temp file in
the same directory → check the temp file's invariants → re-check that the source did not change → link the
source to the next backup name → rename the temp file over the source → fsync the directory → prune backups →
record in the ledger. A crash at any instant leaves the old file or the new one, and a valid backup.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from occd.errors import BusyError, OccdError, UnsupportedEraError, UsageError


# What to do instead of a write occd cannot do in the database era (2026.8+: occd never writes OpenClaw's
# database), per command; {key} is the session's real key (what OpenClaw's commands take), shell-quoted.
DB_ERA_ADVICE = {
    "edit": ("`occd lean enable` hides old tool calls from the model losslessly (OpenClaw's store keeps them); "
             "`occd rotate {key}` starts the key afresh with a seed; lossy: `openclaw sessions compact {key}` "
             "replaces the history with a summary"),
    "clone": ("occd cannot copy a database-era session; `occd rotate {key}` starts the key afresh, seeded from this "
              "session (its history stays in OpenClaw's store)"),
    "restore": ("occd made no backup to restore: it never writes this session (OpenClaw's store keeps its history); "
                "a rotation is undone with `occd rotate --undo {key}`"),
    "archive": ("OpenClaw keeps the session in its database; `occd lean enable` keeps its context small, "
                "`occd rotate {key}` starts it afresh"),
}


def db_era_error(action: str, aid: str, key: str | None) -> UnsupportedEraError:
    import shlex

    k = shlex.quote(key) if key else "KEY"
    advice = DB_ERA_ADVICE.get(action, DB_ERA_ADVICE["edit"]).format(key=k)
    if not key:
        advice += " (KEY: the session's key, which `occd list` shows)"
    return UnsupportedEraError(f"Cannot {action} a session of agent '{aid}': it uses OpenClaw's database storage "
                               "(2026.8+), which occd never writes", advice)


@dataclass
class Target:
    settings: Any
    state_dir: Path
    agent: str
    store: Any
    info: Any            # occd.openclaw SessionInfo
    path: Path | None

    @property
    def session_id(self) -> str:
        return self.info.session_id

    @property
    def key(self) -> str | None:
        return getattr(self.info, "key", None)


def agent_id(settings, agent: str | None, ref: str | None = None) -> str:
    """--agent, else a session key's own agent (`agent:<id>:...`), else config `agent`, else main."""
    if agent:
        return agent
    if ref and ref.startswith("agent:") and ref.count(":") >= 2:
        return ref.split(":", 2)[1]
    return getattr(settings, "agent", None) or "main"


def open_agent_store(settings, agent: str | None, ref: str | None = None):
    from occd.openclaw import open_store, resolve_state_dir

    if agent is not None and not agent.strip():
        raise UsageError("--agent is empty", "name an agent (`occd list` shows them) or leave --agent out")
    if ref is not None and not ref.strip():
        raise UsageError("The session reference is empty", "name a session id, a unique prefix of one or a session "
                         "key, or leave it out for the newest session")

    state_dir = Path(settings.state_dir) if getattr(settings, "state_dir", None) else resolve_state_dir()
    aid = agent_id(settings, agent, ref)
    return state_dir, aid, open_store(state_dir, aid)


def resolve_session(store, ref: str, state_dir: Path, aid: str, *, command: str = "info", **kw):
    """store.resolve(ref); a session that is not the agent's but another agent's is named with its agent (the
    user forgot --agent), not "not found" with the closest ids of the wrong agent."""
    try:
        return store.resolve(ref, **kw)
    except OccdError as e:
        if e.code != "SESSION_NOT_FOUND":
            raise
        other = other_agent_with(state_dir, aid, ref)
        if other is None:
            raise
        raise OccdError(f"Session '{ref}' belongs to agent '{other}', not '{aid}'",
                        f"add --agent {other}: `occd {command} {ref} --agent {other}`", code="SESSION_NOT_FOUND",
                        details={"agent": other}) from None


def other_agent_with(state_dir: Path, aid: str, ref: str) -> str | None:
    """The other agent whose sessions (or archive) `ref` names unambiguously, if exactly one does."""
    from occd.openclaw import list_agents, open_store

    found = []
    try:
        agents = list_agents(state_dir)
    except OccdError:
        return None
    for a in agents:
        other = a.id
        if other == aid:
            continue
        try:
            store = open_store(state_dir, a)
            store.resolve(ref, include_archived=True)
        except OccdError:
            continue
        except Exception:  # noqa: BLE001 - an unreadable other agent only costs the better message
            continue
        found.append(other)
    return found[0] if len(found) == 1 else None


def resolve_target(settings, agent: str | None, ref: str | None, *, action: str, writes: bool = True) -> Target:
    state_dir, aid, store = open_agent_store(settings, agent, ref)
    if writes and getattr(store, "era", "file") == "needs-migration":
        raise UnsupportedEraError(f"Cannot {action} a session of agent '{aid}': OpenClaw has not migrated its "
                                  "sessions to its database yet", "run `openclaw doctor --fix` first; occd only "
                                  "reads such a state")
    if writes and getattr(store, "era", "file") != "file":
        try:  # the advice names the session's real key (an id or a part of one is not what OpenClaw takes)
            key = (resolve_session(store, ref, state_dir, aid) if ref is not None else store.latest()).key
        except OccdError:
            key = ref if ref and ref.startswith("agent:") else None
        raise db_era_error(action, aid, key)
    info = resolve_session(store, ref, state_dir, aid, command=action) if ref is not None else store.latest()
    path = Path(info.path) if getattr(info, "path", None) else None
    if writes:
        if path is None or not (path.is_file() or path.is_symlink()):
            raise OccdError(f"Transcript of session '{info.session_id}' is missing",
                            "run `occd list` to see what exists", code="SESSION_NOT_FOUND")
        check_writable_path(store, info, path)
    return Target(settings, state_dir, aid, store, info, path)


def check_writable_path(store, info, path: Path) -> None:
    """The rules every transcript occd writes (edit, restore, rotate, archive, the daemon's actions) must meet,
    whatever sessions.json says:

    - the session id is one OpenClaw accepts (its SAFE_SESSION_ID_RE, not a compaction checkpoint name);
    - the path, with every symlink resolved, is inside this agent's own sessions directory. OpenClaw 2026.7
      also *reads* an absolute `sessionFile` under some other `*/agents/<same id>/sessions/` (a state moved
      from another install); occd lists such a session but never writes it: rewriting, backing up and
      removing a file anywhere sessions.json points is a write primitive for whoever can edit that index;
    - the transcript itself is a regular file, not a symlink (a backup of a link would be a link, and the
      rename would replace the link with a file: refused, the user can point the session at the real file);
    The header id is checked against the session id once the file is read (check_header)."""
    from occd.openclaw.filestore import valid_session_id

    sid = info.session_id
    if not valid_session_id(sid):
        raise OccdError(f"Refusing to write session {sid!r}: not a valid OpenClaw session id",
                        "sessions.json names an id OpenClaw itself rejects; fix the index", code="UNSAFE_PATH")
    sessions_dir = getattr(store, "sessions_dir", None)
    if sessions_dir is None:
        return
    base = os.path.realpath(sessions_dir)
    if os.path.islink(path):
        raise OccdError(f"Refusing to write {path}: it is a symbolic link",
                        "occd only changes a transcript that is a regular file; point the session at the real file",
                        code="UNSAFE_PATH")
    real = os.path.realpath(path)
    if os.path.commonpath([base, real]) != base or real == base:
        raise OccdError(f"Refusing to write {path}: it is outside the agent's sessions directory {base}",
                        "occd only writes transcripts inside OpenClaw's own sessions folder; check sessionFile "
                        "in sessions.json", code="UNSAFE_PATH")


def check_header(t, session_id: str, *, unindexed: bool = False) -> None:
    """Refuse a transcript whose header names another session (a file swapped in under this session's name)."""
    hid = t.header.get("id") if isinstance(getattr(t, "header", None), dict) else None
    if not isinstance(hid, str) or hid == session_id:
        return
    if unindexed and session_id.startswith(hid + "-topic-"):
        return
    raise OccdError(f"Refusing to write {t.path}: its header names session {hid!r}, not {session_id!r}",
                    "the file does not belong to this session; check sessions.json", code="UNSAFE_PATH")


@contextlib.contextmanager
def session_lock(path: Path, *, wait: float = 0.0):
    """occd's own per-transcript lock: one occd write at a time on a session, across processes (the CLI and the
    daemon). An flock on `session-<hash of the real path>.lock` in occd's runtime directory (released by the
    kernel if the process dies). It is not OpenClaw's `<file>.lock`: that one says a run holds the session,
    and OpenClaw must never wait for occd. Busy (exit 75) when another occd holds it after `wait` seconds."""
    import fcntl
    import hashlib

    from occd.paths import runtime_dir

    d = runtime_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    digest = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    try:  # never through a symlink planted at the lock's name (O_NOFOLLOW: ELOOP)
        fd = os.open(d / f"session-{digest}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as e:
        raise OccdError(f"Cannot take occd's lock {d / f'session-{digest}.lock'}: {e.strerror}",
                        "if it is a symbolic link, remove it (occd makes its own)", code="LOCK_FAILED") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"Session '{path.stem}' is being changed by another occd process",
                                    "try again when it is done") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def ensure_not_running(path: Path, what: str = "") -> None:
    """BusyError (exit 75) when an OpenClaw run holds the transcript's lock right now."""
    from occd.openclaw import transcript_lock

    lock = transcript_lock(path)
    if lock is not None and getattr(lock, "alive", False):
        raise BusyError(f"Session '{path.stem}' is in use{what}",
                        f"an OpenClaw run holds its lock (pid {lock.pid}); nothing was changed; try again when the "
                        "agent is idle")


def ensure_idle(path: Path, idle_seconds: float, force: bool, now: float | None = None) -> None:
    """Refuse (exit 75) while a run holds the transcript, or (unless force) when it changed very recently."""
    ensure_not_running(path)
    if not force and idle_seconds > 0:
        now = time.time() if now is None else now
        age = now - path.stat().st_mtime
        if age < idle_seconds:
            raise BusyError(f"Session '{path.stem}' is in use",
                            f"it changed {age:.0f}s ago (idle_seconds={idle_seconds:.0f}); try again when the agent "
                            "is idle, or pass --force")


LEDGER_RESERVE = 256 << 10  # bytes free beside the ledger that a change's record needs, with room to spare


def ensure_recordable() -> None:
    """Refuse a change whose record the ledger could not take (OCCD_HOME full, read-only, gone): LEDGER_RESERVE
    bytes are reserved beside the ledger (a file allocated, then removed) before anything is written."""
    import secrets

    from occd import paths

    d = paths.ledger_path().parent
    probe = d / f".occd-reserve.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        paths.ensure_dir(d)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, LEDGER_RESERVE)
            except (AttributeError, OSError) as e:  # a file system without fallocate: write the bytes
                if isinstance(e, OSError) and e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                os.write(fd, b"\0" * LEDGER_RESERVE)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise OccdError(f"Failed to write {paths.display_path(d)} ({e.strerror or e}): the change would not be "
                        "recorded in the ledger, so it was not made", "check disk space and permissions of OCCD_HOME "
                        "(`occd db path`), then try again", code="LEDGER_UNWRITABLE") from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def replace_with_backup(path: Path, write_fn: Callable, expect_stat, keep: int, *, verify=None, scanned: dict | None = None,
                        pin: bool = False):
    """Write the new content via write_fn(fh) into a temp file beside `path` and atomically replace `path`,
    leaving the replaced bytes as the next backup. Returns (backup_path, pruned_paths).

    The caller holds session_lock(path). The backup name is taken exclusively (backups.snapshot) and must be
    the inode that was read (expect_stat's); right before the rename the file's stat and OpenClaw's run lock
    are checked once more (a run that started meanwhile → BusyError, nothing changed).

    verify: the scanned original Transcript (the temp file must not add invariant problems to it), or None
    to skip the check (restore puts back bytes occd already had). `scanned`, when given, receives the scan of
    the new file under "new" (so the caller need not read it again). `pin`: the backup is a pinned one (never
    pruned)."""
    from occd.actions import backups
    from occd.transcript import atomic_write, check_invariants, scan

    ensure_recordable()  # a change the ledger could not record is not made
    st = path.stat()
    taken: dict = {}

    def before_replace(tmp: Path) -> None:
        # The new file keeps the session's own last-activity time: occd's rewrite is not agent activity, so
        # idle checks (occd's and OpenClaw's) keep measuring the agent, and a re-run is not refused as "busy".
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        if verify is not None:
            new = scan(tmp, prepare_strip=False)
            if scanned is not None:
                scanned["new"] = new
            problems = check_invariants(new, verify)
            if problems:
                raise OccdError(f"Refusing to write {path.name}: the result would be invalid ({problems[0]})",
                                "this is a bug in occd; the original is untouched — please report it",
                                code="INVARIANT_VIOLATION")
        taken["backup"] = backups.snapshot(path, expect_inode=expect_stat[2] if expect_stat else None, pinned=pin)

    try:
        atomic_write(path, write_fn, expect_stat=expect_stat, validate=before_replace,
                     guard=lambda: ensure_not_running(path, " (a run started while occd was writing)"))
    except BaseException:
        # The rename did not happen: the backup (if made) is a second name of the untouched original; drop it
        # only when it really is the same file, so an unrelated backup is never removed.
        backup_path = taken.get("backup")
        try:
            if backup_path is not None and backup_path.exists() and backup_path.samefile(path):
                backup_path.unlink()
        except OSError:
            pass
        raise
    pruned = backups.prune(path, keep)
    return taken["backup"], pruned


def record_action(kind: str, target: Target | None, *, outcome: str, trigger: str = "manual",
                  policy: str | None = None, reason: str | None = None, before=None, after=None,
                  backup_path=None, pruned=(), error: str | None = None, dry_run: bool = False,
                  duration_ms: float | None = None, ledger=None, agent: str | None = None,
                  session_id: str | None = None) -> None:
    """Record the action (and its backups) in the ledger. A manual command whose work succeeded is not failed
    by a ledger problem: it warns instead. The daemon passes its own open ledger. A manual --dry-run promises
    to write nothing, so it records nothing (observe mode's automatic "would" rows are the daemon's record)."""
    if dry_run and trigger == "manual":
        return
    own = ledger is None
    try:
        if own:
            from occd.ledger import Ledger

            ledger = Ledger.open()
        aid = target.agent if target else agent
        sid = target.session_id if target else session_id
        action_id = ledger.record_action(kind, aid, sid, target.key if target else None, trigger=trigger,
                                         policy=policy, reason=reason, outcome=outcome, before=before, after=after,
                                         backup_path=backup_path, error=error, dry_run=dry_run,
                                         duration_ms=duration_ms)
        if backup_path:
            from occd.ledger.digest import try_fingerprint

            size, sha = try_fingerprint(backup_path)  # what `occd check` compares against later
            ledger.record_backup(backup_path, aid, sid, size=size, sha256=sha, action_id=action_id)
        for p in pruned:
            ledger.mark_backup_pruned(p)
    except Exception as e:  # noqa: BLE001 - the ledger must never turn a done edit into a failure
        # (the daemon's too: a full OCCD_HOME must not make a strip that was done count as failed)
        import logging  # only here: read commands that import this module do not pay for logging

        logging.getLogger("occd.actions").warning(
            "could not record %s (%s) in the ledger: %s", kind, outcome,
            (getattr(e, "message", None) or str(e)).splitlines()[0] if str(e) else type(e).__name__)
        import click

        click.echo(f"Warning: could not record this {kind} in the ledger: {str(e).splitlines()[0]}", err=True)
    finally:
        if own and ledger is not None:
            try:
                ledger.close()
            except Exception:  # noqa: BLE001
                pass


def record_archive_fingerprint(ledger, agent: str, session_id: str, path) -> None:
    """Record the size and sha256 of an archive occd just made (`occd check` compares against them)."""
    from occd.ledger.digest import try_fingerprint

    size, sha = try_fingerprint(path)
    if sha is not None:
        ledger.archive_fingerprint_by_path(agent, session_id, str(path), size, sha)
