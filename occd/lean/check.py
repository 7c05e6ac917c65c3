"""Did the lean view really run? The plugin records each assemble() call per session (time, session id,
counts: occd/lean/plugin, `withTurn`); here each turn OpenClaw stored for a session with the lean view on is
matched with a recorded call. A turn is one user message and the reply after it; it went through the lean view
when a call (not one that failed inside assemble()) was recorded between the user message and the reply (from
SLACK_S before the one to AFTER_REPLY_S after the other; each call covers one turn). Turns that did not — the
plugin quarantined or "degraded to legacy", the slot switched back, the plugin not loaded after an OpenClaw
upgrade, `agent --local` or a CLI backend that never calls assemble() — open a LEAN_BYPASSED problem (ledger):
named by `occd status`, failing `status --check` and `doctor`, until later turns go through it again.

Only turns after the lean view was turned on for the session, and after the last turn already judged (kept in
lean/checked.json), are counted; when the plugin's bounded record is full, only turns it still covers.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import orjson

from occd.policy.estimate import entry_time

log = logging.getLogger("occd.lean")

SLACK_S = 2.0       # a call may be recorded this long before the user message's own timestamp
AFTER_REPLY_S = 0.5  # and, clocks of one machine, at most this long after the reply's
SOURCE = "lean"
MAX_TURNS = 20  # the plugin keeps this many calls per session (index.js MAX_TURNS)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def stored_turns(lines, is_seed=None) -> list[dict]:
    """Pure: the turns in a transcript's lines: [{"userAt", "replyAt"}] (epoch seconds), a user message with the
    first assistant message after it. `is_seed(user_text, reply_text)` names occd's own seed of a file-era rotation
    (written, never sent to a model): left out."""
    out, user = [], None
    for raw in lines:
        try:
            o = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(o, dict) or o.get("type") != "message" or not isinstance(o.get("message"), dict):
            continue
        m = o["message"]
        if m.get("role") == "user":
            user = (entry_time(o), _text(m.get("content")))
        elif m.get("role") == "assistant" and user is not None:
            at = entry_time(o)
            if user[0] is not None and at is not None and not (is_seed and is_seed(user[1], _text(m.get("content")))):
                out.append({"userAt": user[0], "replyAt": at})
            user = None
    return out


def judge(turns: list[dict], calls: list[dict], since: float, new_after: float | None = None) -> dict:
    """Pure: which turns with a reply after `since` (the lean view on) had no recorded assemble() call; counted
    are those after `new_after` (the last turn already judged), matched together with the earlier ones so that a
    call already taken by an earlier turn cannot vouch for a new one."""
    good = sorted(c["at"] / 1000.0 for c in calls if isinstance(c, dict) and isinstance(c.get("at"), (int, float))
                  and not c.get("error"))
    errors = sum(1 for c in calls if isinstance(c, dict) and c.get("error"))
    floor = since
    if len(calls) >= MAX_TURNS and calls:  # the plugin forgot older calls: judge only what it still covers
        floor = max(floor, min(c["at"] for c in calls if isinstance(c.get("at"), (int, float))) / 1000.0 - SLACK_S)
    judged = sorted((t for t in turns if t["replyAt"] > floor), key=lambda t: t["replyAt"])
    # each call covers one turn: turns by reply time, each takes the earliest unused call inside its window
    used = [False] * len(good)
    missed = []
    for t in judged:
        for i, c in enumerate(good):
            if not used[i] and t["userAt"] - SLACK_S <= c <= t["replyAt"] + AFTER_REPLY_S:
                used[i] = True
                break
        else:
            missed.append(t)
    if new_after is not None:
        judged = [t for t in judged if t["replyAt"] > new_after]
        missed = [t for t in missed if t["replyAt"] > new_after]
    return {"judged": len(judged), "bypassed": len(missed), "errors": errors,
            "lastBypassAt": max((t["replyAt"] for t in missed), default=None),
            "until": max((t["replyAt"] for t in judged), default=None)}


def _turned_on(led, agent: str, key: str, marker: dict) -> float | None:
    rows = led._rows("SELECT MAX(ts) AS ts FROM actions WHERE kind = 'lean' AND outcome = 'ok' AND dry_run = 0 "
                     "AND agent_id = ? AND session_key = ?", (agent, key))
    t = rows[0]["ts"] if rows else None
    return t if t is not None else marker.get("enabledAt")


def _lines(state_dir: Path, obs) -> list[bytes]:
    if obs.era == "file":
        if not obs.path:
            return []
        from occd.transcript.scan import open_transcript

        with open_transcript(obs.path) as fh:  # never blocks on a FIFO or device named like the transcript
            return fh.read().splitlines()
    from occd.openclaw.dbstore import DbStore

    with DbStore(state_dir, obs.agent) as st:
        return st.all_lines(st.resolve(obs.session_key))


def verify_lean(ctx, sessions, is_seed=None) -> dict:
    """Judge the new turns of every session with the lean view on; open or close its LEAN_BYPASSED problem.
    `is_seed`: see stored_turns (the caller knows the rotation's seed; the lean view does not)."""
    from occd import lean

    counts = {"leanJudged": 0, "leanBypassed": 0}
    if not lean.is_enabled(ctx.state_dir):
        return counts
    policy, stats = lean.read_policy(), lean.read_stats()
    marker = lean._read_json(lean.marker_path()) or {}
    checked_p = lean.lean_dir() / "checked.json"
    checked = lean._read_json(checked_p)
    checked = checked if isinstance(checked, dict) else {}
    dirty = False
    led, now = ctx.ledger, ctx.now()
    for obs in sessions:
        key = obs.session_key
        view = lean.session_view(stats, policy, key) if key else None
        if not view or not view.get("active"):
            continue
        on = _turned_on(led, obs.agent, key, marker)
        if on is None:
            continue
        done = float(checked.get(key) or 0)
        if obs.last_activity is not None and obs.last_activity <= max(on, done):
            continue  # nothing new since the last judgement
        try:
            turns = stored_turns(_lines(ctx.state_dir, obs), is_seed)
        except Exception as e:  # noqa: BLE001 - an unreadable session is the scan's to report
            log.debug("lean check of %s: %s", key, e)
            continue
        rec = (stats.get("sessions") or {}).get(key) or {}
        j = judge(turns, rec.get("turns") if isinstance(rec.get("turns"), list) else [], on, done or None)
        if not j["judged"]:
            continue
        counts["leanJudged"] += j["judged"]
        checked[key] = j["until"]
        dirty = True
        subject = f"lean:{obs.agent}/{key}"
        if not j["bypassed"]:
            led.sync_problems((SOURCE,), [], now=now, subjects=[subject])
            continue
        counts["leanBypassed"] += j["bypassed"]
        when = datetime.fromtimestamp(j["lastBypassAt"]).strftime("%Y-%m-%d %H:%M")
        msg = (f"{j['bypassed']} of {j['judged']} new turn(s) of {key} did not go through the lean view's "
               f"assemble() (last at {when}): the model saw the whole history although occd shows the lean view on")
        if j["errors"]:
            msg += f"; {j['errors']} call(s) failed inside assemble() and passed the history unchanged"
        res = led.sync_problems((SOURCE,), [{
            "source": SOURCE, "subject": subject, "code": "LEAN_BYPASSED", "severity": "fail",
            "agent_id": obs.agent, "session_id": obs.session_id, "message": msg, "details": j,
            "hint": "the plugin may be quarantined or degraded to legacy, the context-engine slot switched back, the "
                    "plugin not loaded after an OpenClaw upgrade, or the turns ran with `agent --local` or a CLI "
                    "backend: `occd lean status` and `occd doctor`; `occd lean enable` re-installs it"}],
            now=now, subjects=[subject])
        if res["opened"]:
            led.record_action("lean-check", obs.agent, obs.session_id, key, trigger="auto", outcome="failed",
                              reason=msg, after=j, now=now)
        log.warning("%s", msg)
    if dirty:
        lean.write_json_atomic(checked_p, checked)
    return counts


def slot_lost(state_dir: Path | None, env=None) -> str | None:
    """occd enabled the lean view for this state, but OpenClaw's context-engine slot names another engine now (an
    upgrade, `openclaw doctor --fix`, a hand edit): what the slot holds ('legacy' when unset), else None. While it
    is so, no session counts as covered by the lean view (the apply job protects them as if it were off), and
    `status --check` and `doctor` name it."""
    from occd import lean
    from occd.errors import OccdError
    from occd.openclaw.state import load_openclaw_config

    if state_dir is None or not lean.is_enabled(state_dir, env):
        return None
    try:
        owner = lean.slot_owner(load_openclaw_config(state_dir))
    except OccdError:  # a config that cannot be read says nothing about the slot (the scan names the file)
        return None
    return None if owner == lean.PLUGIN_ID else (owner or "legacy")


SLOT_LOST_HINT = "`occd lean enable` selects it again (or `occd lean disable`); meanwhile the daemon strips and " \
                 "rotates those sessions as if the lean view were off"
