"""The score job (hourly by default): rate each agent's idle sessions against the agent's current work and
feed the archive policy.

Current work = the latest user task of the agent's most active session (running, else most recently
changed) plus its workspace's project status. Ratings come from occd.relevance.llm (the model runs in a
short-lived worker process, never in the daemon; keyword fallback otherwise) and are cached and recorded in
the ledger. `score_agents` only decides; `run` hands act-mode archive decisions to the one action path
(occd.actions.archive.archive_session) behind the per-agent breaker, and records observe-mode ones.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("occd.jobs.score")
REPEAT_QUIET_S = 24 * 3600   # an unchanged would-archive / deferred decision is recorded once a day
RESUME_KEY = "score.after"   # the last agent scored when the job yielded to a wake
MEMO_KEY = "score.memo"      # agent id -> _Memo: what the last run read and rated (kept in the daemon's cache)


class _Memo:
    """An agent as the score job last saw it: the fingerprint of its folder (index, sessions folder, database),
    the sessions read then (reused while the fingerprint holds: no transcript is read again) and each rated
    session's rating with what it was rated on (its transcript's state and the task): a session is rated again
    only when one of them changed (issue 29: the score job rates only what changed since it last did)."""

    __slots__ = ("fp", "sessions", "rated")

    def __init__(self, fp, sessions):
        self.fp, self.sessions, self.rated = fp, sessions, {}


def _agent_fp(agent) -> tuple:
    """What changes when anything of an agent's sessions does: the scan's fingerprint (OpenClaw rewrites its index
    at every turn; a transcript created or removed changes the sessions folder), plus its database and WAL (the
    database era writes there)."""
    from occd.jobs.scan import _agent_fp as folder_fp, stat_key
    from occd.openclaw.state import DB_NAME

    db = agent.dir / "agent" / DB_NAME
    return folder_fp(agent) + (stat_key(db), stat_key(db.with_name(DB_NAME + "-wal")), agent.era)


def _transcripts_same(sessions) -> bool:
    """Every transcript read last time is as it was (a stat each: a file can grow without its index changing)."""
    import os

    for s in sessions:
        if s.path and s.mtime_ns is not None:
            try:
                st = os.stat(s.path)
            except OSError:
                return False
            if st.st_mtime_ns != s.mtime_ns or (s.size is not None and st.st_size != s.size):
                return False
    return True


def _rated_on(s, basis: tuple) -> tuple:
    return (s.mtime_ns, s.file_mtime, s.size, s.index_updated, s.message_count) + basis


@dataclass
class AgentScore:
    agent: str
    task: str | None
    active_session: str | None
    scored: int = 0
    method: str = "none"
    reason: str | None = None
    calls: int = 0
    cached: int = 0
    reused: int = 0          # of `scored`: ratings kept from the last run (the session and the task did not change)
    cost_usd: float = 0.0
    skipped: str | None = None


@dataclass
class ScoreReport:
    agents: list[AgentScore] = field(default_factory=list)
    decisions: list = field(default_factory=list)          # occd.policy.types.Decision (archive)
    eras: dict = field(default_factory=dict)               # (agent, session_id) -> era
    resume_after: str | None = None                        # yielded to a wake: the last agent scored

    def summary(self) -> dict:
        return {"agents": len(self.agents), "scored": sum(a.scored for a in self.agents),
                "reused": sum(a.reused for a in self.agents),
                "modelCalls": sum(a.calls for a in self.agents), "cached": sum(a.cached for a in self.agents),
                "costUsd": round(sum(a.cost_usd for a in self.agents), 6),
                "archiveCandidates": len(self.decisions),
                "methods": ",".join(sorted({a.method for a in self.agents if a.scored})) or "none"}


def _active(sessions):
    running = [s for s in sessions if s.running]
    pool = running or sessions
    with_task = [s for s in pool if s.latest_user_task] or [s for s in sessions if s.latest_user_task]
    if not with_task:
        return None
    return max(with_task, key=lambda s: s.last_modified or 0)


def score_agents(settings, ledger, state_dir: Path, now: float, *, stop=None, counter_cache: Path | None = None,
                 worker=None, urgent=None, after: str | None = None, memo: dict | None = None) -> ScoreReport:
    """Rate every agent's idle sessions and return the archive decisions (nothing is moved here). `after`: start
    after this agent (sorted ids). `urgent` (an Event): when set, stop after the agent in hand (at least one is
    scored) and say where in `resume_after`: a wake waits for the daemon's lock. `memo` (the daemon's cache,
    kept between runs): an agent whose folder did not change is not read again, and only sessions whose
    transcript or task changed are rated again; the decisions are made anew each run (they depend on `now`)."""
    from occd import paths
    from occd.errors import OccdError
    from occd.openclaw import list_agents, workspace_dir
    from occd.policy.archive import decide_archive, last_activity
    from occd.policy.types import SessionState
    from occd.relevance.openclaw_side import openclaw_sessions
    from occd.relevance.headtail import Counter
    from occd.relevance.llm import rate_relevance, run_worker
    from occd.relevance.project import status_or_none
    from occd.relevance.select import rate_items

    report = ScoreReport()
    counter = Counter(counter_cache if counter_cache is not None else paths.cache_dir() / "relevance-counts.json")
    try:
        agents = list_agents(state_dir)
    except OccdError as e:
        log.info("score: %s", e.message)
        return report
    if memo is not None and after is None:  # agents gone since the last run
        for gone in set(memo) - {a.id for a in agents}:
            memo.pop(gone, None)
    if after is not None:
        agents = [a for a in agents if a.id > after]
    try:
        for i, a in enumerate(agents):
            if stop is not None and stop.is_set():
                break
            if i and urgent is not None and urgent.is_set():
                report.resume_after = agents[i - 1].id
                break
            if a.era == "empty":
                continue
            fp = _agent_fp(a)
            m = memo.get(a.id) if memo is not None else None
            if m is not None and m.fp == fp and _transcripts_same(m.sessions):
                sessions = m.sessions
            else:
                warnings: list[str] = []
                try:
                    sessions, _links = openclaw_sessions(state_dir, agent=a.id, counter=counter, warnings=warnings,
                                                         agents=[a])
                except OccdError as e:
                    report.agents.append(AgentScore(a.id, None, None, skipped=e.message))
                    if memo is not None:
                        memo.pop(a.id, None)
                    continue
                for w in warnings:
                    log.debug("score: %s", w)
                old = m
                m = _Memo(fp, sessions)
                if old is not None:
                    m.rated = old.rated
                if memo is not None:
                    memo[a.id] = m
            active = _active(sessions)
            if active is None:
                report.agents.append(AgentScore(a.id, None, None, skipped="no session with a user task"))
                continue
            policy = settings.policy_for(a.id)
            since = {s.id: last_activity((s.file_mtime, s.index_updated, s.last_modified), now) for s in sessions}
            idle = [s for s in sessions if s.id != active.id and not s.running and since[s.id] is not None
                    and (now - since[s.id]) / 60 >= policy.gentle_wait_minutes()]
            ag = AgentScore(a.id, active.latest_user_task, active.id)
            report.agents.append(ag)
            if not idle:
                ag.skipped = "no idle sessions"
                continue
            task = active.latest_user_task
            basis = (task, settings.llm.enabled, settings.llm_model_for(a.id))
            m.rated = {k: v for k, v in m.rated.items() if k in {s.id for s in idle}}  # bounded by the sessions
            ratings = {s.id: m.rated[s.id][1] for s in idle
                       if s.id in m.rated and m.rated[s.id][0] == _rated_on(s, basis) and m.rated[s.id][2] > now}
            todo = [s for s in idle if s.id not in ratings]
            ag.reused = len(ratings)
            ag.method = ",".join(sorted({r.method for r in ratings.values()})) or "none"
            if todo:
                ws = active.repo_path
                if not ws:
                    try:
                        ws = str(workspace_dir(state_dir, a.id))
                    except OccdError:
                        ws = None
                ps = status_or_none(ws)
                rel = rate_relevance(task, rate_items(todo), llm=settings.llm, model=settings.llm_model_for(a.id),
                                     ledger=ledger, now=now, context=ps.summary() if ps else None,
                                     worker=worker or run_worker)
                ag.method = rel.method if not ratings or rel.method == ag.method else "mixed"
                ag.reason, ag.calls, ag.cached, ag.cost_usd = rel.reason, rel.calls, rel.cached, rel.cost_usd
                for s in todo:
                    r = ratings[s.id] = rel.ratings[s.id]
                    # a keyword fallback (no model: not installed, no key, the day's budget spent, a failed call)
                    # is rated again after a day; a model's rating and a chosen keyword rating hold until the
                    # session or the task changes
                    m.rated[s.id] = (_rated_on(s, basis), r, now + REPEAT_QUIET_S if r.reason else float("inf"))
            ag.scored = len(idle)
            for s in idle:
                r = ratings[s.id]
                st = SessionState(agent=a.id, session_key=s.key, session_id=s.id, context_tokens=s.context_tokens,
                                  context_window=s.context_window, compaction_count=s.compaction_count or 0,
                                  last_activity=since[s.id], running=s.running)
                d = decide_archive(st, policy, relevance=r.relevance, now=now, relevance_method=r.method)
                if d is not None:
                    report.decisions.append(d)
                    report.eras[(a.id, s.id)] = s.era
    finally:
        counter.save()
    return report


def _recently_recorded(ledger, d, now: float, *, dry_run: bool, outcome: str) -> bool:
    for row in ledger.history(agent=d.agent, session=d.session_id, kind="archive", since=now - REPEAT_QUIET_S, limit=20):
        if bool(row["dry_run"]) == dry_run and row["outcome"] == outcome:
            return True
    return False


ARCHIVES_PER_CYCLE = 3  # idle sessions the idle-archive archives per agent and run, at most


def act_on(ctx, report: ScoreReport) -> dict:
    """Carry out act-mode archive decisions through occd.actions (file era) behind the breaker; record the
    others. Returns counts."""
    from occd.errors import BusyError, OccdError
    from occd.jobs import breakers

    s, led = ctx.settings, ctx.ledger
    counts = {"archived": 0, "wouldArchive": 0, "deferred": 0, "blocked": 0, "failed": 0, "unsupported": 0,
              "held": 0}
    done: dict[str, int] = {}
    for d in report.decisions:
        if ctx.stop.is_set():
            break
        now = ctx.now()
        if not d.act:
            key = "wouldArchive" if d.would_do else "deferred"
            counts[key] += 1
            if not _recently_recorded(led, d, now, dry_run=d.would_do, outcome=d.outcome):
                led.record_action("archive", d.agent, d.session_id, d.session_key, trigger="auto", policy=d.policy,
                                  reason=d.reason, outcome=d.outcome, dry_run=d.would_do, before=d.details, now=now)
            continue
        if report.eras.get((d.agent, d.session_id)) != "file":
            counts["unsupported"] += 1
            if not _recently_recorded(led, d, now, dry_run=False, outcome="skipped"):
                led.record_action("archive", d.agent, d.session_id, d.session_key, trigger="auto", policy=d.policy,
                                  reason=f"{d.reason}; not archived: occd archives file-era sessions only "
                                         "(database era: `openclaw sessions archive`)", outcome="skipped",
                                  before=d.details, now=now)
            continue
        if done.get(d.agent, 0) >= ARCHIVES_PER_CYCLE:
            counts["held"] += 1  # bounded per cycle: the next run takes the next ones (an old history is not a
            continue             # to-do list to empty at once)
        policy = s.policy_for(d.agent)
        g = breakers.gate(led, d.agent, "archive", policy.breaker, now)
        if not g.allowed:
            counts["blocked"] += 1
            if not _recently_recorded(led, d, now, dry_run=False, outcome="skipped"):
                led.record_action("archive", d.agent, d.session_id, d.session_key, trigger="auto", policy=d.policy,
                                  reason=f"{d.reason}; {g.reason}", outcome="skipped", now=now)
            continue
        ok: bool | None
        try:
            from occd.actions.archive import archive_session

            archive_session(s, agent=d.agent, ref=d.session_id, trigger="auto", policy=d.policy, reason=d.reason,
                            ledger=led, now=now)
            counts["archived"] += 1
            done[d.agent] = done.get(d.agent, 0) + 1
            ok = True
            log.info("%s/%s: archived: %s", d.agent, d.session_id[:13], d.reason)
        except BusyError as e:
            counts["deferred"] += 1
            ok = None
            log.info("%s/%s: archive deferred: %s", d.agent, d.session_id[:13], e.message)
        except OccdError as e:
            counts["failed"] += 1
            ok = False
            log.warning("%s/%s: archive failed: %s", d.agent, d.session_id[:13], e.message)
            led.record_action("archive", d.agent, d.session_id, d.session_key, trigger="auto", policy=d.policy,
                              reason=d.reason, outcome="failed", error=e.message, now=now)
        if ok is not None:
            breakers.record(led, g, d.agent, "archive", policy.breaker, ok, ctx.now())
    return counts


def run(ctx) -> dict:
    """The scheduler's entry point (occd.jobs.JOBS): score, then act on / record the archive decisions."""
    t0 = time.monotonic()
    report = score_agents(ctx.settings, ctx.ledger, ctx.state_dir, ctx.now(), stop=ctx.stop, urgent=ctx.urgent,
                          after=ctx.cache.pop(RESUME_KEY, None), memo=ctx.cache.setdefault(MEMO_KEY, {}))
    out = report.summary()
    out.update(act_on(ctx, report))
    if report.resume_after is not None:  # a wake was waiting: the rest on the next run, right after it
        ctx.cache[RESUME_KEY] = report.resume_after
        out["yielded"] = True
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out
