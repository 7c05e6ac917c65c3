"""Database-era rotation (OpenClaw 2026.8+), entirely through OpenClaw's gateway: occd never writes its database.

  PENDING    sessions.describe: the current session id, its status (must not be running) and sessionStartedAt
             are recorded.
  ARCHIVING  sessions.reset {key, expectedSessionId}: OpenClaw resets the session in place (same id, counters
             to 0, the old entries stay in its database behind a reset marker: that is the archive, and occd
             records where it is). The id does not change, so a reset is recognised by sessionStartedAt (and
             lifecycleRevision) moving on; on resume, a changed sessionStartedAt means the reset happened.
  ARCHIVED   chat.send {deliver: false} with the seed (exchanges and rotation note; MEMORY.md is already in
             OpenClaw's system prompt). The idempotency key is fixed per rotation, so a resumed send is not a
             second model call. Then occd waits for the seed turn to finish — the reliable signal is the seed's
             reply in chat.history after the seed message, with sessions.describe no longer `running` — and
             only then records INJECTED. Not a sleep: it polls until that is true or a deadline passes (then the
             rotation stays ARCHIVED and the next cycle polls again).
  INJECTED   sessions.describe still shows the reset session (same id, same sessionStartedAt) → COOLDOWN.

With the gateway down every call raises BusyError: the rotation stays where it is and is resumed later.
"""

from __future__ import annotations

import logging
import time

from occd.errors import BusyError, OccdError
from occd.policy.cost import record_fields as cost_fields
from occd.rotation.machine import maybe_crash
from occd.rotation.seed import SEED_MARK  # the seed message's marker (both eras)

log = logging.getLogger("occd.rotation")
CONFIRM_SECONDS = 10.0  # how long occd looks for the reset boundary / the seed in OpenClaw's database


def _session(d: dict) -> dict:
    s = d.get("session") if isinstance(d, dict) else None
    return s if isinstance(s, dict) else (d if isinstance(d, dict) else {})


def _started(s: dict):
    return s.get("sessionStartedAt") or s.get("startedAt")


def entry_reader(state_dir, agent: str, key: str):
    """Reads the key's SessionEntry from OpenClaw's database, read-only (sessionStartedAt and lifecycleRevision
    live there; sessions.describe on 2026.9.6 does not return them)."""
    def read() -> dict:
        from occd.openclaw import open_store

        try:
            return dict(open_store(state_dir, agent).resolve(key).entry or {})
        except Exception:  # noqa: BLE001 - only a hint next to describe
            return {}
    return read


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _messages(history: dict) -> list[dict]:
    for k in ("messages", "items", "history", "entries"):
        v = history.get(k) if isinstance(history, dict) else None
        if isinstance(v, list):
            out = []
            for m in v:
                if isinstance(m, dict) and isinstance(m.get("message"), dict):
                    m = m["message"]
                if isinstance(m, dict):
                    out.append(m)
            return out
    return []


def seed_answered(history: dict, marker: str) -> bool:
    """True when chat.history holds the seed message (recognised by `marker`) followed by an assistant reply
    with text that did not end in error."""
    msgs = _messages(history)
    seen = False
    for m in msgs:
        role = m.get("role")
        if role == "user" and marker in _text(m.get("content")):
            seen = True
        elif seen and role == "assistant" and _text(m.get("content")).strip() \
                and m.get("stopReason") not in ("error", "aborted"):
            return True
    return False


class DbRotation:
    def __init__(self, ledger, rid: int, gateway, *, clock=time.time, sleep=time.sleep, wait_seconds: float = 600,
                 poll_seconds: float = 1.0, entry=None, evidence=None, confirm_seconds: float | None = None):
        self.led, self.rid, self.gw = ledger, rid, gateway
        self.entry = entry or (lambda: {})
        self.evidence = evidence  # occd.rotation.confirm.DbEvidence: OpenClaw's database, read-only
        self.confirm_seconds = CONFIRM_SECONDS if confirm_seconds is None else confirm_seconds
        self.clock, self.sleep = clock, sleep
        self.wait_seconds, self.poll_seconds = wait_seconds, poll_seconds
        self.row = ledger.rotation_get(rid)
        self.details = dict(self.row.get("details") or {})

    @property
    def key(self) -> str:
        return self.row["session_key"]

    def _go(self, state: str, note: str | None = None, **fields) -> None:
        self.led.rotation_transition(self.rid, state, now=self.clock(), note=note, details=self.details, **fields)
        self.row = self.led.rotation_get(self.rid)
        maybe_crash(state)

    def _save(self) -> None:
        self.led.rotation_upsert(self.rid, details=self.details, now=self.clock())

    def abort(self, why: str) -> None:
        self.led.rotation_transition(self.rid, "IDLE", now=self.clock(), note=f"aborted: {why}", error=why)
        self.row = self.led.rotation_get(self.rid)

    def fail(self, why: str, hint: str) -> None:
        """What occd asked for did not take effect: the rotation ends as failed (the breaker counts it)."""
        self.led.rotation_transition(self.rid, "IDLE", now=self.clock(), note=f"failed: {why}", error=why,
                                     details=self.details)
        self.row = self.led.rotation_get(self.rid)
        raise OccdError(why, hint, code="ROTATION_FAILED")

    def _wait(self, check):
        from occd.rotation.confirm import wait_for

        return wait_for(check, seconds=self.confirm_seconds, poll=min(0.5, self.poll_seconds), sleep=self.sleep)

    def confirm_reset(self, before: list | None, after: list) -> None:
        """The reset boundary must be in OpenClaw's database (a reset event after the seq recorded at PENDING, or
        a session_windows row with reason reset); without the database to ask, sessionStartedAt or
        lifecycleRevision must have moved on."""
        seq = self.details.get("seqBefore")
        got = None
        if self.evidence is not None and seq is not None:
            got = self._wait(lambda: self.evidence.reset_after(seq, int(self.details.get("resetSinceMs") or 0)))
        if got:
            self.details["resetBoundary"] = got
            return
        if got is None:
            if before is None or all(b is None for b in before) or after != before:
                self.details["resetBoundary"] = {"marks": after}
                return
            self.fail(f"sessions.reset answered ok but '{self.key}' did not change (sessionStartedAt and "
                      "lifecycleRevision are the same)", "OpenClaw did not reset the session; nothing was sent. "
                      "See `occd status --rotations`; the breaker decides when to try again")
        self.fail(f"sessions.reset answered ok but no reset boundary appeared for '{self.key}' (no reset event "
                  "after the rotation started and no session_windows row with reason reset)",
                  "OpenClaw did not reset the session (see its issue #126836); nothing was sent. See `occd status "
                  "--rotations`; the breaker decides when to try again")

    def confirm_seed(self, marker: str) -> None:
        b = self.details.get("resetBoundary") or {}
        seq = b.get("seq", self.details.get("seqBefore"))
        if self.evidence is None or seq is None:
            return
        got = self._wait(lambda: self.evidence.seed_after(seq, marker))
        if got is False:
            self.fail(f"the seed of '{self.key}' is not in OpenClaw's database after the reset (chat.history "
                      "showed its reply)", "the session was reset without its seed: look at it in OpenClaw; "
                      "`occd status --rotations` shows the rotation")
        self.details["seedConfirmed"] = got is not None

    def describe(self) -> dict:
        return _session(self.gw.sessions_describe(self.key))

    def marks(self, s: dict) -> list:
        """What changes with every reset although the session id does not: [sessionStartedAt, lifecycleRevision]."""
        e = self.entry()
        return [s.get("sessionStartedAt") or e.get("sessionStartedAt") or s.get("startedAt"),
                e.get("lifecycleRevision") or s.get("lifecycleRevision")]

    def step_reset(self) -> None:
        if self.row["state"] == "PENDING":
            self._go("ARCHIVING", note="sessions.reset")
        s = self.describe()
        if s.get("sessionId") != self.row["old_session_id"]:
            self.abort(f"the key now holds session {s.get('sessionId')}")
            raise BusyError(f"Session key '{self.key}' changed during the rotation", "nothing was changed")
        before = self.details.get("marksBefore")
        now_marks = self.marks(s)
        if before is not None and any(b is not None for b in before) and now_marks != before:
            self.details["marksAfter"] = now_marks  # the reset happened before the crash
            self.confirm_reset(before, now_marks)
            self._go("ARCHIVED", note="reset already done (sessionStartedAt/lifecycleRevision moved on)")
            return
        if s.get("status") == "running":
            raise BusyError(f"Session '{self.key}' is running", "the rotation waits until the run ends")
        r = self.gw.sessions_reset(self.key, self.row["old_session_id"], "reset")
        self.details["lifecycleRevision"] = (r or {}).get("lifecycleRevision") or _session(r).get("lifecycleRevision")
        maybe_crash("RESET_DONE")
        self.details["marksAfter"] = self.marks(self.describe())
        self.confirm_reset(before, self.details["marksAfter"])
        self._go("ARCHIVED", note=f"reset in place by OpenClaw, confirmed ({self.details['resetBoundary']})")

    def step_seed(self, message: str | None) -> None:
        if not self.details.get("seedSent"):
            if message is None:
                raise OccdError("The seed of this rotation cannot be rebuilt", "see `occd status --rotations`",
                                code="ROTATION_FAILED")
            self.gw.chat_send(self.key, message, self.details["idempotencyKey"])
            self.details["seedSent"] = True
            self.details["seedSentAt"] = self.clock()
            self._save()
            maybe_crash("SEED_SENT")
        marker = self.details.get("marker") or SEED_MARK
        deadline = time.monotonic() + self.wait_seconds
        while True:
            s = self.describe()
            if s.get("status") != "running" and seed_answered(self.gw.chat_history(self.key), marker):
                break
            if time.monotonic() >= deadline:
                raise BusyError(f"The seed turn of '{self.key}' has not finished yet",
                                "the rotation stays ARCHIVED and is checked again next cycle")
            self.sleep(self.poll_seconds)
        self.confirm_seed(marker)
        self._go("INJECTED", note="the seed turn finished (its reply is in chat.history"
                 + (" and the database)" if self.details.get("seedConfirmed") else ")"))

    def step_finish(self) -> None:
        s = self.describe()
        if s.get("sessionId") != self.row["old_session_id"]:
            raise OccdError(f"After the rotation '{self.key}' holds another session", "see `occd status --rotations`",
                            code="ROTATION_FAILED")
        self._go("COOLDOWN", note="rotation complete")

    def run(self, message: str | None) -> None:
        if self.row["state"] in ("PENDING", "ARCHIVING"):
            self.step_reset()
        if self.row["state"] == "ARCHIVED":
            self.step_seed(message)
        if self.row["state"] == "INJECTED":
            self.step_finish()


def rotate_db(settings, led, plan: dict, *, state_dir, trigger: str, policy: str | None, now: float,
              gateway=None) -> dict:
    from occd.openclaw.gateway import Gateway

    gw = gateway or Gateway(state_dir)
    read_entry = entry_reader(state_dir, plan["agent"], plan["sessionKey"])
    s = _session(gw.sessions_describe(plan["sessionKey"]))
    e = read_entry()
    if s.get("sessionId") and s.get("sessionId") != plan["sessionId"]:
        raise BusyError(f"Session key '{plan['sessionKey']}' changed while occd read it", "retried next cycle")
    if s.get("status") == "running":
        raise BusyError(f"Session '{plan['sessionKey']}' is running", "the rotation waits until the run ends")
    from occd.rotation.confirm import DbEvidence

    seq_before = DbEvidence(state_dir, plan["agent"], plan["sessionKey"], plan["sessionId"]).last_seq()
    rid = led.rotation_upsert(agent_id=plan["agent"], session_key=plan["sessionKey"], era="db", trigger=trigger,
                              reason=plan["reason"], old_session_id=plan["sessionId"],
                              new_session_id=plan["sessionId"], archive_path=plan["archivePath"],
                              seed_budget_percent=plan["seedBudgetPercent"], seed_tokens=plan["seed"]["tokens"],
                              compactions_before=plan["compactions"],
                              details={"marksBefore": [s.get("sessionStartedAt") or e.get("sessionStartedAt")
                                                       or s.get("startedAt"),
                                                       e.get("lifecycleRevision") or s.get("lifecycleRevision")],
                                       "seed": plan["seed"], "policy": policy,
                                       # where the transcript ended: the reset boundary must come after it
                                       "seqBefore": seq_before, "resetSinceMs": int(now * 1000),
                                       }, now=now)
    row = led.rotation_get(rid)
    details = dict(row.get("details") or {})
    details["idempotencyKey"] = f"occd-rotation-{rid}-{plan['sessionId']}"
    details["marker"] = f"[occd rotation {rid}]"  # tells this rotation's seed apart from earlier ones in chat.history
    led.rotation_upsert(rid, details=details)
    maybe_crash("PENDING")
    return drive_db(settings, led, rid, plan, gw, trigger=trigger, policy=policy, state_dir=state_dir)


def drive_db(settings, led, rid: int, plan: dict | None, gw, *, trigger: str, policy: str | None,
             state_dir=None) -> dict:
    from occd.rotation.notify import notify

    t0 = time.monotonic()
    row = led.rotation_get(rid)
    entry = entry_reader(state_dir, row["agent_id"], row["session_key"]) if state_dir is not None else None
    from occd.rotation.confirm import DbEvidence

    evidence = DbEvidence(state_dir, row["agent_id"], row["session_key"], row["old_session_id"])
    dr = DbRotation(led, rid, gw, entry=entry, evidence=evidence)
    row = dr.row
    try:
        marker = dr.details.get("marker") or SEED_MARK
        dr.run(f"{plan['_message']}\n\n{marker}" if plan else None)
    except BusyError as e:
        led.record_action("rotate", row["agent_id"], row["old_session_id"], row["session_key"], trigger=trigger,
                          policy=policy, reason=row.get("reason"), outcome="deferred", error=e.message)
        raise
    except OccdError as e:
        led.rotation_upsert(rid, error=e.message)
        led.record_action("rotate", row["agent_id"], row["old_session_id"], row["session_key"], trigger=trigger,
                          policy=policy, reason=row.get("reason"), outcome="failed", error=e.message)
        raise
    row = led.rotation_get(rid)
    summary = {"success": True, "mode": "rotate", "rotationId": rid, "agent": row["agent_id"], "era": "db",
               "sessionKey": row["session_key"], "oldSessionId": row["old_session_id"],
               "newSessionId": row["new_session_id"], "archivePath": row.get("archive_path"), "state": row["state"],
               "seed": (row.get("details") or {}).get("seed"), "reason": row.get("reason"), "trigger": trigger,
               "modelCalls": 1}
    led.record_action("rotate", row["agent_id"], row["old_session_id"], row["session_key"], trigger=trigger,
                      policy=policy, reason=row.get("reason"), outcome="ok",
                      before={"compactions": row.get("compactions_before"), **cost_fields((plan or {}).get("_cost"))},
                      after={"seedTokens": row.get("seed_tokens"), "archivePath": row.get("archive_path"),
                             "rotationId": rid, "modelCalls": 1},
                      duration_ms=(time.monotonic() - t0) * 1000)
    summary["notified"] = notify(settings, summary, desktop=trigger == "auto")
    return summary
