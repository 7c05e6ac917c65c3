"""The rotation state machine: IDLE → PENDING → ARCHIVING → ARCHIVED → INJECTED → COOLDOWN (→ IDLE once the
cooldown has passed, or at once when a rotation is aborted or undone). Every step is persisted in the ledger in
its own transaction before the next begins, and every step is idempotent, so a rotation cut off at any instant
is resumed (or rolled back) by `occd.rotation.recovery.resume_all()` when the daemon starts.

File era — the order that keeps the session key pointing at a valid transcript at every instant and never
loses a byte:

  PENDING    the plan is recorded: old id/path and its stat (size, mtime, inode), new id/path, seed budget.
  ARCHIVING  the old transcript gets its archive name in sessions/archive/: a hard link (same bytes, O(1)) or,
             where links are impossible, a verified copy (temp file, fsync, verify: first and last lines valid
             JSON, header id, size and line count match the source; then rename).
             The old transcript stays where it is and the index still points to it.
  ARCHIVED   the archive is complete. Now, in this order:
               1. the new transcript is written atomically under its new id (it is not in the index yet, so
                  OpenClaw does not see it; it ends with an assistant message, see the format doc);
               2. the old transcript is checked once more: no live run lock, same stat as at PENDING —
                  otherwise OpenClaw wrote to it: abort (new file and archive copy removed, nothing lost);
                  occd's own per-session lock (occd.actions.common.session_lock) is held throughout;
               3. sessions.json is switched to the new session in ONE atomic write (re-read, only this key
                  changed, compared right before the rename and verified after it: occd.openclaw.update_index);
               4. right after the switch (the index write waits a moment, longer than a writer needs to show
                  itself) the old transcript must still have its planned stat and no run lock; then its name is
                  taken away (renamed to a hidden `.<file>.occd-rotating`) and must stay free — a writer that
                  appends by path would create a new file there. Any sign of a writer: the switch is undone, the
                  old file goes back under its name with every line (those of such a new file appended after
                  its own), the new session is removed (kept in archive/ if something wrote to it), exit 75;
               5. only now is the old transcript removed — after checking once more that the archive holds
                  all of its bytes (if OpenClaw appended in the instant before the switch, the archive is made
                  again from the final file first). Lines a writer appends to the old name after the rotation's
                  last check are added to the end of the archive (FileRotation.absorb_late_strays).
  INJECTED   the index points to the new, valid session (checked on resume).
  COOLDOWN   done; the cooldown policy (min compactions and minutes) guards the next rotation of the key.

A crash before step 3 leaves the old session in place and indexed (the new file is an unindexed leftover that
the resumed rotation reuses or rewrites); a crash after step 3 leaves the new session indexed and the old one
either still in place beside its verified archive (removed on resume) or already removed. Recovery rules:
PENDING starts over; ARCHIVING checks the archive and redoes it when it is not complete; ARCHIVED creates the
new session (steps 1–4, each skipped when already done); INJECTED checks the index and the new file.

Database era (OpenClaw 2026.8+): see occd.rotation.db.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable

from occd.transcript.archive import ARCHIVE_DIR, archive_file, archive_path_for, copy_verified, same_file, verify_against
from occd.errors import BusyError, OccdError
from occd.openclaw.fence import STRAY_SETTLE_S, absorb_strays, file_stat, give_back, take_name  # noqa: F401
from occd.openclaw.fence import held_path as _held_path

log = logging.getLogger("occd.rotation")

STATES = ("IDLE", "PENDING", "ARCHIVING", "ARCHIVED", "INJECTED", "COOLDOWN")
UNFINISHED = ("PENDING", "ARCHIVING", "ARCHIVED", "INJECTED")
# OCCD_CRASH_AT also accepts these points inside the ARCHIVED → INJECTED step
SUB_STEPS = ("NEW_WRITTEN", "INDEX_SWITCHED", "OLD_NAME_TAKEN", "OLD_REMOVED", "RESET_DONE", "SEED_SENT")


def maybe_crash(step: str) -> None:
    """Test-only fault injection: OCCD_CRASH_AT=<step> kills this process (SIGKILL) right after that step."""
    if os.environ.get("OCCD_CRASH_AT") == step:
        log.warning("OCCD_CRASH_AT=%s: killing this process", step)
        os.kill(os.getpid(), signal.SIGKILL)


class KeyLock:
    """One rotation per session key at a time across occd processes (the CLI and the daemon): an flock on a
    file in occd's runtime directory, released by the kernel if the process dies."""

    def __init__(self, agent: str, key: str):
        import hashlib

        from occd.paths import runtime_dir

        d = runtime_dir()
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        digest = hashlib.sha256((agent + "\0" + key).encode()).hexdigest()[:16]
        self.path = d / f"rotate-{digest}.lock"
        self.key = key
        self.fd = None

    def __enter__(self):
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise BusyError(f"Another occd process is rotating '{self.key}'", "wait for it to finish") from None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# index fields that describe the old transcript's size and usage; they start afresh with the new session
TOKEN_FIELDS = ("totalTokens", "totalTokensFresh", "inputTokens", "outputTokens", "cacheRead", "cacheWrite",
                "estimatedCostUsd", "memoryFlushAt", "memoryFlushCompactionCount", "contextBudgetStatus",
                "abortedLastRun", "systemPromptReport")


def switched_entry(entry: dict, new_id: str, new_path: Path, now_ms: int) -> dict:
    """The index entry pointing to the new session: new sessionId/sessionFile, compactionCount 0, token
    counters at 0 as OpenClaw's own reset leaves them (the rest of the usage fields dropped until the first
    reply), every other field kept in its place."""
    e = {k: v for k, v in entry.items() if k not in TOKEN_FIELDS}
    e["sessionId"] = new_id
    if "sessionFile" in entry:  # absolute in 2026.7.x, a name inside the folder in newer file-era releases
        sf = entry.get("sessionFile")
        e["sessionFile"] = str(new_path) if isinstance(sf, str) and Path(sf).is_absolute() else new_path.name
    e["compactionCount"] = 0
    e["totalTokens"] = 0
    e["inputTokens"] = 0
    e["outputTokens"] = 0
    e["sessionStartedAt"] = now_ms
    e["updatedAt"] = now_ms
    return e


class FileRotation:
    """Drives one file-era rotation through its steps. Every step can be run again after a crash."""

    def __init__(self, ledger, rid: int, *, clock: Callable[[], float] = time.time):
        self.led = ledger
        self.rid = rid
        self.clock = clock
        self.row = ledger.rotation_get(rid)
        self.details = dict(self.row.get("details") or {})

    # -- helpers ---------------------------------------------------------------------------------------------
    def _go(self, state: str, note: str | None = None, **fields) -> None:
        self.led.rotation_transition(self.rid, state, now=self.clock(), note=note, details=self.details, **fields)
        self.row = self.led.rotation_get(self.rid)
        maybe_crash(state)

    def _save_details(self) -> None:
        self.led.rotation_upsert(self.rid, details=self.details, now=self.clock())

    @property
    def key(self) -> str:
        return self.row["session_key"]

    @property
    def old_path(self) -> Path:
        return Path(self.row["old_path"])

    @property
    def new_path(self) -> Path:
        return Path(self.row["new_path"])

    @property
    def archive(self) -> Path | None:
        return Path(self.row["archive_path"]) if self.row.get("archive_path") else None

    def index_entry(self) -> dict | None:
        from occd.openclaw import load_index

        idx, warnings = load_index(self.old_path.parent)
        if warnings:
            raise OccdError(f"sessions.json is damaged: {warnings[0]}",
                            "fix or restore it (openclaw doctor); the rotation waits and nothing was changed",
                            code="INDEX_DAMAGED")
        e = idx.get(self.key)
        return e if isinstance(e, dict) else None

    def current_id(self) -> str | None:
        e = self.index_entry()
        return e.get("sessionId") if e else None

    def switched(self) -> bool:
        return self.current_id() == self.row["new_session_id"]

    def refresh_stat(self) -> None:
        """Resuming before the switch: the plan is rebuilt from the old transcript as it is now."""
        self.details["oldStat"] = file_stat(self.old_path)
        self._save_details()

    def abort(self, why: str) -> None:
        """Undo what this rotation did before the index switch; the session stays exactly as it was."""
        if not self.switched():
            if self.new_path.exists():
                self.new_path.unlink()
            if self.archive is not None and self.archive.exists() and self.old_path.exists():
                self.archive.unlink()
        self.led.rotation_transition(self.rid, "IDLE", now=self.clock(), note=f"aborted: {why}", error=why)
        self.row = self.led.rotation_get(self.rid)
        log.warning("rotation %s of %s aborted: %s", self.rid, self.key, why)

    def _check_unchanged(self) -> None:
        from occd.openclaw import transcript_lock

        lock = transcript_lock(self.old_path)
        if lock is not None and getattr(lock, "alive", False):
            self.abort(f"an OpenClaw run holds the session (pid {lock.pid})")
            raise BusyError(f"Session '{self.key}' started a run during the rotation",
                            "nothing was lost; the rotation is retried when the agent is idle")
        if file_stat(self.old_path) != self.details.get("oldStat"):
            self.abort("OpenClaw wrote to the session during the rotation")
            raise BusyError(f"Session '{self.key}' changed during the rotation",
                            "nothing was lost; the rotation is retried when the agent is idle")

    # -- steps -----------------------------------------------------------------------------------------------
    def step_archive(self) -> None:
        """PENDING/ARCHIVING → ARCHIVED: a verified copy of the old transcript in sessions/archive/."""
        if self.row["state"] == "PENDING":
            arch = self.archive or archive_path_for(self.old_path)
            self._go("ARCHIVING", note=f"archiving to {arch}", archive_path=str(arch))
        arch = self.archive
        if not self.old_path.exists() and self.held_path.exists() and not self.switched():
            self._give_back(self.held_path)
        if not self.old_path.exists():
            if self.switched():  # the switch and removal happened, the crash came before ARCHIVED was recorded
                self._go("ARCHIVED", note="old transcript already archived")
                return
            raise OccdError(f"The transcript {self.old_path} vanished during the rotation",
                            "see `occd status --rotations`", code="ROTATION_FAILED")
        if arch.exists():
            problem = verify_against(self.old_path, arch, self.row["old_session_id"])
            if problem is None:
                self.details["archivedStat"] = file_stat(self.old_path)
                self._go("ARCHIVED", note="archive verified")
                return
            log.info("rotation %s: archive %s incomplete (%s): making it again", self.rid, arch, problem)
            arch.unlink()
        self._check_unchanged()
        try:
            self.details["archivedStat"], how = archive_file(self.old_path, arch, self.row["old_session_id"])
        except OccdError:
            self._check_unchanged()  # OpenClaw wrote while the archive was checked: stopped as any write (75)
            raise
        self.details["archivedBy"] = how
        self._go("ARCHIVED", note=f"archive verified ({'hard link' if how == 'link' else 'copy'})")

    def step_inject(self, write_new: Callable[[Path], None]) -> None:
        """ARCHIVED → INJECTED: new transcript written, index switched atomically, then the old one removed."""
        from occd.openclaw import update_index
        from occd.transcript import check_invariants

        if not self.switched():
            if not self.old_path.exists() and self.held_path.exists():
                self._give_back(self.held_path)  # a crash while a switch was being undone
            current = self.current_id()
            if current != self.row["old_session_id"]:
                self.abort(f"the index now points to {current}, not {self.row['old_session_id']}")
                raise BusyError(f"Session key '{self.key}' changed during the rotation",
                                "nothing was lost; see `occd status --rotations`")
            self._check_unchanged()
            if not self.new_path.exists() or check_invariants(self.new_path):
                write_new(self.new_path)
            problems = check_invariants(self.new_path)
            if problems:
                self.new_path.unlink(missing_ok=True)
                raise OccdError(f"The new session would be invalid: {problems[0]}", "this is a bug in occd; the "
                                "session was not changed", code="INVARIANT_VIOLATION")
            maybe_crash("NEW_WRITTEN")
            now_ms = int(self.clock() * 1000)
            old_id, new_id = self.row["old_session_id"], self.row["new_session_id"]

            original: dict = {}

            def switch(index: dict) -> dict:
                e = index.get(self.key)
                if not isinstance(e, dict) or e.get("sessionId") != old_id:
                    raise BusyError(f"Session key '{self.key}' changed during the rotation", "nothing was lost")
                original["entry"] = e
                self.details["oldEntry"] = e  # `rotate --undo` puts it back exactly (saved with INJECTED)
                index[self.key] = switched_entry(e, new_id, self.new_path, now_ms)
                return index

            self._check_unchanged()  # the last look right before the switch
            update_index(self.old_path.parent, switch,
                         done=lambda idx: (idx.get(self.key) or {}).get("sessionId") == new_id)
            maybe_crash("INDEX_SWITCHED")
            self._confirm_quiet(original.get("entry"), new_id)
        # the index points to the new session: the old transcript lives on in its verified archive
        held = self.held_path
        if self.old_path.exists() and not held.exists():
            os.rename(self.old_path, held)  # (a run cut off after the switch by an older occd)
        if held.exists():
            self._absorb_strays(held)
            # the archive was verified against exactly this file state; anything else (appended in the last
            # instant before the switch) is archived again from the final file first
            if not same_file(held, self.archive) and (
                    file_stat(held) != self.details.get("archivedStat") or not self.archive.exists()):
                self.details["archivedStat"] = copy_verified(held, self.archive, self.row["old_session_id"])
            held.unlink()
            from occd.transcript.rewrite import fsync_dir

            fsync_dir(self.old_path.parent)
            maybe_crash("OLD_REMOVED")
        self._go("INJECTED", note="index points to the new session; old transcript archived")

    # -- switching the old file away without losing an appended line ------------------------------------------
    @property
    def held_path(self) -> Path:
        """The old transcript's name while the index is switched: hidden (never listed as a session) and in the
        same folder (a rename, not a copy)."""
        return _held_path(self.old_path)

    def _confirm_quiet(self, entry: dict | None, new_id: str) -> None:
        """Right after the switch (the index write has waited INDEX_SETTLE_S, longer than a writer needs to
        show itself): the old transcript must be as planned — same stat, no run lock. Then its name is taken
        away (renamed to held_path, so the key never pointed at a missing file), and the name must stay free:
        a writer appending by path (like OpenClaw's appendFileSync) would create a new file there. Any sign
        of a writer → the switch is undone, the old file with every line back under its name, BusyError (75).
        The fence itself is occd.openclaw.fence (shared with the idle-archive and the undo)."""
        take_name(self.old_path, self.details.get("oldStat"),
                  revert=lambda held: self._revert_switch(held, entry, new_id),
                  after_rename=lambda: maybe_crash("OLD_NAME_TAKEN"))

    def _revert_switch(self, held: Path | None, entry: dict | None, new_id: str) -> None:
        from occd.openclaw import update_index

        new_stat = file_stat(self.new_path)
        old_id = self.row["old_session_id"]

        def back(index: dict) -> dict:
            e = index.get(self.key)
            if isinstance(e, dict) and e.get("sessionId") == new_id and entry is not None:
                index[self.key] = entry
            return index

        update_index(self.old_path.parent, back,
                     done=lambda idx: (idx.get(self.key) or {}).get("sessionId") != new_id)
        if held is not None:
            self._give_back(held)
        if file_stat(self.new_path) != new_stat and self.new_path.exists():
            # a run wrote to the new session meanwhile: keep it (archived), never delete written lines
            from occd.transcript.archive import safe_archive_dir

            safe_archive_dir(self.new_path.parent / ARCHIVE_DIR)
            keep = archive_path_for(self.new_path)
            os.rename(self.new_path, keep)
        self.abort("the old session was written to while the index was switched")
        raise BusyError(f"Session '{self.key}' changed during the rotation (old id {old_id[:13]} written to)",
                        "nothing was lost; the rotation is retried when the agent is idle")

    def _absorb_strays(self, held: Path) -> None:
        """Lines appended by path after the rename landed in a new file at the old name: append them to the
        held file (the archive's inode, or re-copied into the archive afterwards) and remove that file."""
        if absorb_strays(self.old_path, held):
            log.warning("rotation %s: lines appended to %s after its name was taken were kept (after its own)",
                        self.rid, self.old_path.name)

    def _give_back(self, held: Path) -> None:
        """The held file (see _confirm_quiet) goes back under the old name, with any lines a writer appended to
        a new file at that name meanwhile added after its own (in the order they were written)."""
        give_back(held, self.old_path, on_strays=lambda: log.warning(
            "rotation %s: lines appended to %s after its name was taken were kept (after its own)", self.rid,
            self.old_path.name))

    def _reswitch(self) -> None:
        """After the switch, OpenClaw's lock-less index writer (read, change, rename; see update_index) may land an
        image it read before the switch: the key names the old id again, whose transcript now lives only in the
        archive. Point it at the new session again (only while it still names the old id)."""
        from occd.openclaw import update_index

        old_id, new_id = self.row["old_session_id"], self.row["new_session_id"]
        now_ms = int(self.clock() * 1000)

        def switch(index: dict) -> dict:
            e = index.get(self.key)
            if isinstance(e, dict) and e.get("sessionId") == old_id:
                index[self.key] = switched_entry(e, new_id, self.new_path, now_ms)
            return index

        log.warning("rotation %s: a stale index write put %s back on the old session; switched again",
                    self.rid, self.key)
        update_index(self.old_path.parent, switch,
                     done=lambda idx: (idx.get(self.key) or {}).get("sessionId") != old_id)

    def step_finish(self, old_session_policy: str = "archive") -> None:
        """INJECTED → COOLDOWN, after checking that the index points to the new, valid session."""
        from occd.transcript import check_invariants

        if not self.switched() and self.new_path.exists() and self.current_id() == self.row["old_session_id"]:
            self._reswitch()  # a writer that had read the index before the switch wrote its stale image back
        if not self.switched() or not self.new_path.exists():
            raise OccdError(f"After the rotation of '{self.key}' the index does not point to the new session",
                            "see `occd status --rotations`", code="ROTATION_FAILED")
        problems = check_invariants(self.new_path)
        if problems:
            raise OccdError(f"The new session is invalid: {problems[0]}",
                            "restore the old one with `occd rotate --undo`", code="ROTATION_FAILED")
        if old_session_policy == "delete" and self.archive is not None and self.archive.exists():
            self.archive.unlink()  # only after a verified archive, the switch and a valid new session
            self.details["archiveDeleted"] = True
        self._go("COOLDOWN", note="rotation complete")

    def absorb_late_strays(self) -> None:
        """Lines a writer appended by path to the old name after the rotation's own checks (a new headerless
        file there): they go to the end of the archive, so nothing is lost (an archive deleted by policy is
        not brought back: such lines are then left where they are, with a warning)."""
        if not self.old_path.exists() or self.switched() is False:
            return
        arch = self.archive
        if arch is None or not arch.exists():
            log.warning("rotation %s: %s was written again after the rotation; left in place", self.rid, self.old_path)
            return
        self._absorb_strays(arch)

    def run(self, write_new: Callable[[Path], None], old_session_policy: str = "archive") -> None:
        if self.row["state"] in ("PENDING", "ARCHIVING"):
            self.step_archive()
        if self.row["state"] == "ARCHIVED":
            self.step_inject(write_new)
        if self.row["state"] == "INJECTED":
            self.step_finish(old_session_policy)
