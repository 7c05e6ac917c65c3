"""Assembling `occd status` and `occd history` from the ledger and the daemon's status file (read-only)."""

from __future__ import annotations

import os
import time

from occd import paths
from occd.errors import OccdError, UsageError
from occd.ledger import ACTION_KINDS, is_action_kind  # the ledger's one list of kinds (a newer ledger may hold more)
from occd.report.agent_view import _headroom, _index_entries, idle_summary, open_would  # noqa: F401 (re-exported)
from occd.report.rotations import rotations  # noqa: F401 - `occd status --rotations` (st.rotations)
from occd.report.savings import action_savings, cost_assumptions, savings_since  # noqa: F401 (cost_assumptions: re-exported)


def parse_since(text: str | None, now: float) -> float | None:
    """'7d', '12h', '30m', '90s', '2w'; 'today', 'yesterday'; a date '2026-11-22' or a time '2026-11-22T10:00'
    (local time unless it says otherwise) → epoch seconds."""
    if not text:
        return None
    from datetime import datetime

    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    if t in ("today", "yesterday"):
        start = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        return start - (86400 if t == "yesterday" else 0)
    try:
        back = float(t[:-1]) * mult[t[-1]] if t[-1] in mult else float(t)
    except (ValueError, IndexError):
        back = None
    if back is not None:
        if not back > 0:  # NaN, zero and negative durations: "since 0 ago" / "since the future" match nothing
            raise UsageError(f"--since {text!r} is not a positive duration",
                             "e.g. --since 7d, 12h, 30m (a time back from now), today, or 2026-11-22")
        return now - back
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        return dt.timestamp()  # naive: local time, as people mean it
    except ValueError:
        raise UsageError(f"--since {text!r} is not a duration, a day or a date",
                         "e.g. --since 7d, 12h, 30m, today, yesterday, 2026-11-22, 2026-11-22T10:00") from None




def _open_ledger():
    from occd.ledger import Ledger

    if not paths.ledger_path().exists():
        return None
    return Ledger.open(readonly=True)


def daemon_info(ledger, now: float) -> dict:
    from occd.runtime.lock import InstanceLock
    from occd.runtime.statusfile import read_status

    pid = InstanceLock.holder()
    st = read_status() or {}
    run = ledger.latest_daemon_run() if ledger else None
    out = {"running": pid is not None, "pid": pid if pid and pid > 0 else None,
           "started": st.get("started") if pid else None, "lastCycle": st.get("lastCycle"),
           "nextScan": st.get("nextScan") if pid else None, "mode": st.get("mode") if pid else None,
           "agentModes": (st.get("agentModes") or {}) if pid else {},
           "watch": _watch(st.get("watch")) if pid else None,  # {"mode": events | polling, "reason", "agents"}
           "logDegraded": st.get("logDegraded") if pid else None}  # why the daemon's log is not written, if so
    if run:
        out["lastRun"] = {k: run.get(k) for k in ("pid", "started", "stopped", "heartbeat", "last_cycle", "mode",
                                                   "stop_reason") if k in run}
        if out["lastCycle"] is None:
            out["lastCycle"] = run.get("last_cycle")
    return out


def _watch(w: dict | None) -> dict | None:
    """The status file's `watch` with its maps keyed by agent and folder as lists ({"agent": id, "mode": watched |
    polled, "since", "reason"?}): ids are data, not field names (the JSON contract's camelCase keys)."""
    if not isinstance(w, dict):
        return None
    out = {k: v for k, v in w.items() if k not in ("agents", "other")}
    out["agents"] = [{"agent": a, **v} for a, v in sorted((w.get("agents") or {}).items()) if isinstance(v, dict)]
    out["folders"] = [{"path": p, **v} for p, v in sorted((w.get("other") or {}).items()) if isinstance(v, dict)]
    return out


def agent_watch(dinfo: dict, agent: str) -> dict | None:
    """{"mode": watched | polled, "since", "reason"?} of one agent from the running daemon's status file; None when
    no daemon runs or it has not seen the agent's folders (never "watched" for a folder nothing watches)."""
    w = dinfo.get("watch") or {}
    if not dinfo.get("running") or not w:
        return None
    return next(({k: v for k, v in x.items() if k != "agent"} for x in w.get("agents") or [] if x["agent"] == agent),
                None)


def status(settings, now: float | None = None, top: int = 5) -> dict:
    from occd.openclaw.figure import percent

    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:  # before the first cycle: what OpenClaw's state shows already, and what is missing
        from occd.report.first_contact import first_contact

        d = daemon_info(None, now)
        return {"ledger": None, "daemon": d, "agents": [], "lastScan": None,
                "note": "no ledger yet: run `occd run --once`, `occd demo`, or install the service",
                "firstContact": first_contact(settings, d), "schemaProblems": schema_problems(settings)}
    with led:
        agents = []
        counts = led.action_counts_since(now - 86400)
        latest = led.latest_observations()
        by_agent: dict[str, list[dict]] = {}
        for o in latest:
            by_agent.setdefault(o["agent"], []).append(o)
        breakers = led.breakers()
        day = led.history(since=now - 86400, limit=5000)
        week = led.history(kind="archive", since=now - 7 * 86400, limit=100_000)
        firsts = (led.first_seen(), led.first_look())  # recent sessions occd has not seen run (two queries in all)
        would = open_would(day)
        emergencies = _emergencies(day)
        marks = {(e["agent"], e["sessionId"]): e for e in emergencies}
        saved = savings_since(led, settings, now - 7 * 86400)  # the one sum `occd stats` shows too
        dinfo = daemon_info(led, now)
        would_of: dict[str, list] = {}
        for w in would:  # grouped once: one pass for 2,000 agents, not one per agent
            would_of.setdefault(w["agent_id"], []).append(w)
        breakers_of: dict[str, list] = {}
        for b in breakers:
            breakers_of.setdefault(b.agent, []).append(b)
        where: dict = {}  # the state folder and OpenClaw's release, looked up once for every agent
        for a in led.agents():
            obs = by_agent.get(a["id"], [])

            def pct(o):
                return (100.0 * o["context_tokens"] / o["context_window"]) if o.get("context_tokens") and o.get("context_window") else -1

            biggest = sorted(obs, key=pct, reverse=True)[:top]
            obs_of = {o["session_id"]: o for o in obs}
            entries = _index_entries(settings, a["id"], {o["session_id"] for o in biggest}, where)
            policy = settings.policy_for(a["id"])
            # the running daemon's mode (its flags and overrides), else the config's
            mode = dinfo["agentModes"].get(a["id"]) or (dinfo.get("mode") if dinfo["running"] else None)
            agents.append({
                "id": a["id"], "era": a.get("era"), "sessions": len(obs), "mode": mode or policy.mode,
                "modeSource": "daemon" if mode else "config",
                "emergencies": [{**e, "current": _current(e, obs_of.get(e["sessionId"], {})) is not None}
                                for e in emergencies if e["agent"] == a["id"]],
                "savings7d": saved["agents"].get(a["id"]),
                "compactionsTotal": sum(o.get("compaction_count") or 0 for o in obs),
                "biggest": [{"sessionId": o["session_id"], "key": o.get("session_key"),
                             "contextTokens": o.get("context_tokens"), "tokensSource": o.get("tokens_source"),
                             "contextWindow": o.get("context_window"),
                             "contextPercent": percent(o.get("context_tokens"), o.get("context_window")),
                             **_headroom(o, entries.get(o["session_id"])),
                             "compactions": o.get("compaction_count"), "size": o.get("size"),
                             "emergency": _current(marks.get((a["id"], o["session_id"])), o)} for o in biggest],
                "breakers": [{"kind": b.kind, "state": b.state, "reason": b.reason, "openedAt": b.opened_at}
                             for b in breakers_of.get(a["id"], [])],
                "idle": idle_summary(obs, policy, now, week, a["id"], firsts),
                "actions24h": counts.get(a["id"], {}),
                # how the running daemon sees this agent's writes: watched or polled, since when (None: no daemon)
                "watch": agent_watch(dinfo, a["id"]),
                "wouldDo": [{"sessionId": w["session_id"], "kind": w["kind"], "reason": w["reason"], "ts": w["ts"]}
                            for w in would_of.get(a["id"], [])][:10],
            })
        out = {"ledger": str(led.path), "daemon": dinfo, "lastScan": led.last_scan(), "agents": agents,
               "scanFailure": _scan_failure(led),
               "savings7d": saved["total"], "schemaProblems": schema_problems(settings),
               "costAssumptions": cost_assumptions(settings, saved.get("priceSources") or [])}
        from occd.lean import sessions_summary  # the lean view per session: on or not, and what it saves

        out["lean"] = _lean_summary(settings, sessions_summary())
        bypassed = {}
        try:  # open problems (a damaged backup, turns that bypassed the lean view, ...): named, never silent
            open_ = led.open_problems(severity="fail")
        except Exception:  # noqa: BLE001 - an older ledger without the table
            open_ = []
        out["problems"] = [{"subject": p["subject"], "code": p["code"], "message": p["message"], "hint": p.get("hint"),
                            "firstSeen": p["first_seen"]} for p in open_]
        for p in open_:
            if p["code"] == "LEAN_BYPASSED":
                bypassed[p["subject"].split("/", 1)[-1]] = p["message"]
        for a in agents:
            for b in a["biggest"]:
                b["lean"] = out["lean"]["sessions"].get(b.get("key"))
                if b["lean"] is not None and b.get("key") in bypassed:
                    b["lean"] = {**b["lean"], "bypassed": bypassed[b["key"]]}
        for k, msg in bypassed.items():  # occd no longer just says the lean view is on
            if k in out["lean"]["sessions"]:
                out["lean"]["sessions"][k] = {**out["lean"]["sessions"][k], "bypassed": msg}
        try:
            out["llmSpendToday"] = led.spend_today(now)
        except Exception:  # noqa: BLE001
            pass
        return out


def _scan_failure(led) -> dict | None:
    try:
        return led.scan_failure()
    except Exception:  # noqa: BLE001 - an older ledger
        return None


def _lean_summary(settings, lean: dict) -> dict:
    """The lean view per session; while OpenClaw's slot is not occd's, no session counts as covered by it."""
    if not lean.get("enabled"):
        return lean
    from occd.lean.check import slot_lost
    from occd.openclaw.state import resolve_state_dir

    try:
        lost = slot_lost(resolve_state_dir(state_dir=getattr(settings, "state_dir", None)))
    except OccdError:
        lost = None
    if lost is None:
        return lean
    return {**lean, "slotLost": lost, "sessions": {k: {**v, "active": False, "slotLost": lost}
                                                   for k, v in lean["sessions"].items()}}


def _current(e: dict | None, obs: dict) -> str | None:
    """The emergency mark of a session, unless the agent was active after occd handled it."""
    if e is None:
        return None
    last = obs.get("last_activity")
    return None if last is not None and e.get("ts") is not None and last > e["ts"] else e["kind"]


def _emergencies(actions: list[dict]) -> list[dict]:
    """Sessions the daemon found in a spiral or blocked (newest action per session, from the day's actions)."""
    out: dict = {}
    for a in actions:  # newest first
        b = a.get("before") or {}
        kind = b.get("emergency") if isinstance(b, dict) else None
        pol = a.get("policy") or ""
        if not kind and pol.startswith("emergency:"):  # a rotation's own record names the emergency in its policy
            kind = pol.split(":", 1)[1].upper()
        if not kind or a.get("trigger") != "auto":
            continue
        key = (a.get("agent_id"), a.get("session_id"))
        if key in out:
            continue
        done = a["kind"] if not a.get("dry_run") and a.get("outcome") == "ok" else \
            ("would " + a["kind"] if a.get("dry_run") else f"{a['kind']} {a.get('outcome')}")
        out[key] = {"agent": key[0], "sessionId": key[1], "key": a.get("session_key"), "kind": kind,
                    "reason": a.get("reason"), "action": done, "ts": a.get("ts"),
                    "ended": not a.get("dry_run") and a.get("outcome") == "ok"}
    return list(out.values())


def stats(settings, since: str | None = "7d", now: float | None = None) -> dict:
    """`occd stats`: what the daemon saved (occd.policy.savings) since a time."""
    from occd.policy.savings import AVOID_HORIZON_TURNS

    now = time.time() if now is None else now
    start = parse_since(since, now)
    led = _open_ledger()
    if led is None:
        return {"since": start, "total": None, "agents": {}, "sessions": [],
                "note": "no ledger yet: run `occd run --once`, `occd demo`, or install the service"}
    with led:
        s = savings_since(led, settings, start)
    return {"since": start, **s, "assumptions": cost_assumptions(settings, s.get("priceSources") or []) | {
        "tokensRemoved": "context tokens the strips took out of what the model is sent (the figure before "
                         "minus the figure after; never more than the context before, nor the prompt it was sent)",
        "compactionsAvoided": f"strips made when OpenClaw was predicted to compact within {AVOID_HORIZON_TURNS} turns "
                              "whose next turn then ran without a compaction, and rotations whose new session's "
                              "first turn did (awaitingNextTurn: not known yet, not counted)",
        "undone": "strips and rotations taken back (`occd restore`, `occd rotate --undo`): their savings are withdrawn"}}


def session_status(settings, ref: str, now: float | None = None, since_days: float = 30) -> dict:
    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:
        raise OccdError("No ledger yet", "run `occd run --once` first", code="LEDGER_MISSING")
    with led:
        from occd.openclaw.ids import resolve

        s = resolve(led.sessions(), ref, id_of=lambda r: r["session_id"], key_of=lambda r: r.get("session_key"),
                    hint_list="the ledger knows the sessions the daemon has scanned (`occd run --once` scans now)")
        buckets = led.series_buckets(s["agent_id"], s["session_id"], since=now - since_days * 86400, until=now, buckets=60)
        series = led.series(s["agent_id"], s["session_id"], since=now - since_days * 86400, limit=2000)
        from occd.report.inspect import live_figure

        return {"sessionId": s["session_id"], "key": s.get("session_key"), "agent": s["agent_id"], "path": s.get("path"),
                "firstSeen": s.get("first_seen"), "lastSeen": _last_seen(led, s), "archivedAt": s.get("archived_at"),
                # the context now, the figure `occd list`/`info` show (after a strip: the estimate after it)
                "context": None if s.get("archived_at") else live_figure(settings, s["agent_id"], s["session_id"]),
                "buckets": buckets, "observations": series[-50:],
                "actions": led.history(session=s["session_id"], limit=50),
                "backups": led.backups(session_id=s["session_id"], include_pruned=True),
                # what the checks found about this session (a strip prediction miss, turns that bypassed the lean
                # view, a damaged backup): open ones first
                "problems": _session_problems(led, s)}


def _session_problems(led, s: dict) -> list[dict]:
    try:
        rows = led.problems_of(agent=s["agent_id"], session_id=s["session_id"], limit=20)
    except Exception:  # noqa: BLE001 - an older ledger without the table
        return []
    rows.sort(key=lambda p: p.get("resolved_at") is not None)
    return [{"code": p["code"], "severity": p["severity"], "subject": p["subject"], "message": p["message"],
             "hint": p.get("hint"), "firstSeen": p["first_seen"], "lastSeen": p["last_seen"],
             "resolvedAt": p.get("resolved_at"), "resolution": p.get("resolution"), "details": p.get("details")}
            for p in rows]


def _last_seen(led, s: dict):
    """When the daemon last saw the session: its newest observation, or the row's last_seen (which is only
    refreshed hourly for an unchanged session), whichever is later."""
    rows = led._rows("SELECT MAX(o.ts) AS ts FROM observations o WHERE o.session_pk = ?", (s["id"],))
    newest = rows[0]["ts"] if rows else None
    return max(x for x in (newest, s.get("last_seen")) if x is not None) if (newest or s.get("last_seen")) else None


def new_actions(*, after_id: int, agent=None, session=None, kind=None, limit=1000, outcome=None) -> list[dict]:
    """Actions recorded after `after_id`, oldest first (history --follow polls this), with history's filters."""
    led = _open_ledger()
    if led is None:
        return []
    with led:
        session = _history_session(led, session, agent)
        return list(reversed(led.history(agent=agent, session=session, kind=kind, limit=limit, after_id=after_id,
                                         outcome=outcome)))


def _history_session(led, ref: str | None, agent: str | None = None) -> str | None:
    """`--session` resolved as every command resolves a session (occd.openclaw.ids: the part a table shows, any unique
    part of 4+ characters, a prefix, an id or a key) among the sessions the ledger has actions of: the full id,
    or the key as given. Several matches: the usual AMBIGUOUS_SESSION error. No match: a session the ledger has
    seen (scanned) without actions is itself (nothing recorded for it); anything else is SESSION_NOT_FOUND, as
    `occd info` and `occd restore` say."""
    if not ref:
        return ref
    from occd.openclaw.ids import resolve

    pairs = led.action_sessions(agent)
    if any(k == ref for _, k in pairs):
        return ref  # a key: every session that has had it (a rotation keeps the key)
    try:
        return resolve(pairs, ref, id_of=lambda x: x[0], key_of=lambda x: x[1])[0]
    except OccdError as e:
        if e.code == "AMBIGUOUS_SESSION":
            raise
    seen = [(s["session_id"], s.get("session_key")) for s in led.sessions(agent) if s.get("session_id")]
    if any(k == ref for _, k in seen):
        return ref
    return resolve(seen, ref, id_of=lambda x: x[0], key_of=lambda x: x[1],
                   hint_list="occd has recorded nothing for it; `occd list` shows the sessions")[0]


HISTORY_OUTCOMES = ("ok", "failed", "skipped", "deferred", "would")  # would: observe mode's dry runs


def history(settings=None, *, agent=None, session=None, kind=None, since=None, limit=200, now=None,
            with_total: bool = False, outcome: str | None = None):
    """Actions newest first; with_total: (rows, how many match without the limit). An unknown kind or agent is
    an error (a typo would otherwise look like 'nothing happened'). Reads the ledger only: `settings` is not
    needed (kept for callers that pass it)."""
    now = time.time() if now is None else now
    since_ts = parse_since(since, now)
    if outcome:
        _check_known("outcome", outcome, HISTORY_OUTCOMES)
    led = _open_ledger()
    if led is None:
        if kind and not is_action_kind(kind):
            _check_known("kind", kind, ACTION_KINDS)
        if session:
            raise OccdError(f"Session '{session}' not found", "occd has recorded nothing yet (no ledger); "
                            "`occd list` shows the sessions", code="SESSION_NOT_FOUND")
        return ([], 0) if with_total else []
    with led:
        if kind and not is_action_kind(kind):
            _check_known("kind", kind, sorted(set(ACTION_KINDS) | set(led.action_kinds())))
        if agent:
            known = [a["id"] for a in led.agents()]
            if agent not in known:
                import difflib

                near = difflib.get_close_matches(agent, known, n=1)
                raise OccdError(f"Agent '{agent}' not found in the ledger",
                                (f"did you mean {near[0]}? " if near else "") + "agents: " + (", ".join(known) or "none yet"),
                                code="AGENT_NOT_FOUND")
        session = _history_session(led, session, agent)
        rows = led.history(agent=agent, session=session, kind=kind, since=since_ts, limit=limit, outcome=outcome)
        action_savings(led, rows, settings)
        if not with_total:
            return rows
        total = len(rows) if len(rows) < limit else led.history_count(agent=agent, session=session, kind=kind,
                                                                      since=since_ts, outcome=outcome)
        return rows, total


def _check_known(what: str, value: str, known) -> None:
    if value in known:
        return
    import difflib

    near = difflib.get_close_matches(value, list(known), n=1)
    raise UsageError(f"--{what} {value!r} is not one of {', '.join(sorted(set(known)))}",
                     f"did you mean {near[0]}?" if near else f"e.g. --{what} {sorted(known)[0]}")


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def schema_problems(settings) -> list[dict]:
    """An agent database occd reads but acts on nothing for (occd.openclaw.dbschema: unverified) or cannot read:
    {code SCHEMA_UNVERIFIED | SCHEMA_UNREADABLE, message (the agent, schema, release, why), hint}. Read-only."""
    from occd.errors import OccdError
    from occd.openclaw.health import check_agent_db
    from occd.openclaw.state import list_agents, resolve_state_dir

    try:
        sd = resolve_state_dir(state_dir=getattr(settings, "state_dir", None))
        agents = [a for a in list_agents(sd) if a.era == "db"]
    except OccdError:
        return []
    out = []
    for a in agents:
        for c in check_agent_db(sd, a, None):
            if c.status == "fail":
                level = (c.data or {}).get("level")
                out.append({"code": "SCHEMA_UNVERIFIED" if level == "unverified" else "SCHEMA_UNREADABLE",
                            "message": c.detail, "hint": c.hint})
    return out
