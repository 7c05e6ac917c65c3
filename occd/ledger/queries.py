"""The ledger's read side: the queries behind `occd status`, `occd history`, the policies' inputs (action times,
breakers, rotations, cached scores, spend) and `occd db`'s introspection. `Ledger` (occd.ledger.core, the writes)
inherits them, so callers keep calling `led.history(...)`; nothing here writes.

Rows come back as plain dicts (column name → value) so callers need no SQLAlchemy.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from occd.ledger import engine as _eng
from occd.ledger.common import ROTATION_UNFINISHED, BreakerRecord, _loads, local_day_start, ts


class LedgerQueries:
    """The read-only queries of a ledger; needs `self.engine` and `self.path` (given by `Ledger`)."""

    def _r(self):
        return _eng.read_tx(self.engine, self.path)

    def _rows(self, sql: str, params: Sequence | Mapping = ()) -> list[dict]:
        with self._r() as c:
            res = c.exec_driver_sql(sql, params if isinstance(params, Mapping) else tuple(params))
            return [dict(r._mapping) for r in res]

    # ---- agents and sessions ----

    def sessions(self, agent: str | None = None, include_archived: bool = True) -> list[dict]:
        sql = "SELECT * FROM sessions WHERE (? IS NULL OR agent_id = ?)"
        if not include_archived:
            sql += " AND archived_at IS NULL"
        return self._rows(sql + " ORDER BY agent_id, last_seen DESC", (agent, agent))

    def first_seen(self, agent: str | None = None, session_id: str | None = None) -> dict[tuple[str, str], float]:
        """(agent, session id) -> when occd first saw the session; all sessions, or one. Read once per process by the
        jobs (occd.jobs.decide.seen_in_use): first sights never change."""
        sql = "SELECT agent_id, session_id, first_seen FROM sessions"
        args: tuple = ()
        if agent is not None and session_id is not None:
            sql += " WHERE agent_id = ? AND session_id = ?"
            args = (agent, session_id)
        with self._r() as c:
            return {(r[0], r[1]): r[2] for r in c.exec_driver_sql(sql, args)}

    def first_look(self) -> float | None:
        """When occd's first scan of the state (with this ledger) ended: what was there then, occd found; what
        appeared later was born while it watched. None before any scan."""
        with self._r() as c:
            row = c.exec_driver_sql("SELECT started + duration_s FROM scan_runs ORDER BY started, id LIMIT 1").first()
        return row[0] if row is not None else None

    def agent_eras(self) -> dict[str, str | None]:
        """Agent id -> era (what the scan compares with; no per-agent session count)."""
        with self._r() as c:
            return {r[0]: r[1] for r in c.exec_driver_sql("SELECT id, era FROM agents")}

    def agents(self) -> list[dict]:
        return self._rows("SELECT a.*, (SELECT COUNT(*) FROM sessions s WHERE s.agent_id = a.id "
                          "AND s.archived_at IS NULL) AS sessions FROM agents a ORDER BY a.id")

    # ---- observations ----

    def latest_observations(self, agent: str | None = None, include_archived: bool = False) -> list[dict]:
        """Each session with its newest observation (status). One index seek per session."""
        sql = ("SELECT s.agent_id AS agent, s.session_id, s.session_key, s.path, s.first_seen, s.last_seen, "
               "s.archived_at, o.ts, o.compaction_count, o.context_tokens, o.tokens_source, o.context_window, "
               "o.size, o.entry_count, o.last_activity FROM sessions s JOIN observations o ON o.id = "
               "(SELECT id FROM observations WHERE session_pk = s.id ORDER BY ts DESC, id DESC LIMIT 1) "
               "WHERE (? IS NULL OR s.agent_id = ?)")
        if not include_archived:
            sql += " AND s.archived_at IS NULL"
        return self._rows(sql + " ORDER BY s.agent_id, o.context_tokens DESC", (agent, agent))

    def series(self, agent: str, session_id: str, since=None, limit: int | None = None) -> list[dict]:
        """A session's observations over time, oldest first."""
        since_ts = ts(since) if since is not None else None
        sql = ("SELECT o.ts, o.compaction_count, o.context_tokens, o.tokens_source, o.context_window, o.size, "
               "o.entry_count, o.last_activity FROM observations o JOIN sessions s ON s.id = o.session_pk "
               "WHERE s.agent_id = ? AND s.session_id = ? AND (? IS NULL OR o.ts >= ?) ORDER BY o.ts")
        rows = self._rows(sql, (agent, session_id, since_ts, since_ts))
        return rows[-limit:] if limit else rows

    def compaction_baseline(self, agent: str, session_id: str, at) -> int | None:
        """The session's compaction count at time `at` (the newest observation at or before it), else when occd
        first observed it (its oldest observation); None when the ledger has none: what a scheduled rotation
        counts from (compactions while occd watched or within the activity window, not the whole past)."""
        sub = "(SELECT id FROM sessions WHERE agent_id = ? AND session_id = ?)"
        rows = self._rows(f"SELECT compaction_count FROM observations WHERE session_pk = {sub} AND ts <= ? "
                          "ORDER BY ts DESC, id DESC LIMIT 1", (agent, session_id, ts(at)))
        if not rows:
            rows = self._rows(f"SELECT compaction_count FROM observations WHERE session_pk = {sub} "
                              "ORDER BY ts, id LIMIT 1", (agent, session_id))
        return rows[0]["compaction_count"] if rows and rows[0]["compaction_count"] is not None else None

    def series_buckets(self, agent: str, session_id: str, since, until=None, buckets: int = 60) -> list[dict]:
        """A session's history squeezed into `buckets` equal time slices (for a sparkline): per slice the
        highest context tokens and compaction count, and how many observations fell in it. Empty slices are
        left out. Aggregated in SQL, so a year of 5-minute rows costs one index range scan, not 100k dicts."""
        lo = ts(since)
        hi = ts(until) if until is not None else time.time()
        width = max((hi - lo) / max(buckets, 1), 1e-9)
        return self._rows(
            "SELECT MIN(CAST((o.ts - ?) / ? AS INTEGER), ?) AS bucket, MIN(o.ts) AS ts, MAX(o.context_tokens) AS context_tokens, "
            "MAX(o.compaction_count) AS compaction_count, MAX(o.size) AS size, COUNT(*) AS n FROM observations o "
            "WHERE o.session_pk = (SELECT id FROM sessions WHERE agent_id = ? AND session_id = ?) "
            "AND o.ts >= ? AND o.ts <= ? GROUP BY bucket ORDER BY bucket",
            (lo, width, max(buckets, 1) - 1, agent, session_id, lo, hi))

    # ---- actions and backups ----

    def backups(self, agent: str | None = None, session_id: str | None = None, include_pruned: bool = False) -> list[dict]:
        sql = "SELECT * FROM backups WHERE (? IS NULL OR agent_id = ?) AND (? IS NULL OR session_id = ?)"
        if not include_pruned:
            sql += " AND pruned_at IS NULL"
        return self._rows(sql + " ORDER BY created DESC", (agent, agent, session_id, session_id))

    @staticmethod
    def _action_dict(r: dict) -> dict:
        r = dict(r)
        r["before"] = _loads(r.pop("before_json"))
        r["after"] = _loads(r.pop("after_json"))
        r["dry_run"] = bool(r["dry_run"])
        return r

    @staticmethod
    def _history_where(agent, session, kind, since, outcome=None) -> tuple[str, tuple]:
        """`outcome`: ok, failed, skipped, deferred (of actions done), or `would` (observe mode's dry runs)."""
        since_ts = ts(since) if since is not None else None
        like = (session.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%") if session else None
        return ("(? IS NULL OR agent_id = ?) AND (? IS NULL OR kind = ?) "
                "AND (? IS NULL OR ts >= ?) AND (? IS NULL OR session_id LIKE ? ESCAPE '\\' "
                "OR session_key LIKE ? ESCAPE '\\') "
                "AND (? IS NULL OR (CASE WHEN dry_run AND outcome IN ('ok', 'skipped') THEN 'would' ELSE outcome END) = ?)",
                (agent, agent, kind, kind, since_ts, since_ts, like, like, like, outcome, outcome))

    def history(self, agent: str | None = None, session: str | None = None, kind: str | None = None,
                since=None, limit: int = 500, after_id: int | None = None, outcome: str | None = None) -> list[dict]:
        """Actions newest first. `session` matches a session id or key, or a prefix of either; `after_id`: only
        actions recorded after that one (history --follow)."""
        where, params = self._history_where(agent, session, kind, since, outcome)
        where += " AND (? IS NULL OR id > ?)"
        params = (*params, after_id, after_id)
        rows = self._rows(f"SELECT * FROM actions WHERE {where} ORDER BY ts DESC, id DESC LIMIT ?", (*params, limit))
        return [self._action_dict(r) for r in rows]

    def history_count(self, agent: str | None = None, session: str | None = None, kind: str | None = None,
                      since=None, outcome: str | None = None) -> int:
        """How many actions `history` with the same filters would return without a limit."""
        where, params = self._history_where(agent, session, kind, since, outcome)
        return self._rows(f"SELECT COUNT(*) AS n FROM actions WHERE {where}", params)[0]["n"]

    def action_for_backup(self, path: str) -> dict | None:
        """The action that made a backup (the newest whose backup_path it is), or None."""
        rows = self._rows("SELECT * FROM actions WHERE backup_path = ? ORDER BY ts DESC, id DESC LIMIT 1", (path,))
        return self._action_dict(rows[0]) if rows else None

    def action_sessions(self, agent: str | None = None) -> list[tuple[str, str | None]]:
        """(session id, session key) of every session the ledger has actions of (history --session resolves
        among them)."""
        return [(r["session_id"], r["session_key"]) for r in self._rows(
            "SELECT DISTINCT session_id, session_key FROM actions WHERE session_id IS NOT NULL "
            "AND (? IS NULL OR agent_id = ?)", (agent, agent))]

    def action_kinds(self) -> list[str]:
        return [r["kind"] for r in self._rows("SELECT DISTINCT kind FROM actions ORDER BY kind")]

    def actions_since(self, since, agent: str | None = None) -> list[dict]:
        return self.history(agent=agent, since=since, limit=100000)

    def action_counts_since(self, since) -> dict[str, dict[str, dict[str, int]]]:
        """{agent: {kind: {outcome: n}}} for actions at or after `since` (dry runs counted as outcome 'dry_run')."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for r in self._rows("SELECT agent_id, kind, CASE WHEN dry_run THEN 'dry_run' ELSE outcome END AS o, "
                            "COUNT(*) AS n FROM actions WHERE ts >= ? GROUP BY 1, 2, 3", (ts(since),)):
            out.setdefault(r["agent_id"] or "", {}).setdefault(r["kind"], {})[r["o"]] = r["n"]
        return out

    def action_times(self, agent: str, kind: str | None, since, trigger: str | None = None) -> list[tuple[float, str]]:
        """(ts, outcome) of real (non-dry-run) actions of an agent since a time, oldest first: the breaker's and
        the rate limit's input."""
        rows = self._rows("SELECT ts, outcome FROM actions WHERE agent_id = ? AND (? IS NULL OR kind = ?) "
                          "AND ts >= ? AND dry_run = 0 AND outcome IN ('ok', 'failed') AND (? IS NULL OR trigger = ?) "
                          "ORDER BY ts", (agent, kind, kind, ts(since), trigger, trigger))
        return [(r["ts"], r["outcome"]) for r in rows]

    # ---- scans and the daemon ----

    def last_scan(self) -> dict | None:
        rows = self._rows("SELECT * FROM scan_runs ORDER BY started DESC LIMIT 1")
        return rows[0] if rows else None

    def scan_failure(self) -> dict | None:
        """The scan job's newest failure (an action `job:scan`, failed) when it came after the last recorded scan:
        the figures the ledger holds are then stale, whatever that scan record says. None otherwise."""
        rows = self._rows("SELECT ts, error FROM actions WHERE kind = 'job:scan' AND outcome = 'failed' "
                          "ORDER BY ts DESC, id DESC LIMIT 1")
        if not rows:
            return None
        last = self.last_scan()
        return rows[0] if last is None or rows[0]["ts"] > last["started"] else None

    def scans(self, since=None, limit: int = 100) -> list[dict]:
        since_ts = ts(since) if since is not None else None
        return self._rows("SELECT * FROM scan_runs WHERE (? IS NULL OR started >= ?) ORDER BY started DESC LIMIT ?",
                          (since_ts, since_ts, limit))

    def latest_daemon_run(self) -> dict | None:
        rows = self._rows("SELECT * FROM daemon_runs ORDER BY started DESC, id DESC LIMIT 1")
        return rows[0] if rows else None

    # ---- circuit breakers ----

    @staticmethod
    def _breaker(r: Mapping) -> BreakerRecord:
        return BreakerRecord(agent=r["agent_id"], kind=r["kind"], state=r["state"], opened_at=r["opened_at"],
                             failures=r["failures"], cooloff_minutes=r["cooloff_minutes"],
                             trial_started_at=r["trial_started_at"], reason=r["reason"], updated_at=r["updated_at"])

    def get_breaker(self, agent: str, kind: str) -> BreakerRecord:
        rows = self._rows("SELECT * FROM breakers WHERE agent_id = ? AND kind = ?", (agent, kind))
        return self._breaker(rows[0]) if rows else BreakerRecord(agent=agent, kind=kind)

    def breakers(self, agent: str | None = None) -> list[BreakerRecord]:
        return [self._breaker(r) for r in self._rows(
            "SELECT * FROM breakers WHERE (? IS NULL OR agent_id = ?) ORDER BY agent_id, kind", (agent, agent))]

    def breaker_transitions(self, agent: str | None = None, kind: str | None = None, limit: int = 100) -> list[dict]:
        return self._rows("SELECT * FROM breaker_transitions WHERE (? IS NULL OR agent_id = ?) AND "
                          "(? IS NULL OR kind = ?) ORDER BY ts DESC, id DESC LIMIT ?",
                          (agent, agent, kind, kind, limit))

    # ---- rotations ----

    @staticmethod
    def _rotation_dict(r: Mapping) -> dict:
        d = dict(r)
        d["details"] = _loads(d.pop("details_json", None))
        return d

    def rotation_get(self, rotation_id: int) -> dict | None:
        rows = self._rows("SELECT * FROM rotations WHERE id = ?", (rotation_id,))
        return self._rotation_dict(rows[0]) if rows else None

    def rotation_history(self, rotation_id: int) -> list[dict]:
        return self._rows("SELECT ts, from_state, to_state, note FROM rotation_transitions WHERE rotation_id = ? "
                          "ORDER BY ts, id", (rotation_id,))

    def rotations(self, agent: str | None = None, session_key: str | None = None, since=None,
                  states: Sequence[str] | None = None, limit: int = 200) -> list[dict]:
        """Rotations newest first."""
        since_ts = ts(since) if since is not None else None
        sql = ("SELECT * FROM rotations WHERE (? IS NULL OR agent_id = ?) AND (? IS NULL OR session_key = ?) "
               "AND (? IS NULL OR started >= ?)")
        params: list[Any] = [agent, agent, session_key, session_key, since_ts, since_ts]
        if states:
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            params += list(states)
        return [self._rotation_dict(r) for r in self._rows(sql + " ORDER BY started DESC, id DESC LIMIT ?",
                                                           (*params, limit))]

    def last_rotation(self, agent: str, session_key: str) -> dict | None:
        rows = self.rotations(agent, session_key, limit=1)
        return rows[0] if rows else None

    def unfinished_rotations(self, agent: str | None = None) -> list[dict]:
        """Rotations cut off between PENDING and INJECTED (what recovery resumes or rolls back), oldest first."""
        return list(reversed(self.rotations(agent, states=ROTATION_UNFINISHED, limit=100000)))

    # ---- relevance score cache and LLM spend ----

    def score_get(self, session_id: str, fingerprint: str, task_hash: str) -> dict | None:
        rows = self._rows("SELECT * FROM relevance_scores WHERE session_id = ? AND fingerprint = ? AND task_hash = ?",
                          (session_id, fingerprint, task_hash))
        return rows[0] if rows else None

    def latest_scores(self, session_ids: Sequence[str] | None = None) -> dict[str, dict]:
        """The newest cached score per session id (whatever the task): the archive policy's input."""
        rows = self._rows("SELECT * FROM relevance_scores ORDER BY ts")
        out = {r["session_id"]: r for r in rows}
        return {k: v for k, v in out.items() if session_ids is None or k in session_ids}

    def spend_today(self, now=None) -> float:
        """Model spend (USD) since local midnight."""
        start = local_day_start(ts(now))
        rows = self._rows("SELECT COALESCE(SUM(cost_usd), 0) AS s FROM llm_calls WHERE ts >= ?", (start,))
        return float(rows[0]["s"])

    def llm_usage(self, since) -> dict:
        rows = self._rows("SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens, "
                          "COALESCE(SUM(completion_tokens), 0) AS completion_tokens, COALESCE(SUM(cost_usd), 0) "
                          "AS cost_usd FROM llm_calls WHERE ts >= ?", (ts(since),))
        return rows[0]

    # ---- introspection ----

    def table_counts(self) -> dict[str, int]:
        from occd.ledger.models import metadata

        out = {}
        with self._r() as c:
            for name in sorted(metadata.tables):
                out[name] = c.exec_driver_sql(f"SELECT COUNT(*) FROM {name}").scalar_one()
        return out

    def explain(self, sql: str, params: Sequence = ()) -> list[str]:
        return [r["detail"] for r in self._rows("EXPLAIN QUERY PLAN " + sql, params)]
