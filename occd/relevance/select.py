"""`occd select`: is there a session worth resuming for this task, or should the work start fresh?

discover → project status (current branch) → relevance ratings (model or keywords) → pure scores →
resume / fresh / queue with the reason.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from occd.relevance.discovery import Caller, Discovery, caller_from_env, discover
from occd.relevance.session import Session, facts_of
from occd.relevance.redact import squash

DIGEST_CHARS = 400       # per session, what the model sees (≈ 100 tokens)
PART_CHARS = 170


def digest_of(s: Session) -> str:
    """A session in a few hundred redacted characters: branch, label, first and latest user messages."""
    parts = []
    if s.branch:
        parts.append(f"branch {squash(s.branch, 60)}")
    if s.label:
        parts.append(f"label {squash(s.label, 60)}")
    first = squash(s.first_user_message, PART_CHARS)
    latest = squash(s.latest_user_task, PART_CHARS)
    if first:
        parts.append(f"first: {first}")
    if latest and latest != first:
        parts.append(f"latest: {latest}")
    return squash(" | ".join(parts) or "(no user messages)", DIGEST_CHARS)


def rate_items(sessions: list[Session]):
    from occd.relevance.llm import RateItem

    return [RateItem(s.id, s.fingerprint, digest_of(s), s.digest_text()) for s in sessions]


def state_dir_of(settings) -> Path | None:
    """OpenClaw's state directory as OpenClaw resolves it (it may not exist: discovery then says so)."""
    from occd.openclaw import resolve_state_dir

    return Path(settings.state_dir).expanduser() if getattr(settings, "state_dir", None) else resolve_state_dir()


def open_ledger_quietly(warnings: list[str]):
    """The ledger for the score cache and cost records, or None (with a warning) when it cannot be opened."""
    try:
        from occd.ledger import Ledger

        return Ledger.open()
    except Exception as e:  # noqa: BLE001 - selection works without the cache
        msg = getattr(e, "message", None) or (str(e).splitlines()[0] if str(e) else type(e).__name__)
        warnings.append(f"ledger unavailable, no score cache: {msg}")
        return None


def default_repo(repo: str | os.PathLike | None) -> tuple[Path | None, object | None]:
    """(repo root, project status). An explicit repo must be a git repository (OccdError otherwise); without
    one, the current directory's repository is used when there is one."""
    from occd.relevance.project import project_status, status_or_none

    if repo is not None:
        ps = project_status(repo)
        return Path(ps.root), ps
    ps = status_or_none(os.getcwd())
    return (Path(ps.root), ps) if ps else (None, None)


@dataclass
class SelectResult:
    task: str
    repo: str | None
    branch: str | None
    decision: object
    relevance: object
    sessions: list[Session]
    scores: dict
    warnings: list[str] = field(default_factory=list)
    repo_from_cwd: bool = False
    discovery: Discovery | None = None

    def to_json(self) -> dict:
        d = self.decision.to_json()
        rows = []
        by_id = {s.id: s for s in self.sessions}
        for sc in self.decision.ranking:
            s = by_id[sc.id]
            r = self.relevance.ratings.get(sc.id)
            rows.append({"id": s.id, "source": s.source, "agent": s.agent, "key": s.key, "branch": s.branch,
                         "running": s.running, "runningSource": s.running_source, "self": s.is_self,
                         "related": sc.related, "lastModified": s.to_json()["lastModified"],
                         "latestUserTask": squash(s.latest_user_task, 160) or None,
                         "relevance": sc.rating, "relevanceMethod": r.method if r else None,
                         "cached": bool(r and r.cached), "score": sc.total,
                         "parts": {"branch": sc.branch, "recency": sc.recency, "relevance": sc.relevance,
                                   "health": sc.health, "capacity": sc.capacity},
                         "forcedFresh": sc.forced_fresh, "notes": sc.notes})
        disc = self.discovery
        return {"success": True, "task": squash(self.task, 300), "repo": self.repo, "branch": self.branch,
                "repoFromCwd": self.repo_from_cwd, "action": d["action"], "sessionId": d["sessionId"],
                "reason": d["reason"], "relevance": self.relevance.to_json(), "candidates": rows,
                "caller": disc.caller.to_json() if disc and disc.caller else None,
                "searched": [p.to_json() for p in disc.places] if disc else [], "warnings": self.warnings}


def select_session(settings, *, task: str, repo=None, agent: str | None = None, label: str | None = None,
                   now: float | None = None, ledger=None, use_model: bool = True, cost_budget_usd: float | None = None,
                   state_dir: Path | None = None, claude_projects: Path | None = None,
                   mock_response: str | None = None, open_ledger: bool = True,
                   caller: Caller | None = None, env=None) -> SelectResult:
    """`caller`: the session asking (default: from the environment, see discovery.caller_from_env); it is
    never recommended to itself."""
    from occd.errors import UsageError
    from occd.relevance.llm import rate_relevance
    from occd.relevance.scoring import RELATED_AT, decide, score_session

    if not task or not task.strip():
        raise UsageError("The task is empty", "say what the work is: occd select --task \"...\"")
    now = time.time() if now is None else now
    warnings: list[str] = []
    repo_root, ps = default_repo(repo)
    sd = state_dir if state_dir is not None else state_dir_of(settings)
    if caller is None:
        caller = caller_from_env(env)
    disc = discover(state_dir=sd, agent=agent, repo=repo_root, claude_projects=claude_projects, caller=caller)
    warnings += disc.warnings
    own_ledger = None
    if ledger is None and open_ledger:
        ledger = own_ledger = open_ledger_quietly(warnings)
    try:
        model = settings.llm_model_for(agent)
        rel = rate_relevance(task, rate_items(disc.sessions), llm=settings.llm, model=model, ledger=ledger, now=now,
                             context=ps.summary() if ps else None, use_model=use_model, mock_response=mock_response)
    finally:
        if own_ledger is not None:
            own_ledger.close()
    branch = ps.branch if ps else None
    facts = [facts_of(s) for s in disc.sessions]
    scores = {f.id: score_session(f, rel.ratings[f.id].relevance, current_branch=branch, now=now,
                                  cost_budget_usd=cost_budget_usd,
                                  related_at=RELATED_AT.get(rel.ratings[f.id].method, RELATED_AT["model"]))
              for f in facts}
    decision = decide(facts, scores, threshold=settings.llm.resume_threshold, label=label)
    from_cwd = repo is None and repo_root is not None
    if decision.action == "fresh" and decision.session_id is None and not disc.sessions:
        decision.reason = disc.nothing_found() or decision.reason
    if from_cwd and (not disc.sessions or decision.action == "fresh"):
        decision.reason += (f" (only sessions of the current directory's repository {repo_root} were considered; "
                            "pass --repo to choose another)")
    return SelectResult(task, str(repo_root) if repo_root else None, branch, decision, rel, disc.sessions, scores,
                        warnings, from_cwd, disc)
