"""The apply job (after each scan): policies decide, the one action path acts, the ledger records.

For each observed session: occd.policy.decide_strip (thresholds, idle, exclude, hourly limit, observe/act),
then the per-agent circuit breaker, then occd.actions.edit.edit_session (file era; same backups, locks and idle
checks as the CLI) or `openclaw sessions compact` through the gateway (database era; never the database).
Observe mode and deferrals are recorded once an hour per session, so the ledger tells what would have happened
without filling up with the same line every five minutes.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from occd.errors import BusyError, OccdError

log = logging.getLogger("occd.jobs.apply")
REPEAT_QUIET_S = 3600


def _state(obs):
    from occd.policy.types import SessionState

    return SessionState(agent=obs.agent, session_key=obs.session_key, session_id=obs.session_id,
                        context_tokens=obs.context_tokens, context_window=obs.context_window,
                        compaction_count=obs.compaction_count or 0, last_activity=obs.last_activity,
                        running=obs.running)


def _recently_recorded(ledger, obs, now, *, dry_run: bool, outcome: str) -> bool:
    for a in ledger.history(agent=obs.agent, session=obs.session_id, kind="strip", since=now - REPEAT_QUIET_S, limit=20):
        if bool(a["dry_run"]) == dry_run and a["outcome"] == outcome:
            return True
    return False


def _stripped_since_activity(ledger, obs) -> bool:
    """True when occd already stripped (or found nothing to strip in) this session after the agent's last
    activity: nothing new can have appeared, and the measured usage stays stale until the next reply."""
    if obs.last_activity is None:
        return False
    for a in ledger.history(agent=obs.agent, session=obs.session_id, kind="strip", limit=10):
        if not a["dry_run"] and a["outcome"] in ("ok", "skipped") and a["trigger"] == "auto" and a.get("error") is None:
            if a.get("reason") and "blocked" in a["reason"]:
                continue
            return a["ts"] >= obs.last_activity
    return False


def _after_strip(ctx, obs, res) -> None:
    """The cleaned file's figures, so the next scan neither re-reads it nor trusts the stale usage of the last
    reply: the scan cache gets the new file with OpenClaw's chars/4 estimate (labelled as such), and the ledger
    an observation now. The next reply appends to the same inode and brings real usage back."""
    import os

    from occd.jobs.scan import CACHE_KEY, _load_cache, _save_cache

    try:
        st = os.stat(obs.path)
    except OSError:
        return
    files = ctx.cache.get(CACHE_KEY)
    if files is None:
        files = ctx.cache[CACHE_KEY] = _load_cache()
    tokens = res.stats.tokens_after_estimate
    files[str(obs.path)] = {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "end": st.st_size,
                            "tokens": tokens, "source": "estimate", "entries": None, "compactions_seen": 0,
                            "last_ts": None}
    _save_cache(files)
    obs.context_tokens, obs.tokens_source, obs.size = tokens, "estimate", st.st_size
    ctx.ledger.record_observations([obs.ledger_row()], now=ctx.now())


def run(ctx) -> dict:
    from occd.policy import breaker as brk
    from occd.policy.strip import decide_strip

    scan = ctx.last_scan
    if scan is None:
        from occd.jobs import scan as scan_job

        scan_job.run(ctx)
        scan = ctx.last_scan
    s = ctx.settings
    led = ctx.ledger
    counts = {"considered": 0, "acted": 0, "wouldDo": 0, "deferred": 0, "blocked": 0, "failed": 0}
    for obs in scan.sessions:
        if ctx.stop.is_set():
            break
        if obs.era not in ("file", "db"):
            continue  # a state that still needs OpenClaw's own migration is only reported
        now = ctx.now()
        policy = s.policy_for(obs.agent)
        recent = [t for t, _ in led.action_times(obs.agent, None, now - 3600, trigger="auto")]
        d = decide_strip(_state(obs), policy, now=now, window_tokens=obs.context_window, recent_action_times=recent)
        if d is None:
            continue
        if obs.era == "file" and _stripped_since_activity(led, obs):
            continue
        counts["considered"] += 1
        if not d.act:
            key = "wouldDo" if d.would_do else ("deferred" if d.deferred else "blocked")
            counts[key] += 1
            if not _recently_recorded(led, obs, now, dry_run=d.would_do, outcome=d.outcome):
                led.record_action("strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=d.reason, outcome=d.outcome, dry_run=d.would_do,
                                  before=d.details, now=now)
            continue
        # the breaker, per agent and action kind
        rec = led.get_breaker(obs.agent, "strip")
        st = brk.BreakerState(**asdict(rec))
        window_start = now - policy.breaker.window_minutes * 60
        g = brk.gate(st, policy.breaker, led.action_times(obs.agent, "strip", window_start, trigger="auto"), now)
        if g.changed or g.transitions:
            led.set_breaker(g.state, g.transitions, now=now)
        if not g.allowed:
            counts["blocked"] += 1
            if not _recently_recorded(led, obs, now, dry_run=False, outcome="skipped"):
                led.record_action("strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=f"{d.reason}; {g.reason}", outcome="skipped", now=now)
            continue
        ok = _act(ctx, obs, d, policy, counts)
        if ok is None:
            continue  # deferred (busy): not a success or a failure for the breaker
        recent_after = led.action_times(obs.agent, "strip", window_start, trigger="auto")
        new, transitions = brk.record_result(g.state, policy.breaker, ok, recent_after, ctx.now())
        led.set_breaker(new, transitions, now=ctx.now())
    return counts


def _act(ctx, obs, d, policy, counts) -> bool | None:
    from occd.actions.common import Target
    from occd.actions.edit import edit_session

    led = ctx.ledger
    try:
        if obs.era == "db":
            from occd.openclaw.gateway import Gateway

            Gateway(ctx.state_dir).sessions_compact(obs.session_key)
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="ok", before=d.details, now=ctx.now())
        else:
            from occd.openclaw import open_store

            store = open_store(ctx.state_dir, obs.agent)
            info = store.resolve(obs.session_id)
            target = Target(ctx.settings, ctx.state_dir, obs.agent, store, info, obs.path)
            # kind "strip": an automatic edit; the action path records it with the policy that fired
            res = edit_session(ctx.settings, agent=obs.agent, preset=policy.strip_preset, trigger="auto",
                               policy=d.policy, reason=d.reason, ledger=led, now=ctx.now(), target=target)
            if res.changed:
                _after_strip(ctx, obs, res)
        counts["acted"] += 1
        log.info("%s/%s: %s", obs.agent, obs.session_id[:13], d.reason)
        return True
    except BusyError as e:
        counts["deferred"] += 1
        log.info("%s/%s: deferred: %s", obs.agent, obs.session_id[:13], e.message)
        if obs.era == "db":
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="deferred", error=e.message, now=ctx.now())
        return None
    except OccdError as e:
        counts["failed"] += 1
        log.warning("%s/%s: %s failed: %s", obs.agent, obs.session_id[:13], d.action, e.message)
        if obs.era == "db":
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="failed", error=e.message, now=ctx.now())
        return False
