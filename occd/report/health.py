"""What `occd status --check` fails on (monitoring runs it): every condition `occd status` and `occd doctor` would
call a problem, each as {code, message, hint} (an empty list is healthy). Read-only."""

from __future__ import annotations

import time

from occd.report.status import _open_ledger, schema_problems, status


def health_problems(settings, now: float | None = None) -> list[dict]:
    """The daemon down or stale, an open breaker, an unverified schema, a failed scan (its record's errors, or the
    scan job failing after it), every open problem in the ledger, an emergency occd cannot end, the lean view's
    slot taken back from occd."""
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
    out += scan_problems(data)
    out += emergency_problems(data)
    lost = (data.get("lean") or {}).get("slotLost")
    if lost:
        from occd.lean.check import SLOT_LOST_HINT

        out.append({"code": "LEAN_SLOT_LOST", "message": f"the lean view is enabled but OpenClaw's context-engine "
                    f"slot is {lost}: no session is covered by it", "hint": SLOT_LOST_HINT})
    out.extend(recorded_problems())
    return out


def scan_problems(data: dict) -> list[dict]:
    """The last scan recorded errors, or the scan job failed after it (the figures shown are then stale)."""
    out = []
    ls, failed = data.get("lastScan"), data.get("scanFailure")
    if failed:
        out.append({"code": "SCAN_FAILED", "message": f"the last scan failed: {failed.get('error') or 'see the log'}"
                    " (the figures shown are from the scan before)", "hint": "occd logs --since 1h"})
    elif ls and ls.get("errors"):
        first = (ls.get("error_text") or "").splitlines()[:1]
        out.append({"code": "SCAN_FAILED", "message": f"the last scan had {ls['errors']} error(s)"
                    + (f": {first[0][:200]}" if first else ""), "hint": "occd logs --since 1h"})
    return out


def emergency_problems(data: dict) -> list[dict]:
    """Sessions in a spiral or blocked that occd, acting, did not end (its action deferred, skipped, failed or held
    back) and that OpenClaw has not moved on from since."""
    out = []
    for a in data["agents"]:
        if a.get("mode") != "act":
            continue
        for e in a.get("emergencies") or []:
            if e.get("current") and not e.get("ended"):
                out.append({"code": "EMERGENCY", "message": f"{a['id']}/{e.get('key') or e['sessionId']} is "
                            f"{e['kind']} and occd could not end it ({e['action']}: {e.get('reason') or '-'})",
                            "hint": f"occd status {e['sessionId'] or ''}; occd rotate {e['sessionId'] or ''}".strip()})
    return out


def recorded_problems() -> list[dict]:
    """Every open problem recorded in the ledger (by `occd check`, the verifications of what occd did, the lean
    view's check), fail and warn: each stays until a later check passes or the artifact is forgotten. What
    `occd status SESSION` shows as PROBLEM is what fails here."""
    led = _open_ledger()
    if led is None:
        return []
    with led:
        try:
            rows = led.open_problems()
        except Exception:  # noqa: BLE001 - a ledger without the table (older schema): nothing recorded
            return []
    return [{"code": p["code"], "message": f"{p['subject']}: {p['message']}", "hint": p.get("hint") or "occd check",
             "subject": p["subject"], "source": p["source"], "severity": p.get("severity") or "fail"} for p in rows]
