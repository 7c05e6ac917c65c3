"""Database-era rotation through a scripted gateway that behaves as the verified 2026.9.6 calls do
(sessions.describe / sessions.reset in place / chat.send deliver:false starting one turn / chat.history).
occd must never write OpenClaw's database; crashes at every step resume without a second reset or a second
model call; a gateway that is down defers."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from occd.errors import BusyError, OccdError
from statefactory import DbState, message

KEY = "agent:main:main"


class FakeGateway:
    """`st` (a DbState): what OpenClaw 9.6 stores as it answers — the reset event on sessions.reset, the seed
    message and its reply — so occd's confirmation reads them from the database. `reset_noop`: sessions.reset
    answers ok and changes nothing (OpenClaw's issue #126836)."""

    def __init__(self, sid: str, started: int = 1000, st=None, reset_noop: bool = False, seed_lost: bool = False):
        self.st, self.reset_noop, self.seed_lost = st, reset_noop, seed_lost
        self.sid, self.started, self.status = sid, started, "done"
        if st is not None:
            self.known = _digest(st.db_path())
        self.rev = 1
        self.history: list[dict] = [{"role": "user", "content": "old question"},
                                    {"role": "assistant", "content": [{"type": "text", "text": "old answer"}]}]
        self.calls: list[str] = []
        self.sent: dict[str, str] = {}
        self.down = False
        self.polls_running = 2  # the seed turn is "running" for this many describes

    def _check(self, name):
        if self.down:
            raise BusyError("The OpenClaw gateway is not running", "occd waits and retries when it is up")
        self.calls.append(name)

    def sessions_describe(self, key):
        self._check("describe")
        if self.status == "running":
            self.polls_running -= 1
            if self.polls_running <= 0:
                self.status = "done"
                self.history.append({"role": "assistant", "content": [{"type": "text", "text": "Got it."}],
                                     "stopReason": "stop"})
                self._store(message("assistant", "Got it.", id=f"seedreply{len(self.history)}", parent=None))
        return {"session": {"sessionId": self.sid, "status": self.status, "sessionStartedAt": self.started}}

    def sessions_reset(self, key, expected, reason="reset"):
        self._check("reset")
        if expected != self.sid:
            raise OccdError("session-changed")
        if self.reset_noop:
            return {"ok": True, "lifecycleRevision": self.rev + 1}
        self.started += 1
        self.rev += 1
        self.history.append({"type": "reset"})
        self._store({"type": "reset", "id": f"reset{self.rev}", "parentId": None, "timestamp": "2026-11-26T00:00:00Z"})
        return {"ok": True, "lifecycleRevision": self.rev}

    def _store(self, event):
        if self.st is not None and not (self.seed_lost and event.get("type") == "message"):
            known = getattr(self, "known", None)
            assert known is None or _digest(self.st.db_path()) == known, "someone else wrote OpenClaw's database"
            self.st.append_events(self.sid, [event])
            self.known = _digest(self.st.db_path())

    def chat_send(self, key, msg, idem):
        self._check("send")
        if idem in self.sent:  # OpenClaw's idempotency: the same key starts no second turn
            return {"ok": True, "deduped": True}
        self.sent[idem] = msg
        self.history.append({"role": "user", "content": msg})
        self._store(message("user", msg, id=f"seed{len(self.sent)}", parent=None))
        self.status = "running"
        return {"ok": True}

    def chat_history(self, key):
        self._check("history")
        return {"messages": [m for m in self.history if "role" in m]}


@pytest.fixture
def db(isolated_env, monkeypatch):
    monkeypatch.setattr("occd.rotation.db.CONFIRM_SECONDS", 1.0, raising=False)  # a missing boundary is looked for 1 s, not 10
    st = DbState(Path(os.environ["OPENCLAW_STATE_DIR"]))
    ev, parent = [], None
    for i in range(6):
        u = message("user", f"question number {i}", id=f"u{i:07d}", parent=parent)
        a = message("assistant", f"answer number {i}", id=f"a{i:07d}", parent=u["id"],
                    usage={"input": 10, "output": 5, "totalTokens": 15})
        a["message"]["stopReason"] = "stop"
        ev += [u, a]
        parent = a["id"]
    sid = st.add_session(KEY, events=ev, entry={"compactionCount": 4}, updated_at=1)
    ws = Path(os.environ["OPENCLAW_STATE_DIR"]) / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text("The cat is Mia.\n")
    return st, sid


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _settings():
    from occd.config import load_settings

    return load_settings()


def test_db_rotation_through_gateway(db):
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger

    st, sid = db
    before = _digest(st.db_path())
    gw = FakeGateway(sid, st=st)
    led = Ledger.open()
    dry = rotate_session(_settings(), ref=KEY, dry_run=True, gateway=gw, ledger=led)
    assert dry["modelCall"] is True and any("one model call" in s for s in dry["steps"])
    assert gw.calls == []  # a dry run asks nothing of the gateway
    res = rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
    assert res["state"] == "COOLDOWN" and res["modelCalls"] == 1
    assert gw.calls.count("reset") == 1 and len(gw.sent) == 1
    assert gw.calls.index("reset") < gw.calls.index("send")
    msg = next(iter(gw.sent.values()))
    assert "question number 5" in msg and "answer number 5" in msg and "question number 0" not in msg
    assert "Mia" not in msg  # MEMORY.md is already in OpenClaw's system prompt
    assert f"[occd rotation {res['rotationId']}]" in msg
    # INJECTED only after the seed's reply was there and the run had ended
    assert gw.status == "done" and gw.history[-1]["content"][0]["text"] == "Got it."
    row = led.rotations()[0]
    assert row["details"]["marksBefore"][0] != row["details"]["marksAfter"][0] == 1001
    assert row["details"]["lifecycleRevision"] == 2
    assert [h["to_state"] for h in led.rotation_history(row["id"])] == ["PENDING", "ARCHIVING", "ARCHIVED",
                                                                        "INJECTED", "COOLDOWN"]
    assert _digest(st.db_path()) == getattr(gw, "known", before)  # only "OpenClaw" (the fake) wrote its database
    led.close()


def test_db_gateway_down_defers(db):
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger

    st, sid = db
    gw = FakeGateway(sid, st=st)
    gw.down = True
    led = Ledger.open()
    with pytest.raises(BusyError, match="not running"):
        rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
    assert led.rotations() == [] and gw.sent == {}
    led.close()


def test_db_running_session_defers(db):
    from occd.rotation.rotate import rotate_session

    st, sid = db
    gw = FakeGateway(sid, st=st)
    gw.status = "running"
    gw.polls_running = 99
    with pytest.raises(BusyError, match="running"):
        rotate_session(_settings(), ref=KEY, gateway=gw)
    assert "reset" not in gw.calls


@pytest.mark.parametrize("step", ["PENDING", "ARCHIVING", "RESET_DONE", "ARCHIVED", "SEED_SENT", "INJECTED"])
def test_db_crash_at_every_step_resumes_without_repeating(db, step, monkeypatch):
    """A crash at each step (simulated in-process: the gateway's state outlives the crash as OpenClaw's does),
    then recovery: exactly one reset and one seed turn in total, and COOLDOWN."""
    import occd.rotation.db as dbmod
    import occd.rotation.machine as m
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger
    from occd.rotation.recovery import resume_all

    class Crash(BaseException):
        pass

    def crash(s):
        if s == step:
            raise Crash(s)

    st, sid = db
    gw = FakeGateway(sid, st=st)
    led = Ledger.open()
    monkeypatch.setattr(dbmod, "maybe_crash", crash)
    monkeypatch.setattr(m, "maybe_crash", crash)
    with pytest.raises(Crash):
        rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
    monkeypatch.setattr(dbmod, "maybe_crash", lambda s: None)
    out = resume_all(_settings(), led, state_dir=Path(os.environ["OPENCLAW_STATE_DIR"]), gateway=gw)
    assert out["failed"] == 0 and out["deferred"] == 0, out
    row = led.rotations()[0]
    assert row["state"] == "COOLDOWN"
    assert gw.calls.count("reset") == 1 and len(gw.sent) == 1
    led.close()


def test_db_seed_reply_wait_is_a_poll_not_a_sleep(db):
    from occd.ledger import Ledger
    from occd.rotation.db import DbRotation, seed_answered

    assert not seed_answered({"messages": [{"role": "user", "content": "[occd rotation 3] x"}]}, "[occd rotation 3]")
    assert not seed_answered({"messages": [{"role": "user", "content": "[occd rotation 2]"},
                                           {"role": "assistant", "content": "ok"},
                                           {"role": "user", "content": "[occd rotation 3]"}]}, "[occd rotation 3]")
    assert seed_answered({"messages": [{"role": "user", "content": "[occd rotation 3]"},
                                       {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]},
                         "[occd rotation 3]")
    st, sid = db
    gw = FakeGateway(sid, st=st)
    gw.polls_running = 10**9  # the seed turn never ends
    led = Ledger.open()
    rid = led.rotation_upsert(agent_id="main", session_key=KEY, era="db", old_session_id=sid, new_session_id=sid,
                              state="ARCHIVED", details={"idempotencyKey": "k", "marker": "[occd rotation 1]"})
    slept = []
    dr = DbRotation(led, rid, gw, wait_seconds=0.05, poll_seconds=0.01, sleep=lambda s: slept.append(s))
    with pytest.raises(BusyError, match="not finished"):
        dr.run("seed [occd rotation 1]")
    assert led.rotation_get(rid)["state"] == "ARCHIVED" and slept  # it polled, then deferred
    assert led.rotation_get(rid)["details"]["seedSent"] is True
    led.close()


# ---------------------------------------------------------------- did it take effect? (issue 21)

def test_db_rotation_confirms_reset_and_seed_from_the_database(db):
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger

    st, sid = db
    gw = FakeGateway(sid, st=st)
    with Ledger.open() as led:
        res = rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
        row = led.rotations()[0]
    assert res["state"] == "COOLDOWN"
    d = row["details"]
    assert d["seqBefore"] == 12 and d["resetBoundary"] == {"seq": 13} and d["seedConfirmed"] is True


def test_db_reset_that_changes_nothing_fails_the_rotation_and_sends_no_seed(db):
    """sessions.reset answers ok but nothing changes (OpenClaw #126836): no reset event, no new window, the
    same sessionStartedAt. The rotation is recorded as failed with the reason; no seed (no model call)."""
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger

    st, sid = db
    gw = FakeGateway(sid, st=st, reset_noop=True)
    with Ledger.open() as led:
        with pytest.raises(OccdError) as ei:
            rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
        assert ei.value.code == "ROTATION_FAILED" and "no reset boundary appeared" in ei.value.message
        row = led.rotations()[0]
        (act,) = led.history(kind="rotate")
    assert gw.sent == {} and "send" not in gw.calls
    assert row["state"] == "IDLE" and "no reset boundary" in row["error"]
    assert act["outcome"] == "failed" and "no reset boundary" in act["error"]


def test_db_seed_missing_from_the_database_fails_the_rotation(db):
    from occd.rotation.rotate import rotate_session
    from occd.ledger import Ledger

    st, sid = db
    gw = FakeGateway(sid, st=st, seed_lost=True)
    with Ledger.open() as led:
        with pytest.raises(OccdError) as ei:
            rotate_session(_settings(), ref=KEY, gateway=gw, ledger=led)
        assert "seed" in ei.value.message and "not in OpenClaw's database" in ei.value.message
        assert led.rotations()[0]["state"] == "IDLE"


def test_db_reset_noop_is_a_failure_in_the_daemons_rotation_path(db, monkeypatch):
    """Through the daemon's rotation path (jobs.rotate._act): the failed confirmation is a failure (False), which
    jobs.rotate.run hands to the rotation breaker (brk.record_result(ok=False))."""
    from occd.rotation import rotate as ar
    from occd.jobs import JobContext
    from occd.jobs import rotate as jr
    from occd.ledger import Ledger

    st, sid = db
    gw = FakeGateway(sid, st=st, reset_noop=True)
    orig = ar.rotate_session
    monkeypatch.setattr(ar, "rotate_session", lambda *a, **k: orig(*a, gateway=gw, **k))

    class D:
        policy, reason, details = "rotation", "test", {}

    class Obs:
        agent, session_id, session_key = "main", sid, KEY

    counts = {"rotated": 0, "deferred": 0, "failed": 0}
    with Ledger.open() as led:
        ctx = JobContext(settings=_settings(), ledger=led, state_dir=Path(os.environ["OPENCLAW_STATE_DIR"]))
        assert jr._act(ctx, Obs, D, counts) is False
    assert counts["failed"] == 1 and gw.sent == {}
