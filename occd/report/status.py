"""Assembling `occd status` and `occd history` from the ledger and the daemon's status file (read-only)."""

from __future__ import annotations

import os
import time

from occd import paths
from occd.errors import OccdError, UsageError
from occd.ledger import ACTION_KINDS, is_action_kind  # the ledger's one list of kinds (a newer ledger may hold more)


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
        if t[-1] in mult:
            return now - float(t[:-1]) * mult[t[-1]]
        return now - float(t)
    except (ValueError, IndexError):
        pass
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


def open_would(day: list[dict]) -> list[dict]:
    """Observe mode's "would" rows that still stand, newest first: one per session and kind, and none that an
    action done on the session since (an --act cycle's strip, a manual edit) has made history."""
    done: dict[tuple, float] = {}
    for a in day:
        if not a.get("dry_run") and a.get("outcome") == "ok":
            k = (a.get("agent_id"), a.get("session_id"))
            done[k] = max(done.get(k, 0.0), a["ts"])
    out, seen = [], set()
    for a in day:  # newest first
        if not a.get("dry_run") or a.get("trigger") != "auto":
            continue
        k = (a.get("agent_id"), a.get("session_id"), a["kind"])
        if k in seen or done.get(k[:2], -1.0) >= a["ts"]:
            continue
        seen.add(k)
        out.append(a)
    return out


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
           "watch": st.get("watch") if pid else None,  # {"mode": events | polling, "reason": ...}
           "logDegraded": st.get("logDegraded") if pid else None}  # why the daemon's log is not written, if so
    if run:
        out["lastRun"] = {k: run.get(k) for k in ("pid", "started", "stopped", "heartbeat", "last_cycle", "mode",
                                                   "stop_reason") if k in run}
        if out["lastCycle"] is None:
            out["lastCycle"] = run.get("last_cycle")
    return out


def status(settings, now: float | None = None, top: int = 5) -> dict:
    from occd.openclaw.figure import percent

    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:
        return {"ledger": None, "daemon": daemon_info(None, now), "agents": [], "lastScan": None,
                "note": "no ledger yet: run `occd run --once`, `occd demo`, or install the service",
                "schemaProblems": schema_problems(settings)}
    with led:
        agents = []
        counts = led.action_counts_since(now - 86400)
        latest = led.latest_observations()
        by_agent: dict[str, list[dict]] = {}
        for o in latest:
            by_agent.setdefault(o["agent"], []).append(o)
        breakers = led.breakers()
        day = led.history(since=now - 86400, limit=5000)
        would = open_would(day)
        emergencies = _emergencies(day)
        marks = {(e["agent"], e["sessionId"]): e for e in emergencies}
        from occd.policy.savings import summarize

        saved = summarize(led.history(since=now - 7 * 86400, limit=100000), horizon=settings.cost.horizon_turns)
        dinfo = daemon_info(led, now)
        for a in led.agents():
            obs = by_agent.get(a["id"], [])

            def pct(o):
                return (100.0 * o["context_tokens"] / o["context_window"]) if o.get("context_tokens") and o.get("context_window") else -1

            biggest = sorted(obs, key=pct, reverse=True)[:top]
            entries = _index_entries(settings, a["id"], {o["session_id"] for o in biggest})
            policy = settings.policy_for(a["id"])
            # the running daemon's mode (its flags and overrides), else the config's
            mode = dinfo["agentModes"].get(a["id"]) or (dinfo.get("mode") if dinfo["running"] else None)
            agents.append({
                "id": a["id"], "era": a.get("era"), "sessions": len(obs), "mode": mode or policy.mode,
                "modeSource": "daemon" if mode else "config",
                "emergencies": [e for e in emergencies if e["agent"] == a["id"]],
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
                             for b in breakers if b.agent == a["id"]],
                "actions24h": counts.get(a["id"], {}),
                "wouldDo": [{"sessionId": w["session_id"], "kind": w["kind"], "reason": w["reason"], "ts": w["ts"]}
                            for w in would if w["agent_id"] == a["id"]][:10],
            })
        out = {"ledger": str(led.path), "daemon": dinfo, "lastScan": led.last_scan(), "agents": agents,
               "savings7d": saved["total"], "schemaProblems": schema_problems(settings),
               "costAssumptions": cost_assumptions(settings, saved.get("priceSources") or [])}
        from occd.lean import sessions_summary  # the lean view per session: on or not, and what it saves

        out["lean"] = sessions_summary()
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


def _headroom(obs: dict, entry: dict | None) -> dict:
    """OpenClaw's compaction point for the session and how far its context is from it (negative: past it), by
    the one function every command uses (occd.openclaw.figure: OpenClaw's recorded budget for this window, else its
    default reserve)."""
    from occd.openclaw.figure import session_figure

    fig = session_figure(entry=entry, window=obs.get("context_window"), session_id=obs.get("session_id"))
    point, tokens = fig.compact_at, obs.get("context_tokens")
    return {"compactionPoint": point, "toCompaction": point - tokens if point and tokens is not None else None}


def _index_entries(settings, agent: str, ids: set) -> dict[str, dict]:
    """OpenClaw's index entries of the sessions status shows (their budget records), {} when unreadable."""
    if not ids:
        return {}
    try:
        from pathlib import Path

        from occd.openclaw import FileStore, open_store, resolve_state_dir

        state_dir = Path(settings.state_dir) if getattr(settings, "state_dir", None) else resolve_state_dir()
        store = open_store(state_dir, agent)
        if isinstance(store, FileStore):  # the index alone: no stat of every transcript for a few entries
            return {e["sessionId"]: e for e in store.index().values()
                    if isinstance(e, dict) and isinstance(e.get("sessionId"), str) and e["sessionId"] in ids}
        return {i.session_id: (i.entry or {}) for i in store.sessions() if i.session_id in ids}
    except Exception:  # noqa: BLE001 - the default budget is shown then
        return {}


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
                    "reason": a.get("reason"), "action": done, "ts": a.get("ts")}
    return list(out.values())


def stats(settings, since: str | None = "7d", now: float | None = None) -> dict:
    """`occd stats`: what the daemon saved (occd.policy.savings) since a time."""
    from occd.policy.savings import AVOID_HORIZON_TURNS, summarize

    now = time.time() if now is None else now
    start = parse_since(since, now)
    led = _open_ledger()
    if led is None:
        return {"since": start, "total": None, "agents": {}, "sessions": [],
                "note": "no ledger yet: run `occd run --once`, `occd demo`, or install the service"}
    with led:
        s = summarize(led.history(since=start, limit=1_000_000), horizon=settings.cost.horizon_turns)
    return {"since": start, **s, "assumptions": cost_assumptions(settings, s.get("priceSources") or []) | {
        "tokensRemoved": "context tokens the strips took out of what the model is sent (the figure before "
                         "minus the figure after; never more than the context before, nor the prompt it was sent)",
        "compactionsAvoided": f"strips made when OpenClaw was predicted to compact within {AVOID_HORIZON_TURNS} turns"}}


def cost_assumptions(settings, sources: list) -> dict:
    """What the net money figures assume (occd.policy.cost), for `--json`."""
    from occd.policy import cost as cm

    c = settings.cost
    return {"usdNet": ("per action: the cache reads the smaller prompt saves on the following turns + a prevented "
                       "compaction's summary call and rebuilt prompt - the cache write the rewrite causes "
                       "(none once the cache expired); negative when it cost more than it saved"),
            "priceSources": sources, "defaultPrices": dict(cm.DEFAULT_PRICES),
            "priceOrder": ["openclaw.json models.providers.*.models[].cost", "litellm price map (JSON file)", "defaults"],
            "cacheTtlSeconds": dict(c.cache_ttl_seconds), "turnsAssumed": c.horizon_turns,
            "turnsRule": "the following turns until the next compaction would have come, at most turnsAssumed",
            "summaryTokens": c.summary_tokens}


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
        return {"sessionId": s["session_id"], "key": s.get("session_key"), "agent": s["agent_id"], "path": s.get("path"),
                "firstSeen": s.get("first_seen"), "lastSeen": _last_seen(led, s), "archivedAt": s.get("archived_at"),
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


def new_actions(*, after_id: int, agent=None, session=None, kind=None, limit=1000) -> list[dict]:
    """Actions recorded after `after_id`, oldest first (history --follow polls this)."""
    led = _open_ledger()
    if led is None:
        return []
    with led:
        session = _history_session(led, session, agent)
        return list(reversed(led.history(agent=agent, session=session, kind=kind, limit=limit, after_id=after_id)))


def _history_session(led, ref: str | None, agent: str | None = None) -> str | None:
    """`--session` resolved as every command resolves a session (occd.openclaw.ids: the part a table shows, any unique
    part of 4+ characters, a prefix, an id or a key) among the sessions the ledger has actions of: the full id,
    or the key as given. Several matches: the usual AMBIGUOUS_SESSION error. No match: the reference as given
    (the ledger's prefix filter then says there is nothing for it)."""
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
        return ref


def history(settings=None, *, agent=None, session=None, kind=None, since=None, limit=200, now=None,
            with_total: bool = False):
    """Actions newest first; with_total: (rows, how many match without the limit). An unknown kind or agent is
    an error (a typo would otherwise look like 'nothing happened'). Reads the ledger only: `settings` is not
    needed (kept for callers that pass it)."""
    now = time.time() if now is None else now
    since_ts = parse_since(since, now)
    led = _open_ledger()
    if led is None:
        if kind and not is_action_kind(kind):
            _check_known("kind", kind, ACTION_KINDS)
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
        rows = led.history(agent=agent, session=session, kind=kind, since=since_ts, limit=limit)
        if not with_total:
            return rows
        total = len(rows) if len(rows) < limit else led.history_count(agent=agent, session=session, kind=kind,
                                                                      since=since_ts)
        return rows, total


def _check_known(what: str, value: str, known) -> None:
    if value in known:
        return
    import difflib

    near = difflib.get_close_matches(value, list(known), n=1)
    raise UsageError(f"--{what} {value!r} is not one of {', '.join(sorted(set(known)))}",
                     f"did you mean {near[0]}?" if near else f"e.g. --{what} {sorted(known)[0]}")


def _stat_obj(v):
    """The machine's (size, mtime_ns, inode) file identity as an object for people and scripts."""
    if isinstance(v, (list, tuple)) and len(v) == 3:
        return {"size": v[0], "mtimeNs": v[1], "inode": v[2]}
    return v


def rotations(settings, now=None) -> list[dict]:
    led = _open_ledger()
    if led is None:
        return []
    with led:
        rows = led.rotations(limit=100)
    for r in rows:
        d = r.get("details")
        if isinstance(d, dict):
            for k in ("archivedStat", "oldStat", "newStat"):
                if k in d:
                    d[k] = _stat_obj(d[k])
    return rows


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


def health_problems(settings, now: float | None = None) -> list[dict]:
    """What `occd status --check` fails on: the daemon down or stale, an open breaker, a failed last scan.
    Each problem is {code, message, hint}; an empty list is healthy."""
    now = time.time() if now is None else now
    data = status(settings, now=now)
    d = data["daemon"]
    interval = settings.daemon.scan_interval_seconds
    out = []
    if not d["running"]:
        out.append({"code": "DAEMON_DOWN", "message": "the daemon is not running",
                    "hint": "occd service install (or systemctl --user start occd)"})
    else:
        last = d.get("lastCycle") or d.get("started")
        if last is None or now - last > 3 * interval:
            age = "never" if last is None else f"{(now - last) / 60:.0f} min ago"
            out.append({"code": "DAEMON_STALE", "message": f"the daemon's last cycle was {age} "
                        f"(scan every {interval}s)", "hint": "occd logs; systemctl --user restart occd"})
    for a in data["agents"]:
        for b in a["breakers"]:
            if b["state"] != "closed":
                out.append({"code": "BREAKER_OPEN", "message": f"breaker {a['id']}/{b['kind']} is {b['state']}"
                            + (f": {b['reason']}" if b.get("reason") else ""), "hint": f"occd breaker reset {a['id']}"})
    out += schema_problems(settings)
    ls = data.get("lastScan")
    if ls and ls.get("errors"):
        out.append({"code": "SCAN_FAILED", "message": f"the last scan had {ls['errors']} error(s)",
                    "hint": "occd logs --since 1h"})
    out.extend(recorded_problems())
    return out


def recorded_problems() -> list[dict]:
    """Open problems recorded in the ledger by `occd check` and by the verifications of what occd did
    (severity fail): each stays until a later check passes or the artifact is forgotten."""
    led = _open_ledger()
    if led is None:
        return []
    with led:
        try:
            rows = led.open_problems(severity="fail")
        except Exception:  # noqa: BLE001 - a ledger without the table (older schema): nothing recorded
            return []
    return [{"code": p["code"], "message": f"{p['subject']}: {p['message']}", "hint": p.get("hint") or "occd check",
             "subject": p["subject"], "source": p["source"]} for p in rows]
