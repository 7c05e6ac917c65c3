"""The `Ledger` facade: plain methods to record what occd saw and did. Every write is one short BEGIN IMMEDIATE
transaction; every method that depends on time takes `now` (epoch seconds or an aware datetime; None means the
wall clock). The queries behind `occd status` and `occd history` (the read side) are in occd.ledger.queries, which
`Ledger` inherits: `led.history(...)` works as before.

Rows come back as plain dicts (column name → value) so callers need no SQLAlchemy.
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from occd import paths
from occd.errors import OccdError
from occd.ledger import engine as _eng
from occd.ledger import migrate as _mig
from occd.ledger.common import (ROTATION_STATES, ROTATION_UNFINISHED, BreakerRecord, _dumps, _loads,  # noqa: F401
                                local_day_start, ts)
from occd.ledger.problems import LedgerProblems
from occd.ledger.queries import LedgerQueries

# An agent's last_seen is refreshed at most this often. A session's last_seen is the last scan that saw it
# (`status SESSION` shows it): a quiet scan writes no observation, only that one column of the rows it saw.
LAST_SEEN_RESOLUTION_S = 3600.0
ACTION_OUTCOMES = ("ok", "failed", "skipped", "deferred")

_OBS_FIELDS = ("compaction_count", "context_tokens", "tokens_source", "context_window", "size", "entry_count",
               "last_activity")


def _hostname() -> str:
    import socket  # only the daemon's run records need it: read commands skip the import

    return socket.gethostname()


class Ledger(LedgerProblems, LedgerQueries):
    def __init__(self, path: Path, engine, readonly: bool = False):
        self.path = path
        self.engine = engine
        self.readonly = readonly

    # ---- lifecycle ----

    @classmethod
    def open(cls, path: Path | str | None = None, *, readonly: bool = False, upgrade: bool = True,
             busy_timeout: float | None = None) -> "Ledger":
        """Open (creating if needed) and bring the schema to head. `readonly` opens without writing anything
        and refuses a ledger whose schema is behind (`occd db upgrade` fixes that)."""
        p = Path(path) if path is not None else paths.ledger_path()
        busy_timeout = _eng.BUSY_TIMEOUT_S if busy_timeout is None else busy_timeout
        if os.path.islink(p):
            raise OccdError(f"The ledger {paths.display_path(p)} is a symbolic link; occd does not open it",
                            "move the link aside (occd creates its own ledger), or point OCCD_HOME elsewhere",
                            code="LEDGER_UNAVAILABLE")
        if p.is_dir():
            raise OccdError(f"The ledger path {paths.display_path(p)} is a directory, not a database file",
                            "move that folder aside, or point OCCD_HOME at another folder", code="LEDGER_UNAVAILABLE")
        if readonly:
            if not p.exists():
                raise OccdError(f"No ledger at {paths.display_path(p)} yet", "start the daemon or run `occd db upgrade`",
                                code="LEDGER_MISSING")
            eng = _eng.make_engine(p, readonly=True, busy_timeout=busy_timeout)
            led = cls(p, eng, readonly=True)
            with _eng.guarded(p):
                rev = _mig.current_revision(eng)
            if rev != _mig.HEAD_REVISION:
                eng.dispose()
                _mig.refuse_newer(rev, p)
                raise OccdError(f"The ledger {paths.display_path(p)} has schema {rev}, this occd needs "
                                f"{_mig.HEAD_REVISION}", "run `occd db upgrade`", code="LEDGER_OUTDATED")
            return led
        try:
            paths.ensure_dir(p.parent)
        except OSError as e:
            raise OccdError(f"Cannot create {paths.display_path(p.parent)}: {e.strerror}",
                            "set OCCD_HOME to a writable folder", code="LEDGER_UNAVAILABLE") from None
        if p.exists() and not os.access(p, os.W_OK):
            raise OccdError(f"The ledger {paths.display_path(p)} is read-only",
                            "check the file's permissions and owner, or point OCCD_HOME at a writable folder",
                            code="LEDGER_READONLY")
        new = not p.exists()
        _private_files(p, create=new)  # SQLite gives -wal/-shm the database file's mode: 0600 first
        eng = _eng.make_engine(p, busy_timeout=busy_timeout)
        led = cls(p, eng)
        if new:
            with _eng.guarded(p):
                with eng.connect() as c:  # create the file with private permissions before anything is in it
                    c.exec_driver_sql("PRAGMA user_version")
            os.chmod(p, 0o600)
        if upgrade:
            led.upgrade()
        return led

    def upgrade(self) -> _mig.UpgradeResult:
        with _eng.guarded(self.path):
            return _mig.upgrade(self.engine, self.path)

    def revision(self) -> str | None:
        with _eng.guarded(self.path):
            return _mig.current_revision(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _w(self):
        if self.readonly:
            raise OccdError("The ledger was opened read-only", code="LEDGER_READONLY")
        return _eng.write_tx(self.engine, self.path)

    # ---- agents and sessions ----

    @staticmethod
    def _upsert_agent(c, agent: str, era: str | None, now: float) -> None:
        c.exec_driver_sql(
            "INSERT INTO agents (id, era, first_seen, last_seen) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET era = COALESCE(excluded.era, agents.era), "
            "last_seen = MAX(agents.last_seen, excluded.last_seen)",
            (agent, era, now, now))

    def record_agent(self, agent: str, era: str | None = None, now=None) -> None:
        with self._w() as c:
            self._upsert_agent(c, agent, era, ts(now))

    @staticmethod
    def _session_pk(c, agent: str, session_id: str, key: str | None, path: str | None, now: float,
                    touch: bool = True) -> int:
        row = c.exec_driver_sql("SELECT id, session_key, path, last_seen FROM sessions WHERE agent_id = ? "
                                "AND session_id = ?", (agent, session_id)).first()
        if row is None:
            return c.exec_driver_sql(
                "INSERT INTO sessions (agent_id, session_key, session_id, path, first_seen, last_seen) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id", (agent, key, session_id, path, now, now)).scalar_one()
        pk, old_key, old_path, last_seen = row
        new_key = key if key is not None else old_key
        new_path = path if path is not None else old_path
        if new_key != old_key or new_path != old_path or (touch and now - last_seen >= LAST_SEEN_RESOLUTION_S):
            c.exec_driver_sql("UPDATE sessions SET session_key = ?, path = ?, last_seen = MAX(last_seen, ?) "
                              "WHERE id = ?", (new_key, new_path, now, pk))
        return pk

    def mark_session_archived(self, agent: str, session_id: str, archive_path: str | None, now=None) -> None:
        now = ts(now)
        with self._w() as c:
            self._upsert_agent(c, agent, None, now)
            pk = self._session_pk(c, agent, session_id, None, None, now, touch=False)
            c.exec_driver_sql("UPDATE sessions SET archived_at = ?, archive_path = ?, archive_size = NULL, "
                              "archive_sha256 = NULL, archive_sha256_source = NULL WHERE id = ?", (now, archive_path, pk))

    def mark_session_unarchived(self, agent: str, session_id: str, path: str | None = None, now=None) -> None:
        """The session is live again (rotate --undo put it back): clear its archived state."""
        now = ts(now)
        with self._w() as c:
            self._upsert_agent(c, agent, None, now)
            pk = self._session_pk(c, agent, session_id, None, path, now)
            c.exec_driver_sql("UPDATE sessions SET archived_at = NULL, archive_path = NULL, archive_size = NULL, "
                              "archive_sha256 = NULL, archive_sha256_source = NULL WHERE id = ?", (pk,))

    # ---- observations ----

    def record_observation(self, agent: str, session_id: str, *, session_key: str | None = None,
                           path: str | None = None, era: str | None = None, now=None, **obs: Any) -> bool:
        """Record a session's state; returns False (and writes no observation) when nothing changed since the
        latest one. `obs` fields: compaction_count, context_tokens, tokens_source, context_window, size,
        entry_count, last_activity."""
        return self.record_observations([dict(agent=agent, session_id=session_id, session_key=session_key,
                                              path=path, era=era, **obs)], now=now) == 1

    def record_observations(self, items: Iterable[Mapping[str, Any]], now=None) -> int:
        """Batch form for a scan: one transaction for all sessions; returns how many observations were new.
        A quiet scan (nothing changed) reads two result sets and writes no observation, only the sessions'
        last_seen (the time the daemon last looked at each)."""
        now = ts(now)
        items = list(items)
        if not items:
            return 0
        unknown = {k for it in items for k in it} - set(_OBS_FIELDS) - {"agent", "session_id", "session_key",
                                                                         "path", "era"}
        if unknown:
            raise TypeError(f"unknown observation fields: {sorted(unknown)}")
        agents: dict[str, str | None] = {}
        for it in items:
            if it.get("era") or it["agent"] not in agents:
                agents[it["agent"]] = it.get("era") or agents.get(it["agent"])
        names = sorted(agents)
        flt = f"agent_id IN ({', '.join('?' for _ in names)})" if len(names) <= 500 else "1"
        prm = tuple(names) if len(names) <= 500 else ()
        with self._w() as c:
            cur = c.connection.dbapi_connection.cursor()  # the same connection and transaction, less overhead
            known_agents = {r[0]: (r[1], r[2]) for r in cur.execute(
                f"SELECT id, era, last_seen FROM agents WHERE {flt.replace('agent_id', 'id')}", prm)}
            for a, era in agents.items():
                old = known_agents.get(a)
                if old is None or (era and era != old[0]) or now - old[1] >= LAST_SEEN_RESOLUTION_S:
                    self._upsert_agent(c, a, era, now)
            sess = {(r[1], r[2]): (r[0], r[3], r[4], r[5]) for r in cur.execute(
                f"SELECT id, agent_id, session_id, session_key, path, last_seen FROM sessions WHERE {flt}", prm)}
            latest = {r[0]: tuple(r[1:]) for r in cur.execute(
                "SELECT s.id, " + ", ".join(f"o.{f}" for f in _OBS_FIELDS) + " FROM sessions s JOIN observations o "
                "ON o.id = (SELECT id FROM observations WHERE session_pk = s.id ORDER BY ts DESC, id DESC LIMIT 1) "
                f"WHERE {flt.replace('agent_id', 's.agent_id')}", prm)}
            updates, touched, rows = [], [], []
            for it in items:
                path = str(it["path"]) if it.get("path") is not None else None
                key = it.get("session_key")
                known = sess.get((it["agent"], it["session_id"]))
                if known is None:
                    pk = cur.execute(
                        "INSERT INTO sessions (agent_id, session_key, session_id, path, first_seen, last_seen) "
                        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id", (it["agent"], key, it["session_id"], path, now,
                                                                     now)).fetchone()[0]
                    sess[(it["agent"], it["session_id"])] = (pk, key, path, now)
                else:
                    pk, old_key, old_path, last_seen = known
                    new_key = key if key is not None else old_key
                    new_path = path if path is not None else old_path
                    if new_key != old_key or new_path != old_path:
                        updates.append((new_key, new_path, now, pk))
                    elif now > last_seen:
                        touched.append((now, pk))
                new = tuple(it.get(f) for f in _OBS_FIELDS)
                if new[0] is None:
                    new = (0,) + new[1:]
                if latest.get(pk) == new:
                    continue
                latest[pk] = new
                rows.append((pk, now, *new))
            if updates:
                cur.executemany("UPDATE sessions SET session_key = ?, path = ?, last_seen = MAX(last_seen, ?) "
                                "WHERE id = ?", updates)
            if touched:
                cur.executemany("UPDATE sessions SET last_seen = ? WHERE id = ?", touched)
            if rows:
                cur.executemany("INSERT INTO observations (session_pk, ts, " + ", ".join(_OBS_FIELDS) +
                                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            cur.close()
        return len(rows)

    def prune_observations(self, older_than, now=None) -> int:
        """Maintenance: delete observations older than `older_than`, keeping each session's newest one."""
        cutoff = ts(older_than)
        with self._w() as c:
            res = c.exec_driver_sql(
                "DELETE FROM observations WHERE ts < ? AND id NOT IN (SELECT (SELECT id FROM observations o "
                "WHERE o.session_pk = s.id ORDER BY ts DESC, id DESC LIMIT 1) FROM sessions s)", (cutoff,))
            return res.rowcount

    # ---- actions and backups ----

    def record_action(self, kind: str, agent: str | None = None, session_id: str | None = None,
                      session_key: str | None = None, *, trigger: str = "manual", policy: str | None = None,
                      reason: str | None = None, outcome: str = "ok", before: Mapping | None = None,
                      after: Mapping | None = None, backup_path: str | Path | None = None, error: str | None = None,
                      dry_run: bool = False, duration_ms: float | None = None, now=None) -> int:
        from occd.ledger.kinds import ACTION_KINDS, is_action_kind

        if not is_action_kind(kind):
            raise ValueError(f"kind must be one of {ACTION_KINDS} or job:<name>, not {kind!r}")
        if outcome not in ACTION_OUTCOMES:
            raise ValueError(f"outcome must be one of {ACTION_OUTCOMES}, not {outcome!r}")
        if trigger not in ("manual", "auto"):
            raise ValueError(f"trigger must be manual or auto, not {trigger!r}")
        with self._w() as c:
            return c.exec_driver_sql(
                "INSERT INTO actions (ts, kind, agent_id, session_id, session_key, trigger, policy, reason, dry_run, "
                "before_json, after_json, backup_path, outcome, error, duration_ms) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (ts(now), kind, agent, session_id, session_key, trigger, policy, reason, int(bool(dry_run)),
                 _dumps(before), _dumps(after), str(backup_path) if backup_path else None, outcome,
                 (error or None) and str(error)[:2000], duration_ms)).scalar_one()

    def record_backup(self, path: str | Path, agent: str | None = None, session_id: str | None = None, *,
                      size: int | None = None, action_id: int | None = None, sha256: str | None = None,
                      now=None) -> int:
        src = "creation" if sha256 else None
        with self._w() as c:
            return c.exec_driver_sql(
                "INSERT INTO backups (agent_id, session_id, path, size, created, action_id, sha256, sha256_source) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(path) DO UPDATE SET size = excluded.size, created = excluded.created, pruned_at = NULL, "
                "action_id = COALESCE(excluded.action_id, backups.action_id), sha256 = excluded.sha256, "
                "sha256_source = excluded.sha256_source RETURNING id",
                (agent, session_id, str(path), size, ts(now), action_id, sha256, src)).scalar_one()

    def mark_backup_pruned(self, path: str | Path, now=None) -> bool:
        with self._w() as c:
            return c.exec_driver_sql("UPDATE backups SET pruned_at = ? WHERE path = ? AND pruned_at IS NULL",
                                     (ts(now), str(path))).rowcount > 0

    # ---- scans and the daemon ----

    def record_scan(self, started, duration_s: float, *, agents: int = 0, sessions_seen: int = 0,
                    sessions_changed: int = 0, bytes_read: int = 0, errors: int = 0,
                    error_text: str | None = None) -> int:
        with self._w() as c:
            return c.exec_driver_sql(
                "INSERT INTO scan_runs (started, duration_s, agents, sessions_seen, sessions_changed, bytes_read, "
                "errors, error_text) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (ts(started), float(duration_s), agents, sessions_seen, sessions_changed, bytes_read, errors,
                 (error_text or None) and error_text[:4000])).scalar_one()

    def daemon_started(self, pid: int | None = None, *, mode: str | None = None, version: str | None = None,
                       now=None) -> int:
        now = ts(now)
        if version is None:
            from occd import __version__ as version
        with self._w() as c:
            # a previous run that never said goodbye (killed, crashed) is closed here
            c.exec_driver_sql("UPDATE daemon_runs SET stopped = heartbeat, exit_reason = 'no clean stop' "
                              "WHERE stopped IS NULL AND host = ?", (_hostname(),))
            return c.exec_driver_sql(
                "INSERT INTO daemon_runs (pid, host, version, mode, started, heartbeat) VALUES (?, ?, ?, ?, ?, ?) "
                "RETURNING id", (pid or os.getpid(), _hostname(), version, mode, now, now)).scalar_one()

    def heartbeat(self, run_id: int, now=None, *, last_cycle=None, next_scan=None) -> None:
        with self._w() as c:
            c.exec_driver_sql(
                "UPDATE daemon_runs SET heartbeat = ?, last_cycle = COALESCE(?, last_cycle), "
                "next_scan = COALESCE(?, next_scan) WHERE id = ?",
                (ts(now), None if last_cycle is None else ts(last_cycle), None if next_scan is None else ts(next_scan),
                 run_id))

    def daemon_stopped(self, run_id: int, now=None, reason: str = "stopped") -> None:
        with self._w() as c:
            c.exec_driver_sql("UPDATE daemon_runs SET stopped = ?, heartbeat = ?, exit_reason = ? WHERE id = ?",
                              (ts(now), ts(now), reason, run_id))

    # ---- circuit breakers ----

    def set_breaker(self, state: Any, transitions: Iterable[Any] = (), now=None) -> None:
        """Store a breaker state (any object with BreakerRecord's fields, e.g. the policy's BreakerState) and
        the transitions that led to it, in one transaction."""
        now = ts(now)
        with self._w() as c:
            c.exec_driver_sql(
                "INSERT INTO breakers (agent_id, kind, state, opened_at, failures, cooloff_minutes, trial_started_at, "
                "reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(agent_id, kind) DO UPDATE SET "
                "state = excluded.state, opened_at = excluded.opened_at, failures = excluded.failures, "
                "cooloff_minutes = excluded.cooloff_minutes, trial_started_at = excluded.trial_started_at, "
                "reason = excluded.reason, updated_at = excluded.updated_at",
                (state.agent, state.kind, state.state, state.opened_at, state.failures, state.cooloff_minutes,
                 state.trial_started_at, state.reason, now))
            for t in transitions:
                self._transition(c, t.agent, t.kind, t.from_state, t.to_state, t.reason, ts(t.ts))

    @staticmethod
    def _transition(c, agent, kind, from_state, to_state, reason, when) -> None:
        c.exec_driver_sql("INSERT INTO breaker_transitions (ts, agent_id, kind, from_state, to_state, reason) "
                          "VALUES (?, ?, ?, ?, ?, ?)", (when, agent, kind, from_state, to_state, reason))

    def record_breaker_transition(self, agent: str, kind: str, from_state: str, to_state: str,
                                  reason: str | None = None, now=None) -> None:
        with self._w() as c:
            self._transition(c, agent, kind, from_state, to_state, reason, ts(now))

    # ---- rotations ----

    def rotation_upsert(self, rotation_id: int | None = None, *, now=None, **fields_: Any) -> int:
        """Create a rotation (rotation_id None: needs agent_id, session_key; state defaults to PENDING and the
        first transition is recorded) or update fields of an existing one. `details` is stored as JSON."""
        now = ts(now)
        if "details" in fields_:
            fields_["details_json"] = _dumps(fields_.pop("details"))
        allowed = {"agent_id", "session_key", "era", "trigger", "reason", "old_session_id", "new_session_id",
                   "old_path", "new_path", "archive_path", "state", "seed_budget_percent", "seed_tokens",
                   "compactions_before", "health", "details_json", "error", "finished"}
        bad = set(fields_) - allowed
        if bad:
            raise TypeError(f"unknown rotation fields: {sorted(bad)}")
        for k in ("old_path", "new_path", "archive_path"):
            if fields_.get(k) is not None:
                fields_[k] = str(fields_[k])
        if fields_.get("state") is not None and fields_["state"] not in ROTATION_STATES:
            raise ValueError(f"unknown rotation state {fields_['state']!r}")
        with self._w() as c:
            if rotation_id is None:
                fields_.setdefault("state", "PENDING")
                cols = list(fields_) + ["started", "updated"]
                rid = c.exec_driver_sql(
                    f"INSERT INTO rotations ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) RETURNING id",
                    (*fields_.values(), now, now)).scalar_one()
                c.exec_driver_sql("INSERT INTO rotation_transitions (rotation_id, ts, from_state, to_state, note) "
                                  "VALUES (?, ?, NULL, ?, ?)", (rid, now, fields_["state"], fields_.get("reason")))
                return rid
            if fields_:
                sets = ", ".join(f"{k} = ?" for k in fields_)
                n = c.exec_driver_sql(f"UPDATE rotations SET {sets}, updated = ? WHERE id = ?",
                                      (*fields_.values(), now, rotation_id)).rowcount
                if n == 0:
                    raise OccdError(f"No rotation {rotation_id} in the ledger", code="NOT_FOUND")
            return rotation_id

    def rotation_transition(self, rotation_id: int, to_state: str, now=None, note: str | None = None,
                            **fields_: Any) -> bool:
        """Move a rotation to `to_state` (with field updates) and record the transition, atomically.
        Idempotent: already in `to_state` → only the fields are updated, no transition row; returns False."""
        if to_state not in ROTATION_STATES:
            raise ValueError(f"unknown rotation state {to_state!r}")
        now = ts(now)
        if "details" in fields_:
            fields_["details_json"] = _dumps(fields_.pop("details"))
        for k in ("old_path", "new_path", "archive_path"):
            if fields_.get(k) is not None:
                fields_[k] = str(fields_[k])
        if to_state in ("COOLDOWN", "IDLE", "UNDONE"):
            fields_.setdefault("finished", now)
        with self._w() as c:
            cur = c.exec_driver_sql("SELECT state FROM rotations WHERE id = ?", (rotation_id,)).scalar()
            if cur is None:
                raise OccdError(f"No rotation {rotation_id} in the ledger", code="NOT_FOUND")
            sets = ", ".join([f"{k} = ?" for k in fields_] + ["state = ?", "updated = ?"])
            c.exec_driver_sql(f"UPDATE rotations SET {sets} WHERE id = ?", (*fields_.values(), to_state, now,
                                                                              rotation_id))
            if cur == to_state:
                return False
            c.exec_driver_sql("INSERT INTO rotation_transitions (rotation_id, ts, from_state, to_state, note) "
                              "VALUES (?, ?, ?, ?, ?)", (rotation_id, now, cur, to_state, note))
            return True

    # ---- relevance score cache and LLM spend ----

    def score_put(self, session_id: str, fingerprint: str, task_hash: str, score: float, method: str, *,
                  reason: str | None = None, model: str | None = None, now=None) -> None:
        if method not in ("model", "keywords"):
            raise ValueError(f"method must be model or keywords, not {method!r}")
        with self._w() as c:
            c.exec_driver_sql(
                "INSERT INTO relevance_scores (session_id, fingerprint, task_hash, score, method, model, reason, ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id, fingerprint, task_hash) DO UPDATE SET "
                "score = excluded.score, method = excluded.method, model = excluded.model, reason = excluded.reason, "
                "ts = excluded.ts", (session_id, fingerprint, task_hash, float(score), method, model,
                                     (reason or None) and reason[:1000], ts(now)))

    def prune_scores(self, older_than) -> int:
        with self._w() as c:
            return c.exec_driver_sql("DELETE FROM relevance_scores WHERE ts < ?", (ts(older_than),)).rowcount

    def record_llm_call(self, model: str, *, prompt_tokens: int = 0, completion_tokens: int = 0,
                        cost_usd: float = 0.0, outcome: str = "ok", purpose: str | None = None,
                        duration_ms: float | None = None, error: str | None = None, now=None) -> int:
        with self._w() as c:
            return c.exec_driver_sql(
                "INSERT INTO llm_calls (ts, model, purpose, prompt_tokens, completion_tokens, cost_usd, outcome, "
                "duration_ms, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (ts(now), model, purpose, int(prompt_tokens or 0), int(completion_tokens or 0), float(cost_usd or 0),
                 outcome, duration_ms, (error or None) and str(error)[:1000])).scalar_one()

    # ---- maintenance ----

    def maintain(self) -> None:
        """Weekly: refresh the planner's statistics and fold the WAL back into the database."""
        with _eng.guarded(self.path):
            with self.engine.connect() as c:
                raw = c.connection.dbapi_connection
                raw.execute("PRAGMA optimize")
                raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def breaker_record_fields() -> list[str]:
    return [f.name for f in fields(BreakerRecord)]


def _private_files(p: Path, *, create: bool) -> None:
    """The ledger and its -wal/-shm are the user's alone: a new ledger file is created 0600 before SQLite opens
    it (SQLite then creates -wal/-shm with the same mode, whatever the umask); existing ones of ours that are
    wider are narrowed."""
    if create:
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            pass
        except OSError:
            return
        else:
            os.fchmod(fd, 0o600)
            os.close(fd)
    for f in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
        try:
            st = os.lstat(f)
            if st.st_uid == os.getuid() and (st.st_mode & 0o077) and not os.path.islink(f):
                os.chmod(f, 0o600)
        except OSError:
            pass
