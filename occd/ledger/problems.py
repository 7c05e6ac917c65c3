"""The ledger's record of checks: problems (open until a later check passes or the user forgets the artifact),
check runs, and the size+sha256 of backups and archives. A mixin of `Ledger` (it uses `_w`, `_rows`).

A problem is keyed by (source, subject, code). `sync_problems` is how a checker reports: what it found is
opened (or kept open, last_seen moves on) and every other open problem of the same sources whose subject the
checker looked at is resolved as 'passed'. Forgetting an artifact resolves its problems as 'forgotten' and adds a
FORGOTTEN row holding its path: later checks skip that path.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from occd.ledger.common import _dumps, _loads, ts

SEVERITIES = ("fail", "warn")


def _problem_dict(r: Mapping) -> dict:
    d = dict(r)
    d["details"] = _loads(d.pop("details_json", None))
    return d


class LedgerProblems:
    # ---- problems ----

    def sync_problems(self, sources: Iterable[str], found: Iterable[Mapping[str, Any]], *, now=None,
                      subjects: Iterable[str] | None = None) -> dict:
        """Open/refresh `found` (dicts with source, subject, code, message; optional severity, agent_id,
        session_id, path, hint, details) and resolve as 'passed' every other open problem of `sources`
        (only those about `subjects`, when given). Returns {opened, kept, resolved}."""
        now = ts(now)
        sources = tuple(sources)
        found = list(found)
        keys = set()
        opened = kept = 0
        with self._w() as c:
            for p in found:
                if p["source"] not in sources:
                    raise ValueError(f"problem source {p['source']!r} not among {sources}")
                sev = p.get("severity") or "fail"
                if sev not in SEVERITIES:
                    raise ValueError(f"severity must be one of {SEVERITIES}")
                key = (p["source"], p["subject"], p["code"])
                keys.add(key)
                row = c.exec_driver_sql("SELECT id FROM problems WHERE source = ? AND subject = ? AND code = ? "
                                        "AND resolved_at IS NULL", key).first()
                vals = (sev, p.get("agent_id"), p.get("session_id"), p.get("path") and str(p["path"]),
                        str(p["message"])[:2000], p.get("hint"), _dumps(p.get("details")))
                if row is None:
                    c.exec_driver_sql(
                        "INSERT INTO problems (source, subject, code, severity, agent_id, session_id, path, message, "
                        "hint, details_json, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*key, *vals, now, now))
                    opened += 1
                else:
                    c.exec_driver_sql(
                        "UPDATE problems SET severity = ?, agent_id = ?, session_id = ?, path = ?, message = ?, "
                        "hint = ?, details_json = ?, last_seen = ? WHERE id = ?", (*vals, now, row[0]))
                    kept += 1
            marks = ",".join("?" for _ in sources)
            rows = c.exec_driver_sql(f"SELECT id, source, subject, code FROM problems WHERE resolved_at IS NULL "
                                     f"AND code != 'FORGOTTEN' AND source IN ({marks})", sources).fetchall()
            scope = None if subjects is None else set(subjects)
            stale = [r[0] for r in rows if (r[1], r[2], r[3]) not in keys and (scope is None or r[2] in scope)]
            for pid in stale:
                c.exec_driver_sql("UPDATE problems SET resolved_at = ?, resolution = 'passed' WHERE id = ?", (now, pid))
        return {"opened": opened, "kept": kept, "resolved": len(stale)}

    def open_problems(self, *, agent: str | None = None, session_id: str | None = None,
                      severity: str | None = None, source: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM problems WHERE resolved_at IS NULL AND code != 'FORGOTTEN'", []
        for col, v in (("agent_id", agent), ("session_id", session_id), ("severity", severity), ("source", source)):
            if v is not None:
                sql += f" AND {col} = ?"
                args.append(v)
        return [_problem_dict(r) for r in self._rows(sql + " ORDER BY first_seen, id", args)]

    def problems_of(self, *, agent: str | None = None, session_id: str | None = None, limit: int = 50) -> list[dict]:
        """Open and resolved problems about one session (newest first), for `status SESSION`."""
        sql, args = "SELECT * FROM problems WHERE code != 'FORGOTTEN'", []
        for col, v in (("agent_id", agent), ("session_id", session_id)):
            if v is not None:
                sql += f" AND {col} = ?"
                args.append(v)
        return [_problem_dict(r) for r in self._rows(sql + " ORDER BY last_seen DESC, id DESC LIMIT ?", [*args, limit])]

    def forget_artifact(self, subject: str, path: str, *, agent: str | None = None, session_id: str | None = None,
                        now=None) -> int:
        """The user accepts the loss of this artifact: its open problems are resolved as 'forgotten' and its path
        is skipped by later checks. Returns how many open problems it closed."""
        now = ts(now)
        with self._w() as c:
            n = c.exec_driver_sql("UPDATE problems SET resolved_at = ?, resolution = 'forgotten' "
                                  "WHERE resolved_at IS NULL AND subject = ?", (now, subject)).rowcount
            c.exec_driver_sql(
                "INSERT INTO problems (source, subject, code, severity, agent_id, session_id, path, message, "
                "first_seen, last_seen, resolved_at, resolution) VALUES ('check', ?, 'FORGOTTEN', 'warn', ?, ?, ?, ?, "
                "?, ?, ?, 'forgotten')",
                (subject, agent, session_id, str(path), f"the user accepted the loss of {path}", now, now, now))
        return n

    def forgotten_paths(self) -> set[str]:
        return {r["path"] for r in self._rows("SELECT path FROM problems WHERE code = 'FORGOTTEN'") if r["path"]}

    # ---- check runs ----

    def record_check_run(self, started, finished, *, read_data: bool, trigger: str = "manual", artifacts: int = 0,
                         bytes_read: int = 0, problems: int = 0, summary: Mapping | None = None) -> int:
        with self._w() as c:
            return c.exec_driver_sql(
                "INSERT INTO check_runs (started, finished, read_data, trigger, artifacts, bytes_read, problems, "
                "summary_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (ts(started), ts(finished), int(bool(read_data)), trigger, artifacts, bytes_read, problems,
                 _dumps(summary))).scalar_one()

    def last_check_run(self, read_data: bool | None = None) -> dict | None:
        sql, args = "SELECT * FROM check_runs", []
        if read_data is not None:
            sql += " WHERE read_data = ?"
            args.append(int(read_data))
        rows = self._rows(sql + " ORDER BY started DESC, id DESC LIMIT 1", args)
        if not rows:
            return None
        d = rows[0]
        d["summary"] = _loads(d.pop("summary_json", None))
        return d

    # ---- artifact fingerprints (size + sha256) ----

    def set_backup_fingerprint(self, backup_id: int, size: int, sha256: str, source: str) -> None:
        with self._w() as c:
            c.exec_driver_sql("UPDATE backups SET size = ?, sha256 = ?, sha256_source = ? WHERE id = ?",
                              (size, sha256, source, backup_id))

    def set_archive_fingerprint(self, session_pk: int, size: int, sha256: str, source: str) -> None:
        with self._w() as c:
            c.exec_driver_sql("UPDATE sessions SET archive_size = ?, archive_sha256 = ?, archive_sha256_source = ? "
                              "WHERE id = ?", (size, sha256, source, session_pk))

    def archive_fingerprint_by_path(self, agent: str, session_id: str, path: str, size: int, sha256: str) -> None:
        """After occd made (or completed) an archive: record its size and hash on the session's row."""
        with self._w() as c:
            c.exec_driver_sql("UPDATE sessions SET archive_size = ?, archive_sha256 = ?, archive_sha256_source = "
                              "'creation' WHERE agent_id = ? AND session_id = ? AND archive_path = ?",
                              (size, sha256, agent, session_id, str(path)))

    def check_artifacts(self) -> dict:
        """The rows `occd check` verifies: live backups and archived sessions with a file path."""
        return {"backups": self._rows("SELECT * FROM backups WHERE pruned_at IS NULL ORDER BY id"),
                "archives": self._rows("SELECT * FROM sessions WHERE archived_at IS NOT NULL AND archive_path IS NOT "
                                       "NULL ORDER BY id")}
