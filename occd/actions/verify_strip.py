"""Did a file-era strip do what occd predicted? After the next real turn, the figure OpenClaw reports for it
(the usage of the reply, which OpenClaw also records as the session's `totalTokens` in sessions.json) must agree
with occd's prediction (`tokensAfterEstimate`, recorded with the strip) plus what the turn itself added.

    expected = predicted + growth   (growth: chars/4 estimate of the entries appended after the strip, reply included)
    agree   when  |reported − expected| ≤ TOLERANCE_RELATIVE × (saved + growth) + TOLERANCE_TOKENS

The prediction is like with like (the figure before minus the chars/4 estimate of what the strip removed), so
its error is that of two estimates — of what was removed (`saved`) and of what the turn added — against the real
tokenizer: 25 % of them, plus 2,000 tokens. A strip OpenClaw did not see (it kept the old context) misses by the
whole saving, which is outside the tolerance as soon as the saving exceeds a third of the turn plus ~2,700. A miss means occd's model of OpenClaw is wrong for
this session: it is recorded as a `verify-strip` action (outcome failed) and an open warning problem, shown by
`occd status SESSION`; an agreeing turn records `verify-strip` ok and closes the warning. A compaction between
the strip and the reply makes the figures incomparable: recorded as skipped. So does anything that replaced the
stripped file before its next turn (`occd restore`, a rotation, an undo, or a file whose bytes at the strip's end
are not where the stripped file ended): the check compares a strip with the next turn of the same file only.
Each record also says whether the whole next turn (up to the next user message, or the end of its run) ran
without a compaction (`nextTurnCompacted`): what occd.policy.savings counts as a compaction avoided.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

log = logging.getLogger("occd.actions")

TOLERANCE_RELATIVE = 0.25
TOLERANCE_TOKENS = 2000
LOOK_BACK_S = 7 * 86400            # strips older than this are not verified any more
MAX_READ = 16 * 1024 * 1024        # bytes read after the strip's end, at most
SOURCE = "strip"


def judge(predicted: int, growth: int, reported: int, saved: int) -> dict:
    """Pure: does `reported` agree with `predicted` + `growth`, given that the strip `saved` that many tokens?"""
    expected = predicted + growth
    slack = TOLERANCE_RELATIVE * (max(0, saved) + max(0, growth)) + TOLERANCE_TOKENS
    miss = reported - expected
    return {"predicted": predicted, "growthEstimate": growth, "expected": expected, "reported": reported,
            "miss": miss, "missPercent": round(100.0 * miss / expected, 1) if expected else None,
            "tolerance": round(slack), "agrees": abs(miss) <= slack}


TAIL_PEEK = 1024 * 1024  # bytes read back from the strip's end to find the stripped file's last line


def _leaf_at(fh, offset: int) -> str | None:
    """The id of the entry whose line ends exactly at byte `offset` (the stripped file's last line), or None when
    the bytes there are not the end of a complete entry (the file was replaced by another one since)."""
    if offset <= 0:
        return None
    start = max(0, offset - TAIL_PEEK)
    fh.seek(start)
    chunk = fh.read(offset - start)
    if not chunk.endswith(b"\n"):
        return None
    nl = chunk.rfind(b"\n", 0, len(chunk) - 1)
    if nl < 0 and start > 0:
        return None
    try:
        o = orjson.loads(chunk[nl + 1:])
    except orjson.JSONDecodeError:
        return None
    return o.get("id") if isinstance(o, dict) and isinstance(o.get("id"), str) else None


def next_turn(path: Path, offset: int) -> dict | None:
    """The first reply with usage after byte `offset` (where the stripped file ended): its usage and the chars/4
    estimate of what was appended up to it, and whether the rest of that turn (up to the next user message)
    holds a compaction (`compactedInTurn`: a run of many tool calls can outgrow the budget after its first
    reply) and has ended (`turnEnded`: the next user message is there). None while there is no reply yet;
    {"compacted": True} when a compaction came first; {"replaced": True} when the file is not the stripped file
    grown by appends (its bytes at `offset` do not end the stripped file's last entry, or the first appended
    entry does not continue from it)."""
    from occd.transcript.entries import entry_from_obj

    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < offset:
            return {"replaced": True}
        leaf = _leaf_at(fh, offset)
        if leaf is None:
            return {"replaced": True}
        if size == offset:
            return None
        fh.seek(offset)
        data = fh.read(MAX_READ)
    growth = 0
    first = True
    found: dict | None = None
    users = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            o = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # a line being written
        if not isinstance(o, dict):
            continue
        if first:
            first = False
            if "parentId" in o and o.get("parentId") != leaf:
                return {"replaced": True}
        if o.get("type") == "compaction":
            if found is None:
                return {"compacted": True}
            found["compactedInTurn"] = True
            return found
        e = entry_from_obj(o, 0, 0, 0, 0, 3)
        if e.type == "message" and e.role == "user":
            users += 1
            if found is not None and users > 1:
                found["turnEnded"] = True  # the turn after it began: this one ran to its end
                return found
        if found is not None:
            continue
        if e.type in ("message", "custom_message"):
            growth += e.est_tokens
        if e.type == "message" and e.role == "assistant" and e.usage_tokens is not None:
            found = {"reported": e.usage_tokens, "growth": growth, "compactedInTurn": False, "turnEnded": False}
            if users == 0:
                users = 1  # a reply without its user message in range: the next user message starts a new turn
    return found


def _pending(led, now: float) -> dict:
    """(agent, session) -> its newest real strip of the last week not yet verified."""
    rows = led._rows("SELECT * FROM actions WHERE ts >= ? AND kind IN ('strip', 'edit', 'verify-strip', 'restore', "
                     "'rotate', 'rotate-undo') ORDER BY ts", (now - LOOK_BACK_S,))
    acts = [led._action_dict(r) for r in rows]
    newest: dict = {}
    verified: dict = {}
    replaced: dict = {}
    for a in acts:
        k = (a["agent_id"], a["session_id"])
        if a["kind"] in ("strip", "edit") and a["outcome"] == "ok" and not a["dry_run"]:
            if k not in newest or a["ts"] > newest[k]["ts"]:
                newest[k] = a
        elif a["kind"] == "verify-strip":
            verified[k] = max(verified.get(k, 0), a["ts"])
        elif a["outcome"] == "ok" and not a["dry_run"]:   # the file was replaced by occd itself
            replaced[k] = a
    out = {}
    for k, a in newest.items():
        if verified.get(k, -1) >= a["ts"]:
            continue
        r = replaced.get(k)
        out[k] = dict(a, _replaced_by=r["kind"]) if r is not None and r["ts"] >= a["ts"] else a
    return out


def _compacted_since(obs, since: float) -> bool:
    """OpenClaw recorded a compaction (sessions.json's compactionCheckpoints) at or after `since`."""
    return any(at >= since for _reason, at in (obs.checkpoints or ()))


def outgrew_room(a: dict, obs, subject: str) -> dict | None:
    """The open problem for a budget strip after which OpenClaw compacted anyway although the strip left room for
    a run like the recent ones: the next run was larger than that room. occd acts between runs, so such a run
    compacts; said in `status` and `doctor` (issue 30.1: "where a single run cannot fit, say so"). None for other
    strips (a window too small for its agent is its own problem: occd.jobs.window)."""
    b = a.get("before") or {}
    budget, after, growth = b.get("promptBudget"), b.get("predictedAfter"), b.get("growthTokens")
    if not all(isinstance(v, int) for v in (budget, after, growth)) or b.get("windowTooSmall"):
        return None
    room = budget - after
    if room <= growth:
        return None  # the strip itself said there was no room for a run like the recent ones
    kept = b.get("keepToolResults")
    kept = f"the newest {kept} tool results kept" if isinstance(kept, int) else "the newest turns kept"
    return {"source": SOURCE, "subject": subject, "code": "RUN_OUTGREW_ROOM", "severity": "warn",
            "agent_id": obs.agent, "session_id": obs.session_id, "path": str(obs.path),
            "message": (f"OpenClaw compacted during the first run after occd's strip: the strip left {room} tokens of "
                        f"room under its {budget}-token budget ({kept}), the largest recent run took {growth}, and "
                        "this run took more. occd acts between runs: a run larger than that room compacts"),
            "hint": "a larger contextWindow gives a run more room (occd, and the lean view too, act only before a run)",
            "details": {"promptBudget": budget, "predictedAfter": after, "roomTokens": room, "growthTokens": growth,
                        "stripActionId": a["id"]}}


def verify_strips(led, sessions, now: float) -> dict:
    """Compare each pending strip with its session's next real turn (file era); record the outcome."""
    counts = {"agreed": 0, "missed": 0, "waiting": 0, "skipped": 0}
    pending = _pending(led, now)
    if not pending:
        return counts
    for obs in sessions:
        a = pending.get((obs.agent, obs.session_id))
        if a is None or obs.era != "file" or not obs.path:
            continue
        after = a.get("after") or {}
        predicted, size_after = after.get("tokensAfterEstimate"), after.get("sizeAfter")
        if not isinstance(predicted, int) or not isinstance(size_after, int):
            continue
        subject = f"strip:{obs.agent}/{obs.session_id}"
        base = {"actionId": a["id"], "stripAt": a["ts"]}
        if a.get("_replaced_by"):
            turn = {"why": f"the stripped file was replaced since (occd {a['_replaced_by']}) before a turn ran "
                           f"on it: no next turn of the same file to compare"}
        elif _compacted_since(obs, a["ts"]):
            turn = {"why": "OpenClaw compacted the session after the strip: its next figure is the compacted "
                           "one, not comparable", "compacted": True}
        else:
            try:
                turn = next_turn(Path(obs.path), size_after)
            except OSError:
                continue
            if turn is None:
                counts["waiting"] += 1
                continue
            if turn.get("compacted"):
                turn = {"why": "OpenClaw compacted before the next reply: not comparable", "compacted": True}
            elif turn.get("replaced"):
                turn = {"why": "the file is no longer the stripped file grown by new turns (replaced or "
                               "rewritten since): no next turn of the same file to compare"}
        if "why" in turn:
            led.record_action("verify-strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              outcome="skipped", reason=turn["why"], before=base,
                              after={"nextTurnCompacted": True} if turn.get("compacted") else None, now=now)
            outgrew = outgrew_room(a, obs, subject) if turn.get("compacted") else None
            led.sync_problems((SOURCE,), [outgrew] if outgrew else [], now=now, subjects=[subject])
            counts["skipped"] += 1
            continue
        compacted = turn["compactedInTurn"]
        if not turn["turnEnded"] and not compacted:
            if obs.running:
                counts["waiting"] += 1  # the run goes on: whether it compacts is known at its end
                continue
            at_strip = (a.get("before") or {}).get("compactionCount")  # OpenClaw's own count (sessions.json)
            compacted = isinstance(at_strip, int) and (obs.compaction_count or 0) > at_strip
        before = after.get("tokensBefore")
        saved = before - predicted if isinstance(before, int) else predicted
        j = judge(predicted, turn["growth"], turn["reported"], saved)
        j["saved"] = saved
        j["nextTurnCompacted"] = bool(compacted)  # occd.policy.savings: a compaction avoided only when False
        if compacted and (outgrew := outgrew_room(a, obs, subject)):
            led.sync_problems((SOURCE,), [outgrew], now=now, subjects=[subject])
        if j["agrees"]:
            led.record_action("verify-strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              outcome="ok", reason=f"the next turn reported {j['reported']} tokens, "
                              f"{j['expected']} expected (within ±{j['tolerance']})", before=base, after=j, now=now)
            led.sync_problems((SOURCE,), [], now=now, subjects=[subject])
            counts["agreed"] += 1
            continue
        why = (f"the next turn after the strip reported {j['reported']} tokens; occd predicted {j['expected']} "
               f"({predicted} after the strip + {j['growthEstimate']} the turn added): off by {j['miss']:+d} "
               f"({j['missPercent']:+.0f}%), tolerance ±{j['tolerance']}")
        led.record_action("verify-strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                          outcome="failed", reason=why, before=base, after=j, now=now)
        led.sync_problems((SOURCE,), [{
            "source": SOURCE, "subject": subject, "code": "STRIP_PREDICTION_MISS", "severity": "warn",
            "agent_id": obs.agent, "session_id": obs.session_id, "path": str(obs.path), "message": why,
            "hint": "occd's model of OpenClaw is wrong for this session (did OpenClaw keep the old context in "
                    "memory?): `occd info` and `occd logs` show more; report it with `occd status SESSION --json`",
            "details": j}], now=now, subjects=[subject])
        log.warning("%s/%s: strip prediction missed: %s", obs.agent, obs.session_id[:13], why)
        counts["missed"] += 1
    return counts
