"""What the budget trigger needs from a session, read by the apply job: the transcript's context estimated
with OpenClaw's rules (occd.policy.budget), the spiral/blocked observations (occd.policy.emergency), and the
prompt overhead learned from OpenClaw's own pre-prompt checks, per session and per agent and model.

A transcript is parsed only when it changed (cached by inode, size and mtime) and only when it could matter:
its size says it might be near the threshold, or it has compacted (a spiral or a block shows up there).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from occd.transcript import jsontext
from occd.units import iso_seconds

log = logging.getLogger("occd.jobs.budget")
FACTS_KEY = "budget.facts"
OVERHEAD_KEY = "budget.overhead"
GROWTH_KEY = "budget.turns"
BYTES_TO_ESTIMATE = 0.75  # an upper bound of OpenClaw's estimate per transcript byte (tool results at chars/2, x1.2)


@dataclass
class Facts:
    context: object        # budget.ContextEstimate
    observations: object   # emergency.Observations (without checkpoints)
    last_compaction_at: float | None = None  # the newest compaction entry (epoch seconds), when known
    gaps: tuple = ()       # the last gaps between a run's end and the next user message (budget.reply_gaps)
    count: tuple | None = None  # the provider's count of the last request, and the estimate it was sent (last_count)


def _facts(entries: list[dict], observations, last_compaction_at: float | None) -> Facts:
    """Facts of a transcript's slim entries, either era: the context OpenClaw sends, estimated, its gaps between
    runs and the provider's last count."""
    from occd.policy.budget import GAP_RUNS, context_messages, estimate_context, last_count, reply_gaps

    msgs = context_messages(entries)
    est = estimate_context(msgs)
    return Facts(est, observations, last_compaction_at, reply_gaps(msgs, GAP_RUNS), last_count(msgs, est))


def _parse(path: Path) -> list[dict]:
    """The transcript's lines, slim (occd.policy.budget.slim_entry); an assistant message carrying a provider
    compaction checkpoint is marked `_compaction` (with its timestamp): the policies count it as a compaction
    (occd.transcript.compaction.is_compaction, the one definition) without importing the transcript layer."""
    from occd.policy.budget import slim_entry
    from occd.transcript.compaction import is_compaction
    from occd.transcript.jsonl import iter_objects

    out = []
    with open(path, "rb") as fh:
        for o in iter_objects(fh):
            s = slim_entry(o)
            if s.get("type") == "message" and is_compaction(o):
                s["_compaction"] = True
                s["timestamp"] = o.get("timestamp")
            out.append(s)
    return out


def db_facts(ctx, obs) -> Facts | None:
    """The database era's Facts, read-only (OpenClaw's database is never written): the context from the last
    reset marker on (DbStore.read_lines' rule) estimated with OpenClaw's rules, and the emergency observations
    from DbStore.signals (occd.policy.emergency.observations_from_signals). Read again only when the session's
    figures changed (its size from the last reset on, its last update, its compaction count)."""
    import orjson

    from occd.errors import OccdError
    from occd.openclaw import open_store
    from occd.openclaw.dbstore import DbStore, context_window_lines, loop_signals
    from occd.policy.budget import slim_entry
    from occd.policy.emergency import observations_from_signals

    cache = ctx.cache.setdefault(FACTS_KEY, {})
    ck = ("db", obs.agent, obs.session_id)
    key = (obs.size, obs.last_activity, obs.compaction_count)
    hit = cache.get(ck)
    if hit and hit[0] == key:
        return hit[1]

    class _Info:  # all_lines needs the session id only
        session_id = obs.session_id

    try:
        store = open_store(ctx.state_dir, obs.agent)
        if not isinstance(store, DbStore):
            return None
        with store:
            lines = store.all_lines(_Info())
    except (OccdError, OSError) as e:
        log.debug("%s/%s: %s", obs.agent, obs.session_id, getattr(e, "message", e))
        return None
    entries = []
    for ln in context_window_lines(lines)[0]:
        try:
            o = jsontext.loads(ln)
        except orjson.JSONDecodeError:
            continue
        if isinstance(o, dict):
            entries.append(slim_entry(o))
    sig = loop_signals(lines)
    f = _facts(entries, observations_from_signals(sig), iso_seconds(sig.get("lastCompactionAt")))
    cache[ck] = (key, f)
    return f


def facts(ctx, obs) -> Facts | None:
    """The session's estimated context and emergency observations, or None when the file cannot be read."""
    if obs.era == "db":
        return db_facts(ctx, obs)
    from occd.policy.emergency import observe_entries

    cache = ctx.cache.setdefault(FACTS_KEY, {})
    try:
        st = os.stat(obs.path)
    except OSError:
        return None
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = cache.get(str(obs.path))
    if hit and hit[0] == key:
        return hit[1]
    try:
        entries = _parse(obs.path)
    except OSError as e:
        log.debug("%s: %s", obs.path, e)
        return None
    comps = [e for e in entries if e.get("type") == "compaction" or e.get("_compaction")]
    f = _facts(entries, observe_entries(entries), iso_seconds(comps[-1].get("timestamp")) if comps else None)
    cache[str(obs.path)] = (key, f)
    return f


def worth_reading(obs, policy) -> bool:
    """Could this session be near OpenClaw's threshold, or in a spiral or blocked? (no read needed to say no)"""
    from occd.policy.budget import DEFAULT_OVERHEAD_TOKENS

    if not obs.prompt_budget or (obs.era != "db" and not obs.path):
        return False
    if (obs.compaction_count or 0) > 0:
        return True
    bound = (obs.size or 0) * BYTES_TO_ESTIMATE + DEFAULT_OVERHEAD_TOKENS
    return bound >= obs.prompt_budget * min(policy.strip_at_budget_percent, policy.strip_target_percent) / 100 / 2


def overhead(ctx, obs, context) -> tuple[int, str]:
    """The prompt overhead for the next check: learned from this session's last check when it fits the
    transcript, else the latest learned for the agent and model, else the documented default."""
    from occd.policy.budget import DEFAULT_OVERHEAD_TOKENS, learn_overhead

    learned = ctx.cache.setdefault(OVERHEAD_KEY, {})
    k = (obs.agent, obs.model)
    o = learn_overhead(obs.budget_status, context)
    if o is not None:
        learned[k] = o
        return o, "session"
    if k in learned:
        return learned[k], "agent"
    return DEFAULT_OVERHEAD_TOKENS, "default"


def _seen_growth(ctx, obs, context) -> tuple[int | None, int]:
    """(the growth margin, the session's large run) from the turns as they were when they were new: once occd
    strips a session its older turns look small, so the newest turn's size is remembered each time a new turn
    shows up (within this process). The margin is the largest of the last few remembered (GROWTH_TURNS), the large
    run the largest of the last LARGE_TURNS, each if larger than what the file shows."""
    from occd.policy.budget import GROWTH_TURNS, LARGE_TURNS, growth_margin, with_margin

    seen = ctx.cache.setdefault(GROWTH_KEY, {})
    k = (obs.agent, obs.session_id)
    turns = seen.setdefault(k, {})
    if context.turns:
        turns.setdefault(len(context.turns), context.turns[-1].total)
        for old in sorted(turns)[:-LARGE_TURNS]:
            del turns[old]
    newest = [turns[t] for t in sorted(turns)[-GROWTH_TURNS:]]
    remembered = with_margin(max(newest)) if newest else 0
    large = max(with_margin(max(turns.values())) if turns else 0, growth_margin(context, 0, LARGE_TURNS))
    return max(remembered, growth_margin(context, 0)) or None, large


def evaluate(ctx, obs, policy, now: float):
    """(prediction, strip target, emergency) for one session, or None when it is not worth a look."""
    from dataclasses import replace

    from occd.policy.budget import count_ratio, predict, spare_runs, strip_to_target
    from occd.policy.emergency import detect

    if not worth_reading(obs, policy):
        return None
    f = facts(ctx, obs)
    if f is None:
        return None
    over, src = overhead(ctx, obs, f.context)
    floor, large = _seen_growth(ctx, obs, f.context)
    p = predict(f.context, obs.prompt_budget, over, overhead_source=src, growth_floor=floor)
    p = replace(p, midrun=bool(getattr(obs, "midrun_check", False)), count_ratio=count_ratio(f.count, over),
                spare=spare_runs(f.gaps, gap_needed(getattr(ctx, "settings", None))))
    target = strip_to_target(f.context, p, policy.strip_target_percent, policy.keep_recent_turns,
                             policy.keep_recent_results)
    # room for a run like the session's large ones (file era: a strip makes it): counted when it is more than two
    # runs like the recent ones and the deepest strip the rules allow would leave that room (else no strip can,
    # and stripping on every turn for it would only break the prompt cache)
    deepest = target.results.after if target.results is not None else None
    if obs.era == "file" and large > 2 * p.growth and deepest is not None and deepest + large < p.budget:
        p = replace(p, large=large)
    em = detect(replace(f.observations, checkpoints=tuple(obs.checkpoints or ())), now)
    return p, target, em, fresh_session_tokens(p, obs, policy)


GAP_SLACK_S = 10.0  # beyond occd's own wait (the settle time or the poll), for a wake, a scan and a strip


def gap_needed(settings) -> float:
    """The gap between runs that leaves occd time to act before the next prompt: its settle time (events) or
    poll interval (no watching), and GAP_SLACK_S."""
    from occd.config import DaemonSettings

    d = getattr(settings, "daemon", None) or DaemonSettings()
    return (d.settle_seconds if d.watch else float(d.poll_interval_seconds)) + GAP_SLACK_S


def fresh_session_tokens(p, obs, policy) -> int | None:
    """The predicted estimate of the session rotated now: its prompt overhead plus a seed of
    `rotation.seed_budget_percent` of the window."""
    from occd.policy.budget import with_margin

    if not obs.context_window:
        return None
    return p.overhead + with_margin(obs.context_window * policy.rotation.seed_budget_percent / 100)
