"""Assembling `occd status` and `occd history` from the ledger and the daemon's status file (read-only)."""

from __future__ import annotations

import os
import time

from occd import paths
from occd.errors import OccdError, UsageError


def parse_since(text: str | None, now: float) -> float | None:
    """'7d', '12h', '30m', '90s' → epoch seconds that long ago."""
    if not text:
        return None
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    try:
        if t[-1] in mult:
            return now - float(t[:-1]) * mult[t[-1]]
        return now - float(t)
    except (ValueError, IndexError):
        raise UsageError(f"--since {text!r} is not a duration like 7d, 12h, 30m", "e.g. --since 7d") from None


def _open_ledger():
    from occd.ledger import Ledger

    if not paths.ledger_path().exists():
        return None
    return Ledger.open(readonly=True)


def daemon_info(ledger, now: float) -> dict:
    from occd.daemon import InstanceLock, read_status

    pid = InstanceLock.holder()
    st = read_status() or {}
    run = ledger.latest_daemon_run() if ledger else None
    out = {"running": pid is not None, "pid": pid if pid and pid > 0 else None,
           "started": st.get("started") if pid else None, "lastCycle": st.get("lastCycle"),
           "nextScan": st.get("nextScan") if pid else None, "mode": st.get("mode")}
    if run:
        out["lastRun"] = {k: run.get(k) for k in ("pid", "started", "stopped", "heartbeat", "last_cycle", "mode",
                                                   "stop_reason") if k in run}
        if out["lastCycle"] is None:
            out["lastCycle"] = run.get("last_cycle")
    return out


def status(settings, now: float | None = None, top: int = 5) -> dict:
    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:
        return {"ledger": None, "daemon": daemon_info(None, now), "agents": [], "lastScan": None,
                "note": "no ledger yet: run `occd run --once`, `occd demo`, or install the service"}
    with led:
        agents = []
        counts = led.action_counts_since(now - 86400)
        latest = led.latest_observations()
        by_agent: dict[str, list[dict]] = {}
        for o in latest:
            by_agent.setdefault(o["agent"], []).append(o)
        breakers = led.breakers()
        would = [a for a in led.history(since=now - 86400, limit=1000) if a["dry_run"]]
        for a in led.agents():
            obs = by_agent.get(a["id"], [])

            def pct(o):
                return (100.0 * o["context_tokens"] / o["context_window"]) if o.get("context_tokens") and o.get("context_window") else -1

            biggest = sorted(obs, key=pct, reverse=True)[:top]
            policy = settings.policy_for(a["id"])
            agents.append({
                "id": a["id"], "era": a.get("era"), "sessions": len(obs), "mode": policy.mode,
                "compactionsTotal": sum(o.get("compaction_count") or 0 for o in obs),
                "biggest": [{"sessionId": o["session_id"], "key": o.get("session_key"),
                             "contextTokens": o.get("context_tokens"), "tokensSource": o.get("tokens_source"),
                             "contextWindow": o.get("context_window"),
                             "contextPercent": round(pct(o), 1) if pct(o) >= 0 else None,
                             "compactions": o.get("compaction_count"), "size": o.get("size")} for o in biggest],
                "breakers": [{"kind": b.kind, "state": b.state, "reason": b.reason, "openedAt": b.opened_at}
                             for b in breakers if b.agent == a["id"]],
                "actions24h": counts.get(a["id"], {}),
                "wouldDo": [{"sessionId": w["session_id"], "kind": w["kind"], "reason": w["reason"], "ts": w["ts"]}
                            for w in would if w["agent_id"] == a["id"]][:10],
            })
        out = {"ledger": str(led.path), "daemon": daemon_info(led, now), "lastScan": led.last_scan(), "agents": agents}
        try:
            out["llmSpendToday"] = led.spend_today(now)
        except Exception:  # noqa: BLE001
            pass
        return out


def session_status(settings, ref: str, now: float | None = None, since_days: float = 30) -> dict:
    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:
        raise OccdError("No ledger yet", "run `occd run --once` first", code="LEDGER_MISSING")
    with led:
        cands = [s for s in led.sessions() if s["session_id"].startswith(ref) or s.get("session_key") == ref]
        if not cands:
            raise OccdError(f"Session '{ref}' not found in the ledger", "the daemon has not seen it yet: `occd run --once`",
                            code="SESSION_NOT_FOUND")
        ids = {c["session_id"] for c in cands}
        if len(ids) > 1:
            raise OccdError(f"Multiple sessions match '{ref}'", "use a longer prefix: " + ", ".join(sorted(i[:13] for i in ids)),
                            code="AMBIGUOUS_SESSION")
        s = cands[0]
        buckets = led.series_buckets(s["agent_id"], s["session_id"], since=now - since_days * 86400, until=now, buckets=60)
        series = led.series(s["agent_id"], s["session_id"], since=now - since_days * 86400, limit=2000)
        return {"sessionId": s["session_id"], "key": s.get("session_key"), "agent": s["agent_id"], "path": s.get("path"),
                "firstSeen": s.get("first_seen"), "lastSeen": s.get("last_seen"), "archivedAt": s.get("archived_at"),
                "buckets": buckets, "observations": series[-50:],
                "actions": led.history(session=s["session_id"], limit=50),
                "backups": led.backups(session_id=s["session_id"], include_pruned=True)}


def history(settings, *, agent=None, session=None, kind=None, since=None, limit=200, now=None) -> list[dict]:
    now = time.time() if now is None else now
    led = _open_ledger()
    if led is None:
        return []
    with led:
        return led.history(agent=agent, session=session, kind=kind, since=parse_since(since, now), limit=limit)


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
