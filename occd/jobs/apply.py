"""The apply job (after each scan): policies decide, the one action path acts, the ledger records.

For each observed session: the budget trigger (occd.policy.strip.decide_budget_strip on OpenClaw's own
budget, both eras) or occd.policy.decide_strip (share of the window, where no budget is known), then the
per-agent circuit breaker, then occd.actions.edit.edit_session (file era; same backups, locks and idle checks as
the CLI) or `openclaw sessions compact` through the gateway (database era, a routine strip of a session the lean
view does not cover; never the database). SPIRAL/BLOCKED in the database era are rotations (the rotate job's
rotate_now: reset + seed through the gateway, its idle check, backoff and breaker, past the cooldown).
Observe mode and deferrals are recorded when the decision changes (its reason names the context percentage) and
at most once a day while it stays the same, so the ledger tells what would have happened without filling up
with the same line every five minutes.
"""

from __future__ import annotations

import logging
import os

from occd.errors import BusyError, OccdError
from occd.jobs.decide import DECIDED_KEY, decide_session, no_rotation

log = logging.getLogger("occd.jobs.apply")
REPEAT_QUIET_S = 24 * 3600  # an unchanged would-do is recorded once a day
REPEAT_BUSY_S = 3600  # a deferral or a block once an hour


class _Recent:
    """What the ledger already says about automatic strips, read once per cycle (one query each instead of
    several per session: a quiet cycle over 5,000 sessions stays well under a second) and kept up to date
    with what this cycle records."""

    def __init__(self, led, now: float, candidates: list):
        self.led = led
        self.now = now
        self.by_session: dict[tuple, list[dict]] = {}
        oldest_activity = min((o.last_activity for o in candidates if o.last_activity is not None), default=now)
        since = min(now - REPEAT_QUIET_S, oldest_activity)
        for kind in ("strip", "compact") if candidates else ():  # compact: the database era's strip
            for a in led.history(kind=kind, since=since, limit=1_000_000):
                self.by_session.setdefault((a["agent_id"], a["session_id"]), []).append(a)
        for acts in self.by_session.values():
            acts.sort(key=lambda a: a["ts"], reverse=True)
        self.auto_times: dict[str, list[float]] = {}
        for a in led.history(since=now - 3600, limit=1_000_000) if candidates else []:
            if a["trigger"] == "auto" and not a["dry_run"] and a["outcome"] in ("ok", "failed"):
                self.auto_times.setdefault(a["agent_id"], []).append(a["ts"])

    def recently_recorded(self, obs, now: float, *, dry_run: bool, outcome: str, reason: str | None) -> bool:
        """The same decision is already in the ledger: a would-do with the same reason (it names the context
        percentage) from the last REPEAT_QUIET_S, a deferral or block from the last hour. Observe mode and
        deferrals say what would happen without repeating it every five minutes."""
        window = REPEAT_QUIET_S if reason is not None else REPEAT_BUSY_S
        for a in self.by_session.get((obs.agent, obs.session_id), []):
            if (a["ts"] >= now - window and a["dry_run"] == dry_run and a["outcome"] == outcome
                    and (reason is None or a.get("reason") == reason)):
                return True
        return False

    def stripped_since_activity(self, obs) -> bool:
        """occd already stripped (or found nothing to strip in) this session after the agent's last activity:
        nothing new can have appeared, and the measured usage stays stale until the next reply."""
        if obs.last_activity is None:
            return False
        for a in self.by_session.get((obs.agent, obs.session_id), []):  # newest first
            if a["dry_run"] or a["trigger"] != "auto" or a["outcome"] not in ("ok", "skipped", "failed"):
                continue
            if a["outcome"] != "failed" and a.get("error"):
                continue
            if a.get("reason") and "blocked" in a["reason"]:
                continue
            return a["ts"] >= obs.last_activity
        return False

    def note(self, obs, *, ts: float, dry_run: bool, outcome: str, reason: str | None, trigger: str = "auto",
             real: bool = False) -> None:
        self.by_session.setdefault((obs.agent, obs.session_id), []).insert(0, {
            "ts": ts, "dry_run": dry_run, "outcome": outcome, "reason": reason, "trigger": trigger, "error": None})
        if real and outcome in ("ok", "failed"):
            self.auto_times.setdefault(obs.agent, []).append(ts)


def _after_strip(ctx, obs, res) -> None:
    """The cleaned file's figures, so the next scan neither re-reads it nor trusts the stale usage of the last
    reply: the scan cache gets the new file with OpenClaw's chars/4 estimate (labelled as such), and the ledger
    an observation now. The next reply appends to the same inode and brings real usage back."""
    import os

    from occd.jobs.scan import CACHE_KEY, forget, record_time
    from occd.jobs.scanstate import _load_cache, _save_cache, file_state

    forget(ctx, obs.agent, obs.session_id)

    try:
        st = os.stat(obs.path)
        tokens = res.stats.tokens_after_estimate
        state = file_state(obs.path, st, tokens, "estimate")
    except OSError:
        return
    files = ctx.cache.get(CACHE_KEY)
    if files is None:
        files = ctx.cache[CACHE_KEY] = _load_cache()
    files[str(obs.path)] = state
    _save_cache(files)
    obs.context_tokens, obs.tokens_source, obs.size = tokens, "estimate", st.st_size
    ctx.ledger.record_observations([obs.ledger_row()], now=record_time(ctx))


def _beyond_lean(ctx, obs, d) -> bool:
    """An emergency on a session the lean view covers that the lean view cannot end, so it is rotated anyway:
    BLOCKED always (OpenClaw refuses the next turn in its own pre-prompt check and will not compact again so
    soon; only a reset clears it, whatever the plugin hides), SPIRAL when OpenClaw compacted after the lean view
    went on for the session (the lean view was tried and did not stop it)."""
    kind = (d.details or {}).get("emergency")
    if kind == "BLOCKED":
        return True
    if kind != "SPIRAL":
        return False
    from occd.jobs import budget

    f = budget.facts(ctx, obs)
    last = f.last_compaction_at if f is not None else None
    if last is None:
        return False
    on = None
    for a in ctx.ledger.history(kind="lean", agent=obs.agent, session=obs.session_key, limit=200):
        if a["outcome"] == "ok" and not a["dry_run"]:
            on = a["ts"]
            break
    return on is None or last > on


def run(ctx) -> dict:
    from occd.jobs.scan import ensure_scan, record_time
    from occd.jobs import breakers

    scan = ensure_scan(ctx)
    s = ctx.settings
    led = ctx.ledger
    counts = {"considered": 0, "acted": 0, "wouldDo": 0, "deferred": 0, "blocked": 0, "failed": 0, "rotated": 0}
    now = record_time(ctx)
    # a state that still needs OpenClaw's own migration is only reported, never acted on
    policies: dict = {}
    todo = [(obs, policies.get(obs.agent) or policies.setdefault(obs.agent, s.policy_for(obs.agent)))
            for obs in scan.sessions if obs.era in ("file", "db")]
    from occd.jobs.lean import covered  # sessions the lean view handles are not stripped or compacted

    candidates = []
    lean_on = set()  # covered sessions with an emergency the lean view cannot end: rotated, never stripped/compacted
    quiet, still = ctx.cache.get(NOTHING_KEY) or {}, {}
    for obs, policy in todo:  # the pure threshold test first: most sessions stop here, with no ledger read
        k = (obs.agent, obs.session_id)
        hit = quiet.get(k)
        if hit is not None and hit[0] is obs and hit[1] is s and 0 <= now - hit[2] < RELOOK_S:
            still[k] = hit  # the same observation (the scan kept it: nothing changed) had nothing to do
            continue
        d = decide_session(ctx, obs, policy, now)
        if d is None:
            still[k] = (obs, s, now)
            continue
        if covered(ctx, obs):
            if not _beyond_lean(ctx, obs, d):
                continue
            lean_on.add((obs.agent, obs.session_id))
        candidates.append((obs, policy))
    ctx.cache[NOTHING_KEY] = still
    recent = _Recent(led, now, [o for o, _ in candidates])
    decided: set = set()
    ctx.cache[DECIDED_KEY] = (scan, decided)  # one decision per session per cycle (jobs.rotate reads it)
    for obs, policy in candidates:
        if ctx.stop.is_set():
            break
        now = record_time(ctx)
        times = [t for t in recent.auto_times.get(obs.agent, []) if t >= now - 3600]
        d = decide_session(ctx, obs, policy, now, times)
        if d is None:
            continue
        covered_here = (obs.agent, obs.session_id) in lean_on
        if covered_here:
            if not d.details.get("emergency"):
                continue
            if d.action != "rotate":
                from dataclasses import replace

                d = replace(d, action="rotate", reason=f"{d.reason}; the lean view is on and cannot end it: rotate")
        # once per new agent turn (a failed try too: the next turn may change things); a database-era rotation
        # has its own cooldown and backoff
        if not covered_here and (obs.era == "file" or d.action != "rotate") and recent.stripped_since_activity(obs):
            still[(obs.agent, obs.session_id)] = (obs, s, now)  # once per new turn: nothing until the next
            continue
        if (d.action == "strip" and not d.details.get("emergency") and obs.era == "file"
                and d.details.get("freshSessionTokens") is None):  # (a strip because a rotation would not help wins)
            from occd.jobs import rotate as rotate_job

            if rotate_job.scheduled(ctx, obs, now):
                continue  # the scheduled rotation takes it this cycle (one decision per session per cycle)
        counts["considered"] += 1
        decided.add((obs.agent, obs.session_key or obs.session_id))  # the rotate job leaves it this cycle
        if d.deferred and d.details.get("dueAt"):
            wake_at(ctx, d.details["dueAt"])
        if d.action == "strip" and d.details.get("freshSessionTokens") is not None:
            # "a rotation would not help": the rotate job of this cycle must not decide one for it too
            no_rotation(ctx).add((obs.agent, obs.session_id))
        if d.action == "rotate":
            r = _rotate(ctx, obs, d, counts, recent)
            # no strip instead where occd cannot rewrite the session (database era: it would be a compaction) or
            # the lean view already hides what a strip would remove
            if (r not in ("blocked", None) or not d.details.get("removedTokens") or not d.act
                    or obs.era != "file" or covered_here):
                continue
            # the rotation cannot happen now (cooldown, breaker, backoff): the strongest strip still helps
            from dataclasses import replace

            keep = min(policy.keep_recent_turns, d.details.get("safeKeepTurns", 0))
            d = replace(d, action="strip", details={**d.details, "keepTurnsWithTools": keep},
                        reason=f"{d.reason}; no rotation possible now: every tool call older than the newest {keep} "
                               "turns with tools stripped instead")
        if not d.act:
            key = "wouldDo" if d.would_do else ("deferred" if d.deferred else "blocked")
            counts[key] += 1
            if not d.deferred:  # observe mode, or too many actions this hour: looked at again after RELOOK_S
                still[(obs.agent, obs.session_id)] = (obs, s, now)
            if not recent.recently_recorded(obs, now, dry_run=d.would_do, outcome=d.outcome,
                                            reason=d.reason if d.would_do else None):
                led.record_action("strip", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=d.reason, outcome=d.outcome, dry_run=d.would_do,
                                  before=d.details, now=now)
                recent.note(obs, ts=now, dry_run=d.would_do, outcome=d.outcome, reason=d.reason)
            continue
        if obs.era == "db" and d.action == "strip" and not policy.compact_db_sessions:
            # occd's only strip here is OpenClaw's own compaction: the lossy step occd exists to avoid, and sooner
            # than OpenClaw would take it. Said once an hour; the lean view is the lossless tool.
            counts["skipped"] = counts.get("skipped", 0) + 1
            still[(obs.agent, obs.session_id)] = (obs, s, now)
            reason = (f"{d.reason}; not compacted: in the database era a strip is OpenClaw's own lossy compaction "
                      "(`occd lean enable` hides old tool calls losslessly; policy.compact_db_sessions allows it)")
            if not recent.recently_recorded(obs, now, dry_run=False, outcome="skipped", reason=None):  # once an hour
                led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=reason, outcome="skipped", before=d.details, now=now)
                recent.note(obs, ts=now, dry_run=False, outcome="skipped", reason=reason)
            continue
        # the breaker, per agent and action kind
        kind = "compact" if obs.era == "db" else "strip"  # the kind the action is recorded as
        g = breakers.gate(led, obs.agent, kind, policy.breaker, now)
        if not g.allowed:
            counts["blocked"] += 1
            still[(obs.agent, obs.session_id)] = (obs, s, now)
            reason = f"{d.reason}; {g.reason}"
            if not recent.recently_recorded(obs, now, dry_run=False, outcome="skipped", reason=None):
                led.record_action(kind, obs.agent, obs.session_id, obs.session_key, trigger="auto",
                                  policy=d.policy, reason=reason, outcome="skipped", now=now)
                recent.note(obs, ts=now, dry_run=False, outcome="skipped", reason=reason)
            continue
        ok = _act(ctx, obs, d, policy, counts)
        if ok is None:
            continue  # deferred (busy): not a success or a failure for the breaker
        done = record_time(ctx)
        recent.note(obs, ts=done, dry_run=False, outcome="ok" if ok else "failed", reason=d.reason, real=True)
        breakers.record(led, g, obs.agent, kind, policy.breaker, ok, done)
    from occd.jobs import window

    window.resolve(ctx, scan, now)
    return counts


WAKE_KEY = "daemon.wake_at"
# sessions with nothing to do, {(agent, session id): (observation, settings, when)}: an observation the scan kept
# unchanged is decided again only after RELOOK_S (the safety-net scan's interval), or when the settings change
NOTHING_KEY = "apply.nothing"
RELOOK_S = 300.0


def wake_at(ctx, t: float) -> None:
    """Ask the daemon to look again at `t` (epoch seconds): a deferred decision becomes due then (the prompt
    cache expired, the end of a run settled). The daemon reads and clears it after the cycle."""
    cur = ctx.cache.get(WAKE_KEY)
    ctx.cache[WAKE_KEY] = t if cur is None else min(cur, t)


def _rotate(ctx, obs, d, counts, recent) -> str | None:
    """No strip reaches the target (or a blocked session has nothing to strip): a rotation, through the rotate
    job's policy (in-progress check, backoff, breaker), past the cooldown."""
    from occd.jobs import rotate as rotate_job

    r = rotate_job.rotate_now(ctx, obs, d.reason, emergency=d.details.get("emergency"), decision=d)
    if r == "rotated":
        counts["rotated"] += 1
        recent.note(obs, ts=ctx.now(), dry_run=False, outcome="ok", reason=d.reason)
    elif r == "deferred" and not obs.running and d.act:  # the end of a run settling: look again once it has
        wake_at(ctx, ctx.now() + max(1.0, float(ctx.settings.idle_seconds)) + 0.5)
    elif r:
        counts[r] = counts.get(r, 0) + 1
    return r


def _details(ctx, obs, d) -> dict | None:
    """What the ledger keeps of a budget strip for the savings view: the prediction, the target and the model's
    input price (OpenClaw's models config, else litellm's cost map)."""
    if "keepTurnsWithTools" not in d.details:
        return None
    from occd.policy.savings import AVOID_HORIZON_TURNS, compaction_avoided, input_price_per_mtok

    out = dict(d.details)
    out["compactionAvoided"] = compaction_avoided(d.details, AVOID_HORIZON_TURNS)
    try:
        from occd.jobs.scan import _openclaw_config

        out["inputUsdPerMTok"] = input_price_per_mtok(_openclaw_config(ctx), obs.model, ctx.cache)
    except Exception:  # noqa: BLE001 - the price is informative only
        out["inputUsdPerMTok"] = None
    out["model"] = obs.model
    out["compactionCount"] = obs.compaction_count  # the verify job compares it after the next turn
    return out


def _crashed_run(obs, now: float) -> bool:
    """The file has not changed for CRASHED_RUN_IDLE_S: if its last tool call is still unanswered, that run
    crashed (`occd edit --crashed-run`: the edit still checks that no live process holds the transcript lock, and
    leaves the unanswered turn exactly as it is). The daemon cleans a crashed run only in an emergency (blocked
    or spiralling): otherwise it leaves it alone, for OpenClaw to patch on the next turn."""
    from occd.cleaner.plan import CRASHED_RUN_IDLE_S

    try:
        return now - os.stat(obs.path).st_mtime >= CRASHED_RUN_IDLE_S
    except (OSError, TypeError):
        return False


def _act(ctx, obs, d, policy, counts) -> bool | None:
    from occd.actions.common import Target
    from occd.actions.edit import edit_session
    from occd.jobs.scan import record_time

    led = ctx.ledger
    try:
        if obs.era == "db":
            from occd.jobs.lean import covered
            from occd.openclaw.gateway import Gateway

            if covered(ctx, obs):  # never a (lossy) compaction of a session the lean view handles
                return None

            Gateway(ctx.state_dir).sessions_compact(obs.session_key)
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="ok", before=d.details, now=record_time(ctx))
        else:
            from occd.openclaw import open_store

            store = open_store(ctx.state_dir, obs.agent)
            info = store.resolve(obs.session_id)
            target = Target(ctx.settings, ctx.state_dir, obs.agent, store, info, obs.path)
            # kind "strip": an automatic edit; the action path records it with the policy that fired
            keep = d.details.get("keepTurnsWithTools")
            if keep is not None:  # the budget trigger: strip to the target, nothing truncated
                from occd.config import PresetConfig

                strip = ("to-target", PresetConfig(keep_turns_with_tools=keep, truncate_percent=0,
                                                   keep_tool_results=d.details.get("keepToolResults")))
            else:
                strip = None
            res = edit_session(ctx.settings, agent=obs.agent, preset=policy.strip_preset, trigger="auto",
                               policy=d.policy, reason=d.reason, ledger=led, now=record_time(ctx), target=target,
                               strip=strip, details=_details(ctx, obs, d),
                               crashed_run=bool(d.details.get("emergency")) and _crashed_run(obs, ctx.now()))
            if res.changed:
                try:
                    _after_strip(ctx, obs, res)
                except (OccdError, OSError) as e:  # the strip is done; its follow-up figure is informational
                    log.warning("%s/%s: stripped; its new figure not recorded: %s", obs.agent, obs.session_id[:13],
                                getattr(e, "message", None) or e)
        counts["acted"] += 1
        log.info("%s/%s: %s", obs.agent, obs.session_id[:13], d.reason)
        return True
    except BusyError as e:
        counts["deferred"] += 1
        if not obs.running:  # the end of a run settling (idle_seconds): look again once it has
            wake_at(ctx, ctx.now() + max(1.0, float(ctx.settings.idle_seconds)) + 0.5)
        log.info("%s/%s: deferred: %s", obs.agent, obs.session_id[:13], e.message)
        if obs.era == "db":
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="deferred", error=e.message, now=record_time(ctx))
        return None
    except OccdError as e:
        counts["failed"] += 1
        log.warning("%s/%s: %s failed: %s", obs.agent, obs.session_id[:13], d.action, e.message)
        if obs.era == "db":
            led.record_action("compact", obs.agent, obs.session_id, obs.session_key, trigger="auto",
                              policy=d.policy, reason=d.reason, outcome="failed", error=e.message, now=record_time(ctx))
        return False
