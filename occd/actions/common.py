"""The one safe path every transcript write goes through (CLI and daemon alike).

resolve the session → refuse if it is running or changed recently → build the new content in a temp file in
the same directory → check the temp file's invariants → re-check that the source did not change → link the
source to the next backup name → rename the temp file over the source → fsync the directory → prune backups →
record in the ledger. A crash at any instant leaves the old file or the new one, and a valid backup.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from occd.errors import BusyError, OccdError, UnsupportedEraError

log = logging.getLogger("occd.actions")

DB_ERA_HINT = ("this agent uses OpenClaw's database storage (2026.8+), which occd never writes: use "
               "`openclaw sessions compact {key}` (occd's daemon does this through the gateway)")


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

    state_dir = Path(settings.state_dir) if getattr(settings, "state_dir", None) else resolve_state_dir()
    aid = agent_id(settings, agent, ref)
    return state_dir, aid, open_store(state_dir, aid)


def resolve_target(settings, agent: str | None, ref: str | None, *, action: str, writes: bool = True) -> Target:
    state_dir, aid, store = open_agent_store(settings, agent, ref)
    if writes and getattr(store, "era", "file") != "file":
        key = ref or "<session key>"
        raise UnsupportedEraError(f"Cannot {action} a session of agent '{aid}' in OpenClaw's database era",
                                  DB_ERA_HINT.format(key=key))
    info = store.resolve(ref) if ref else store.latest()
    path = Path(info.path) if getattr(info, "path", None) else None
    if writes and (path is None or not path.is_file()):
        raise OccdError(f"Transcript of session '{info.session_id}' is missing", "run `occd list` to see what exists",
                        code="SESSION_NOT_FOUND")
    return Target(settings, state_dir, aid, store, info, path)


def ensure_idle(path: Path, idle_seconds: float, force: bool, now: float | None = None) -> None:
    """Refuse (exit 75) while a run holds the transcript, or (unless force) when it changed very recently."""
    from occd.openclaw import transcript_lock

    lock = transcript_lock(path)
    if lock is not None and getattr(lock, "alive", False):
        raise BusyError(f"Session '{path.stem}' is in use",
                        f"an OpenClaw run holds its lock (pid {lock.pid}); try again when the agent is idle")
    if not force and idle_seconds > 0:
        now = time.time() if now is None else now
        age = now - path.stat().st_mtime
        if age < idle_seconds:
            raise BusyError(f"Session '{path.stem}' is in use",
                            f"it changed {age:.0f}s ago (idle_seconds={idle_seconds:.0f}); try again when the agent "
                            "is idle, or pass --force")


def replace_with_backup(path: Path, write_fn: Callable, expect_stat, keep: int, *, verify=None, scanned: dict | None = None):
    """Write the new content via write_fn(fh) into a temp file beside `path` and atomically replace `path`,
    leaving the replaced bytes as the next backup. Returns (backup_path, pruned_paths).

    verify: the scanned original Transcript (the temp file must not add invariant problems to it), or None
    to skip the check (restore puts back bytes occd already had). `scanned`, when given, receives the scan of
    the new file under "new" (so the caller need not read it again)."""
    from occd.actions import backups
    from occd.transcript import atomic_write, check_invariants, scan

    backup_path = backups.next_backup_path(path)
    st = path.stat()

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
        backups.snapshot(path, backup_path)

    try:
        atomic_write(path, write_fn, expect_stat=expect_stat, validate=before_replace)
    except BaseException:
        # The rename did not happen: the backup (if made) is a second name of the untouched original; drop it
        # only when it really is the same file, so an unrelated backup is never removed.
        try:
            if backup_path.exists() and backup_path.samefile(path):
                backup_path.unlink()
        except OSError:
            pass
        raise
    pruned = backups.prune(path, keep)
    return backup_path, pruned


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
            size = Path(backup_path).stat().st_size if Path(backup_path).exists() else None
            ledger.record_backup(backup_path, aid, sid, size=size, action_id=action_id)
        for p in pruned:
            ledger.mark_backup_pruned(p)
    except Exception as e:  # noqa: BLE001 - the ledger must never turn a done edit into a failure
        if not own:
            raise
        log.warning("could not record %s in the ledger: %s", kind, e)
        import click

        click.echo(f"Warning: could not record this {kind} in the ledger: {str(e).splitlines()[0]}", err=True)
    finally:
        if own and ledger is not None:
            try:
                ledger.close()
            except Exception:  # noqa: BLE001
                pass
