"""The lean job (after each scan, before apply): where the lean view is enabled it is occd's first tool.

For each observed session, the current policy decision (`decision`: today the strip threshold, seen without the
idle check because the lean view writes nothing of the session) turns the session's rules on in the plugin's
policy file (occd.lean; written atomically, only when something changed). Observe mode records what it would
do; the per-agent breaker (kind "lean") limits how often rules change. Every change is a ledger action of kind
"lean" (before/after: the rules). The apply job leaves the sessions covered here alone (`covered`): never a
strip or a compaction of them; the .jsonl rewrite and compaction stay for the rest. One exception: an emergency
the lean view cannot end is still rotated (BLOCKED always; SPIRAL when OpenClaw compacted after the lean view
went on; occd.jobs.apply._beyond_lean).
"""

from __future__ import annotations

import dataclasses
import logging

log = logging.getLogger("occd.jobs.lean")
CACHE_KEY = "lean.covered"
REPEAT_S = 24 * 3600


def decision(ctx, obs, policy, now: float):
    """The policy decision that turns the lean view on for a session (None: not now): the apply job's own decision
    (OpenClaw's budget trigger where its figures exist, else the share of the window; exclusions, hourly limit,
    observe/act, emergencies), with no idle check because the lean view writes nothing of the session."""
    from occd.jobs.decide import _state, decide_session, seen_in_use
    from occd.policy.types import in_use

    if not in_use(_state(obs), policy.active_within_hours, now) or not seen_in_use(ctx, obs, policy):
        return None  # history is not a to-do list: only sessions in use go into the lean view
    obs = dataclasses.replace(obs, running=False, last_activity=None) if dataclasses.is_dataclass(obs) else obs
    return decide_session(ctx, obs, policy.model_copy(update={"min_idle_minutes": 0}), now, priced=False,
                          in_use_checked=True)


def rules_from_settings(settings, prices=None, ttl_s: float | None = None) -> dict:
    """The plugin's rules for a session; `prices` (occd.policy.cost.Prices of the session's model) set what a move
    costs against what it saves: cacheCostRatio = (cache write - cache read) / cache read (sticky.js); `ttl_s` the
    model's prompt-cache lifetime (`cost.cache_ttl_seconds`, its "default" when None): a move after it is free."""
    from occd.policy import cost

    ls = settings.lean
    ttl = ttl_s if ttl_s is not None else cost.cache_ttl(settings.cost.cache_ttl_seconds, None, None)
    rules = {"mode": ls.mode, "keepTurns": ls.keep_turns, "keepResults": ls.keep_results, "batchTurns": ls.batch_turns,
             "neverHide": list(ls.never_hide), "keepResultsUnderChars": ls.keep_results_under_chars,
             "highWater": ls.high_water, "lowWater": min(ls.low_water, ls.high_water),
             "requestsPerTurn": ls.requests_per_turn, "cacheTtlSeconds": ttl}
    ratio = cache_cost_ratio(prices)
    if ratio is not None:
        rules["cacheCostRatio"] = ratio
    return rules


def cache_cost_ratio(prices) -> float | None:
    """(write - read) / read of a model's prices, rounded; None when they do not say (the plugin's default then)."""
    read, write = getattr(prices, "cacheRead", None), getattr(prices, "cacheWrite", None)
    if not isinstance(read, (int, float)) or not isinstance(write, (int, float)) or read <= 0 or write < read:
        return None
    return round((write - read) / read, 3)


def _session_rules(ctx, obs) -> dict:
    """The plugin's rules for one session: the settings, with its model's cache lifetime and prices (OpenClaw's
    config, litellm's file, defaults; without them, the cost model off or none to be had, the plugin's ratio)."""
    from occd.jobs.decide import economics_or_none
    from occd.policy import cost

    econ = economics_or_none(ctx, obs)
    ttl = cost.model_cache_ttl(ctx.settings.cost.cache_ttl_seconds, getattr(obs, "model", None))
    return rules_from_settings(ctx.settings, econ.prices if econ is not None else None, ttl)


def covered(ctx, obs) -> bool:
    """The lean view handles this session (its rules are on): the apply job does not strip or compact it."""
    keys = ctx.cache.get(CACHE_KEY)
    return bool(keys) and obs.session_key in keys


def run(ctx) -> dict:
    from occd import lean
    from occd.jobs import breakers
    from occd.jobs.scan import ensure_scan, record_time

    ctx.cache[CACHE_KEY] = set()
    if not lean.is_enabled(ctx.state_dir):
        return {"enabled": False}
    from occd.lean.check import slot_lost

    lost = slot_lost(ctx.state_dir)
    if lost is not None:  # OpenClaw no longer calls the plugin: no session is covered (apply protects them all)
        key = f"lean.slotLost:{lost}"
        if key not in ctx.cache:
            ctx.cache[key] = True
            log.warning("lean view enabled but OpenClaw's context-engine slot is %s: the daemon strips and rotates "
                        "as if it were off until `occd lean enable` selects it again", lost)
        return {"enabled": True, "slotLost": lost}
    upgraded = _after_upgrade(ctx)
    scan = ensure_scan(ctx)
    s = ctx.settings
    led = ctx.ledger
    doc = lean.read_policy()
    rules = rules_from_settings(s)
    counts = {"enabled": True, "active": 0, "turnedOn": 0, "wouldDo": 0, "blocked": 0, **upgraded}
    changed = False
    pending = []
    dropped = []
    refreshed = []
    from occd.jobs.scan import UNVERIFIED_ERA

    for obs in scan.sessions:
        if obs.era == UNVERIFIED_ERA and obs.session_key in doc["sessions"]:
            # a schema occd does not know: no lean rules (the view hides what occd can no longer vouch for)
            dropped.append((obs, doc["sessions"].pop(obs.session_key)))
            changed = True
            continue
        if obs.era not in ("file", "db") or not obs.session_key:
            continue
        cur = doc["sessions"].get(obs.session_key)
        if isinstance(cur, dict) and cur.get("mode") in ("drop", "stub"):
            ctx.cache[CACHE_KEY].add(obs.session_key)
            counts["active"] += 1
            want = _session_rules(ctx, obs)
            if cur != want and s.policy_for(obs.agent).mode == "act":
                # the settings (or the model's prices) changed since the rules went on: the session follows them
                doc["sessions"][obs.session_key] = want
                changed = True
                refreshed.append((obs, cur, want))
            continue
        policy = s.policy_for(obs.agent)
        now = record_time(ctx)
        d = decision(ctx, obs, policy, now)
        if d is None or d.deferred:
            continue
        if not d.act:
            key = "wouldDo" if d.would_do else "blocked"
            counts[key] += 1
            if not _recent(led, obs, now, dry_run=d.would_do):
                led.record_action("lean", obs.agent, obs.session_id, obs.session_key, trigger="auto", policy=d.policy,
                                  reason=d.reason.replace("strip with preset", "lean view"), outcome=d.outcome,
                                  dry_run=d.would_do, before=cur or {"mode": "off"}, after=rules, now=now)
            continue
        g = breakers.gate(led, obs.agent, "lean", policy.breaker, now)
        if not g.allowed:
            counts["blocked"] += 1
            if not _recent(led, obs, now, dry_run=False):
                led.record_action("lean", obs.agent, obs.session_id, obs.session_key, trigger="auto", policy=d.policy,
                                  reason=f"{d.reason}; {g.reason}", outcome="skipped", now=now)
            continue
        doc["sessions"][obs.session_key] = mine = _session_rules(ctx, obs)
        changed = True
        pending.append((obs, d, g, cur, policy, mine))
    if changed:
        lean.write_policy(doc)  # one atomic write for the cycle, then the ledger says what it changed
        for obs, cur in dropped:
            led.record_action("lean", obs.agent, obs.session_id, obs.session_key, trigger="auto", policy=None,
                              reason="lean view off: OpenClaw database schema unverified (occd acts on nothing)",
                              outcome="ok", before=cur, after={"mode": "off"}, now=record_time(ctx))
            counts["turnedOff"] = counts.get("turnedOff", 0) + 1
            log.warning("%s/%s: lean view off (unverified OpenClaw schema)", obs.agent, obs.session_id[:13])
        for obs, cur, want in refreshed:
            led.record_action("lean", obs.agent, obs.session_id, obs.session_key, trigger="auto", policy=None,
                              reason="lean rules follow the settings (" + ", ".join(
                                  sorted(k for k in set(cur) | set(want) if cur.get(k) != want.get(k))) + ")",
                              outcome="ok", before=cur, after=want, now=record_time(ctx))
            counts["refreshed"] = counts.get("refreshed", 0) + 1
        for obs, d, g, cur, policy, mine in pending:
            now = record_time(ctx)
            led.record_action("lean", obs.agent, obs.session_id, obs.session_key, trigger="auto", policy=d.policy,
                              reason=f"{d.reason.split(':')[0]}: lean view {mine['mode']}, keep {mine['keepTurns']} turns",
                              outcome="ok", before=cur or {"mode": "off"}, after=mine, now=now)
            breakers.record(led, g, obs.agent, "lean", policy.breaker, True, now)
            ctx.cache[CACHE_KEY].add(obs.session_key)
            counts["turnedOn"] += 1
            log.info("%s/%s: lean view on (%s)", obs.agent, obs.session_id[:13], d.reason)
    counts["boundaryMoves"] = _record_moves(ctx, scan, lean.read_stats())
    return counts


def _record_moves(ctx, scan, stats: dict) -> int:
    """Each boundary move the plugin reported since the last one in the ledger becomes a "lean-move" action with
    what the cost model needs (occd.policy.cost): the lean prompt before and after (counts from the plugin, chars/4
    of the messages it was sending), the part that stayed a cache read, the prices. Returns the moves recorded."""
    from occd.jobs.decide import economics
    from occd.jobs.scan import record_time
    from occd.policy import cost

    led = ctx.ledger
    sessions = stats.get("sessions") if isinstance(stats.get("sessions"), dict) else {}
    by_key = {o.session_key: o for o in scan.sessions if getattr(o, "session_key", None)}
    n = 0
    for key, c in sessions.items():
        moves, lm = (c or {}).get("boundaryMoves"), (c or {}).get("lastMove")
        if not isinstance(moves, int) or moves <= 0 or not isinstance(lm, dict):
            continue
        seen = 0
        for a in led.history(kind="lean-move", session=key, limit=50):
            if a.get("session_key") != key:
                continue
            seen = max(seen, int((a.get("after") or {}).get("boundaryMoves") or 0))
        if moves <= seen:
            continue
        obs = by_key.get(key)
        econ = economics(ctx, obs) if obs is not None else None
        before_t = max(0, int(lm.get("charsBefore") or 0) // 4)
        after_t = max(0, min(before_t, int(lm.get("charsAfter") or 0) // 4))
        cost_rec = {"promptTokens": before_t, "prefixKeptTokens": min(after_t, max(0, int(lm.get("prefixChars") or 0) // 4)),
                    "warm": lm.get("why") != "cold", "turns": ctx.settings.cost.horizon_turns}
        if isinstance(lm.get("requests"), (int, float)):  # the plugin's count of the session's requests a turn
            cost_rec["requestsPerTurn"] = cost.requests_a_turn(lm["requests"])
        if econ is not None:
            cost_rec["prices"] = econ.prices.as_dict()
            cost_rec["ttlSeconds"] = econ.ttl_s
        agent = key.split(":")[1] if key.startswith("agent:") and key.count(":") >= 2 else (obs.agent if obs else None)
        led.record_action("lean-move", agent, c.get("sessionId") or (obs.session_id if obs else None), key,
                          trigger="auto", policy="lean", reason=f"lean view hid {lm.get('turns')} more turns"
                          + (f" ({MOVE_WHY[lm.get('why')]})" if lm.get("why") in MOVE_WHY else ""),
                          outcome="ok", before={"predictedPromptTokens": before_t, "removedTokens": before_t - after_t,
                                                "cost": cost_rec},
                          after={"boundaryMoves": moves, "turnsHidden": lm.get("turns"), "movedAt": lm.get("at")},
                          now=record_time(ctx))
        n += 1
    return n


MOVE_WHY = {"pays": "it pays: the reads it saves outweigh the cache write", "budget": "near OpenClaw's budget",
            "cap": "before OpenClaw's cap on a prompt's tool results", "cold": "the prompt cache had expired: free"}


def _after_upgrade(ctx) -> dict:
    """OpenClaw was upgraded since `occd lean enable`: the plugin is re-installed and reloaded
    (occd.lean.upgrade), recorded in the ledger either way."""
    from occd.errors import OccdError
    from occd.jobs.scan import record_time
    from occd.lean.upgrade import refresh_after_upgrade

    try:
        up = refresh_after_upgrade(ctx.state_dir)
    except OccdError as e:
        key = f"lean.upgrade.failed:{e.message}"
        if key not in ctx.cache:  # once per daemon and failure, not once per cycle
            ctx.cache[key] = True
            log.warning("%s (%s)", e.message, e.hint)
            ctx.ledger.record_action("lean", None, trigger="auto", reason=f"re-install after an OpenClaw upgrade: "
                                     f"{e.message}", outcome="failed", error=e.message, now=record_time(ctx))
        return {"reinstallFailed": e.message}
    if not up:
        return {}
    log.info("OpenClaw %s -> %s: lean view plugin re-installed%s", up["from"], up["to"],
             ", reloaded" if up["reloaded"] else f" ({up['hint']})")
    ctx.ledger.record_action("lean", None, trigger="auto", reason=f"OpenClaw {up['from']} -> {up['to']}: plugin "
                             "re-installed" + (" and reloaded" if up["reloaded"] else f"; {up['hint']}"),
                             outcome="ok", before={"release": up["from"]}, after={"release": up["to"],
                             "reloaded": up["reloaded"]}, now=record_time(ctx))
    return {"reinstalled": up["to"], "reloaded": up["reloaded"]}


def _recent(led, obs, now: float, *, dry_run: bool) -> bool:
    for a in led.history(kind="lean", since=now - REPEAT_S, limit=200):
        if a["session_id"] == obs.session_id and a["agent_id"] == obs.agent and bool(a["dry_run"]) == dry_run:
            return True
    return False
