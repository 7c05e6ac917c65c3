"""Per-agent parts of `occd status`: the sessions occd leaves alone (idle, or not seen run), OpenClaw's index
entries of the sessions shown, and how far each is from OpenClaw's compaction point."""

from __future__ import annotations


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


def idle_summary(obs: list[dict], policy, now: float, archives: list[dict], agent: str,
                 firsts: tuple | None = None) -> dict:
    """The agent's sessions occd leaves alone (issue 29): not in use (no activity within
    policy.active_within_hours), so never stripped, rotated or put in the lean view automatically; what the
    idle-archive did with them in the last 7 days and would do next; the commands that act on request. `unseen`:
    the recent ones occd has not seen run (occd.policy.types.seen_run; `firsts`: Ledger.first_seen(), first_look())."""
    from occd.policy.types import seen_run

    hours = policy.active_within_hours
    idle = [o for o in obs if o.get("last_activity") is None or now - o["last_activity"] > hours * 3600]
    unseen = 0
    if firsts is not None and not getattr(policy, "act_on_unseen", False):
        for o in obs:
            la = o.get("last_activity")
            first = firsts[0].get((agent, o["session_id"]))
            if la is not None and now - la <= hours * 3600 and first is not None and not seen_run(la, first, firsts[1]):
                unseen += 1
    mine = [x for x in archives if x.get("agent_id") == agent and x.get("trigger") == "auto"]
    done = sum(1 for x in mine if x["outcome"] == "ok" and not x["dry_run"])
    pending = len({x["session_id"] for x in open_would(mine)} | {
        x["session_id"] for x in mine if x["outcome"] == "deferred"})
    return {"sessions": len(idle), "unseen": unseen, "activeWithinHours": hours, "archived7d": done,
            "archivePending": pending,
            "archiveAfterDays": policy.archive_after_days, "archiveBelowRelevance": policy.archive_below_relevance,
            "commands": ["occd rotate SESSION --dry-run", "occd rotate SESSION"]}



def _headroom(obs: dict, entry: dict | None) -> dict:
    """OpenClaw's compaction point for the session and how far its context is from it (negative: past it), by
    the one function every command uses (occd.openclaw.figure: OpenClaw's recorded budget for this window, else its
    default reserve)."""
    from occd.openclaw.figure import session_figure

    fig = session_figure(entry=entry, window=obs.get("context_window"), session_id=obs.get("session_id"))
    point, tokens = fig.compact_at, obs.get("context_tokens")
    return {"compactionPoint": point, "toCompaction": point - tokens if point and tokens is not None else None}


def _index_entries(settings, agent: str, ids: set, where: dict | None = None) -> dict[str, dict]:
    """OpenClaw's index entries of the sessions status shows (their budget records), {} when unreadable. `where`
    keeps the state folder and OpenClaw's release between the calls for each agent (looked up once)."""
    if not ids:
        return {}
    try:
        from pathlib import Path

        from occd.openclaw import FileStore, get_agent, open_store, release_evidence, resolve_state_dir

        where = {} if where is None else where
        if "state" not in where:
            where["state"] = (Path(settings.state_dir) if getattr(settings, "state_dir", None)
                              else resolve_state_dir())
            where["release"] = release_evidence(where["state"])
        state_dir = where["state"]
        store = open_store(state_dir, get_agent(state_dir, agent, release=where["release"]))
        if isinstance(store, FileStore):  # the index alone: no stat of every transcript for a few entries
            return {e["sessionId"]: e for e in store.index().values()
                    if isinstance(e, dict) and isinstance(e.get("sessionId"), str) and e["sessionId"] in ids}
        return {i.session_id: (i.entry or {}) for i in store.sessions() if i.session_id in ids}
    except Exception:  # noqa: BLE001 - the default budget is shown then
        return {}
