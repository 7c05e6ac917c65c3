"""Session score and the resume / fresh / queue decision. Pure: facts, a relevance rating and `now` in;
a score with its parts and a decision with its reasons out.

Score (0..1) = branch match (0.25; 0.125 when a branch is unknown) + recency (0..0.20) + task relevance (−0.15..0.25) + health (0..0.15)
+ capacity (0..0.15). Forced fresh: 3+ compactions, 70%+ of the context or cost budget used, or unrelated
(relevance < 0.1) with more than 200 messages.

Resuming needs real relevance first: a session is a candidate only when its rating reaches the floor of the
method that rated it (model 0.5: "related work" on its 0 = unrelated .. 1 = same work scale; keyword overlap
0.2). The other parts only choose among related sessions, and the best of those must still reach the threshold
(0.6 by default). So a recent, healthy session on the same branch is never resumed for unrelated work, however
its other parts add up. The calling session itself is never a candidate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

BRANCH_POINTS = 0.25
BRANCH_UNKNOWN_POINTS = 0.125  # the session's or the work's branch is not known (OpenClaw, "HEAD"): not a mismatch
RECENCY_STEPS = ((3600, 0.20), (6 * 3600, 0.16), (24 * 3600, 0.12), (3 * 86400, 0.08), (7 * 86400, 0.04))
RELEVANCE_MAX = 0.25
RELEVANCE_MID_LOW = 0.10
RELEVANCE_UNRELATED = -0.15
HEALTH_MAX = 0.15
HEALTH_PENALTY = 0.05          # each of: > 500 messages, > 5 MB, > 1 week old
CAPACITY_MAX = 0.15
COMPACTION_PENALTY = 0.05      # per compaction (1 or 2; 3 forces fresh)
CONTEXT_PENALTIES = ((50.0, 0.05), (30.0, 0.025))      # context use ≥ %: penalty
DENSITY_PENALTIES = ((3000.0, 0.05), (1500.0, 0.025))  # context tokens per message ≥: penalty
DENSITY_MIN_MESSAGES = 20      # below this the fixed system prompt and tools dominate the per-message figure
FORCE_COMPACTIONS = 3
FORCE_PERCENT = 70.0
UNRELATED = 0.1
UNRELATED_MAX_MESSAGES = 200
DEFAULT_THRESHOLD = 0.6
RELATED_AT = {"model": 0.5, "keywords": 0.2}   # the rating a method must give before a session can be resumed


@dataclass(frozen=True)
class Facts:
    """What scoring needs to know about one session (times in epoch seconds)."""

    id: str
    branch: str | None = None
    last_modified: float | None = None
    created: float | None = None
    message_count: int | None = None
    size: int | None = None
    compactions: int = 0
    context_tokens: int | None = None
    context_window: int | None = None
    cost_usd: float | None = None
    running: bool = False
    label: str | None = None
    key: str | None = None
    is_self: bool = False          # the session asking: never recommended to itself


@dataclass
class Score:
    id: str
    total: float
    branch: float
    recency: float
    relevance: float
    health: float
    capacity: float
    rating: float                  # the 0..1 relevance rating the points came from
    forced_fresh: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    related_at: float = RELATED_AT["model"]   # the rating this session needed to count as related

    @property
    def related(self) -> bool:
        return self.rating >= self.related_at

    def to_json(self) -> dict:
        d = asdict(self)
        d["forcedFresh"] = d.pop("forced_fresh")
        d["relatedAt"] = d.pop("related_at")
        d["related"] = self.related
        return d


def recency_points(last_modified: float | None, now: float) -> float:
    if last_modified is None:
        return 0.0
    age = max(0.0, now - last_modified)
    for limit, pts in RECENCY_STEPS:
        if age < limit:
            return pts
    return 0.0


def relevance_points(r: float) -> float:
    """≥0.6 → 0.25; 0.3..0.6 → linear 0.10..0.25; 0.1..0.3 → 0; <0.1 → −0.15."""
    if r >= 0.6:
        return RELEVANCE_MAX
    if r >= 0.3:
        return RELEVANCE_MID_LOW + (r - 0.3) / 0.3 * (RELEVANCE_MAX - RELEVANCE_MID_LOW)
    if r >= UNRELATED:
        return 0.0
    return RELEVANCE_UNRELATED


def _context_percent(f: Facts) -> float | None:
    if f.context_tokens is None or not f.context_window:
        return None
    return 100.0 * f.context_tokens / f.context_window


def score_session(f: Facts, rating: float, *, current_branch: str | None, now: float,
                  cost_budget_usd: float | None = None, related_at: float = RELATED_AT["model"]) -> Score:
    """`related_at`: the rating from which the session counts as related (RELATED_AT of the rating's method)."""
    rating = min(1.0, max(0.0, float(rating)))
    notes: list[str] = []
    if f.branch and current_branch:
        branch = BRANCH_POINTS if f.branch == current_branch else 0.0
    else:
        branch = BRANCH_UNKNOWN_POINTS
    recency = recency_points(f.last_modified, now)
    rel = relevance_points(rating)

    health = HEALTH_MAX
    if f.message_count is not None and f.message_count > 500:
        health -= HEALTH_PENALTY
        notes.append(f"{f.message_count} messages")
    if f.size is not None and f.size > 5 * 1024 * 1024:
        health -= HEALTH_PENALTY
        notes.append(f"{f.size / 1048576:.1f} MB")
    born = f.created if f.created is not None else f.last_modified
    if born is not None and now - born > 7 * 86400:
        health -= HEALTH_PENALTY
        notes.append(f"{(now - born) / 86400:.0f} days old")
    health = max(0.0, health)

    capacity = CAPACITY_MAX
    if f.compactions in (1, 2):
        capacity -= COMPACTION_PENALTY * f.compactions
        notes.append(f"{f.compactions} compaction{'s' if f.compactions > 1 else ''}")
    pct = _context_percent(f)
    if pct is not None:
        for limit, pen in CONTEXT_PENALTIES:
            if pct >= limit:
                capacity -= pen
                notes.append(f"context {pct:.0f}% used")
                break
    if f.context_tokens and f.message_count and f.message_count >= DENSITY_MIN_MESSAGES:
        density = f.context_tokens / f.message_count
        for limit, pen in DENSITY_PENALTIES:
            if density >= limit:
                capacity -= pen
                notes.append(f"{density:.0f} tokens per message")
                break
    capacity = max(0.0, capacity)

    forced: list[str] = []
    if f.compactions >= FORCE_COMPACTIONS:
        forced.append(f"{f.compactions} compactions (≥ {FORCE_COMPACTIONS})")
    if pct is not None and pct >= FORCE_PERCENT:
        forced.append(f"context {pct:.0f}% used (≥ {FORCE_PERCENT:.0f}%)")
    if cost_budget_usd and f.cost_usd is not None and 100.0 * f.cost_usd / cost_budget_usd >= FORCE_PERCENT:
        forced.append(f"cost ${f.cost_usd:.2f} is {100 * f.cost_usd / cost_budget_usd:.0f}% of the "
                      f"${cost_budget_usd:.2f} budget (≥ {FORCE_PERCENT:.0f}%)")
    if rating < UNRELATED and (f.message_count or 0) > UNRELATED_MAX_MESSAGES:
        forced.append(f"unrelated (relevance {rating:.2f}) and {f.message_count} messages (> {UNRELATED_MAX_MESSAGES})")

    total = round(branch + recency + rel + health + capacity, 4)
    return Score(f.id, total, round(branch, 4), round(recency, 4), round(rel, 4), round(health, 4),
                 round(capacity, 4), round(rating, 4), forced, notes, related_at)


@dataclass
class Decision:
    action: str                     # resume | fresh | queue
    session_id: str | None
    reason: str
    score: Score | None = None
    ranking: list[Score] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"action": self.action, "sessionId": self.session_id, "reason": self.reason,
                "score": self.score.to_json() if self.score else None,
                "ranking": [s.to_json() for s in self.ranking]}


def _matches_label(f: Facts, label: str) -> bool:
    want = label.strip().lower()
    return bool(want) and (want == (f.label or "").lower() or want == (f.key or "").lower()
                           or f.id.lower() == want or (len(want) >= 6 and f.id.lower().startswith(want)))


def decide(facts: list[Facts], scores: dict[str, Score], *, threshold: float = DEFAULT_THRESHOLD,
           label: str | None = None) -> Decision:
    """Resume the best related, eligible session scoring at least `threshold`; queue when that session is running;
    fresh otherwise, saying why. A caller's label picks its session directly (queue when it is running). The
    calling session is never the answer."""
    by_id = {f.id: f for f in facts}
    ranking = sorted((scores[f.id] for f in facts if f.id in scores), key=lambda s: (-s.total, s.id))
    if label:
        picked = [f for f in facts if _matches_label(f, label)]
        if not picked:
            return Decision("fresh", None, f"no session carries the label '{label}'", None, ranking)
        f = max(picked, key=lambda x: (x.last_modified or 0))
        sc = scores.get(f.id)
        if f.is_self:
            return Decision("fresh", None, f"label '{label}' picks {f.id[:13]}, the calling session itself: "
                                           "nothing to resume or queue behind", sc, ranking)
        warn = f" (note: {'; '.join(sc.forced_fresh)})" if sc and sc.forced_fresh else ""
        if f.running:
            return Decision("queue", f.id, f"label '{label}' picks this session; it is running now, so queue the task "
                                           f"until its run ends{warn}", sc, ranking)
        return Decision("resume", f.id, f"label '{label}' picks this session{warn}", sc, ranking)
    others = [s for s in ranking if not by_id[s.id].is_self]
    if not others:
        if ranking:
            return Decision("fresh", None, f"the only candidate is {ranking[0].id[:13]}, the calling session itself",
                            None, ranking)
        return Decision("fresh", None, "no candidate sessions", None, ranking)
    related = [s for s in others if s.related]
    if not related:
        best = max(others, key=lambda s: (s.rating, s.total))
        return Decision("fresh", None, f"no session is related to the task: the closest, {best.id[:13]}, is rated "
                                       f"{best.rating:.2f} (< {best.related_at:.2f} needed to resume, whatever its "
                                       f"score of {best.total:.2f})", best, ranking)
    eligible = [s for s in related if not s.forced_fresh]
    if not eligible:
        best = related[0]
        return Decision("fresh", None, f"every related session must start fresh; best {best.id[:13]} "
                                       f"(relevance {best.rating:.2f}): {'; '.join(best.forced_fresh)}", best, ranking)
    best = eligible[0]
    if best.total < threshold:
        return Decision("fresh", None, f"best related session {best.id[:13]} (relevance {best.rating:.2f}) scores "
                                       f"{best.total:.2f} < {threshold:.2f} ({_explain(best)})", best, ranking)
    why = _explain(best)
    if by_id[best.id].running:
        return Decision("queue", best.id, f"{best.id[:13]} is related (relevance {best.rating:.2f}) and scores "
                                          f"{best.total:.2f} ≥ {threshold:.2f} ({why}) but is running now: queue the "
                                          "task until its run ends", best, ranking)
    return Decision("resume", best.id, f"{best.id[:13]} is related (relevance {best.rating:.2f} ≥ "
                                       f"{best.related_at:.2f}) and scores {best.total:.2f} ≥ {threshold:.2f} ({why})",
                    best, ranking)


def _explain(s: Score) -> str:
    parts = [f"relevance {s.rating:.2f} → {s.relevance:+.2f}"]
    if s.branch == BRANCH_POINTS:
        parts.append("same branch")
    elif s.branch:
        parts.append("branch unknown")
    parts.append(f"recency {s.recency:.2f}")
    if s.notes:
        parts.append(", ".join(s.notes))
    return "; ".join(parts)
