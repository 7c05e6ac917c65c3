"""The ledger's tables (sqlmodel). Facts about sessions and what occd did to them; never transcript text.

Times are UTC epoch seconds (REAL): cheap to index and compare, unambiguous across time zones and clock
changes of the local zone. JSON columns hold small statistics dicts (before/after counts), never content.

Every change here needs a migration in migrations/versions/ (tests/test_migrations.py compares the migrated
schema with these models and fails when they drift apart).
"""

from __future__ import annotations

from typing import Optional

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def _fk(target: str, ondelete: str = "CASCADE", nullable: bool = False, index: bool = False):
    return Field(default=None, sa_column=Column(Integer, ForeignKey(target, ondelete=ondelete), nullable=nullable,
                                                index=index))


class Agent(SQLModel, table=True):
    __tablename__ = "agents"
    id: str = Field(sa_column=Column(String, primary_key=True))
    era: Optional[str] = Field(default=None, sa_column=Column(String))  # file | db | needs-migration | empty
    first_seen: float = Field(sa_column=Column(Float, nullable=False))
    last_seen: float = Field(sa_column=Column(Float, nullable=False))


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("agent_id", "session_id", name="uq_sessions_agent_session"),
        Index("ix_sessions_agent_key", "agent_id", "session_key"),
    )
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    agent_id: str = Field(sa_column=Column(String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False))
    session_key: Optional[str] = Field(default=None, sa_column=Column(String))
    session_id: str = Field(sa_column=Column(String, nullable=False))
    path: Optional[str] = Field(default=None, sa_column=Column(Text))
    first_seen: float = Field(sa_column=Column(Float, nullable=False))
    last_seen: float = Field(sa_column=Column(Float, nullable=False))
    archived_at: Optional[float] = Field(default=None, sa_column=Column(Float))
    archive_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    archive_size: Optional[int] = Field(default=None, sa_column=Column(Integer))  # 0003
    archive_sha256: Optional[str] = Field(default=None, sa_column=Column(String))
    archive_sha256_source: Optional[str] = Field(default=None, sa_column=Column(String))  # creation | first-check


class Observation(SQLModel, table=True):
    """One row per session per scan in which something changed."""

    __tablename__ = "observations"
    __table_args__ = (Index("ix_observations_session_ts", "session_pk", "ts"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    session_pk: int = _fk("sessions.id")
    ts: float = Field(sa_column=Column(Float, nullable=False))
    compaction_count: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    context_tokens: Optional[int] = Field(default=None, sa_column=Column(Integer))
    tokens_source: Optional[str] = Field(default=None, sa_column=Column(String))  # usage | estimate
    context_window: Optional[int] = Field(default=None, sa_column=Column(Integer))
    size: Optional[int] = Field(default=None, sa_column=Column(Integer))
    entry_count: Optional[int] = Field(default=None, sa_column=Column(Integer))
    last_activity: Optional[float] = Field(default=None, sa_column=Column(Float))


class Action(SQLModel, table=True):
    __tablename__ = "actions"
    __table_args__ = (
        Index("ix_actions_ts", "ts"),
        Index("ix_actions_agent_kind_ts", "agent_id", "kind", "ts"),
        Index("ix_actions_session", "session_id"),
    )
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    ts: float = Field(sa_column=Column(Float, nullable=False))
    kind: str = Field(sa_column=Column(String, nullable=False))  # edit clone restore rotate archive strip ...
    agent_id: Optional[str] = Field(default=None, sa_column=Column(String))
    session_id: Optional[str] = Field(default=None, sa_column=Column(String))
    session_key: Optional[str] = Field(default=None, sa_column=Column(String))
    trigger: str = Field(sa_column=Column(String, nullable=False, server_default="manual"))  # manual | auto
    policy: Optional[str] = Field(default=None, sa_column=Column(String))
    reason: Optional[str] = Field(default=None, sa_column=Column(Text))
    dry_run: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    before_json: Optional[str] = Field(default=None, sa_column=Column(Text))
    after_json: Optional[str] = Field(default=None, sa_column=Column(Text))
    backup_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    outcome: str = Field(sa_column=Column(String, nullable=False))  # ok | failed | skipped | deferred
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    duration_ms: Optional[float] = Field(default=None, sa_column=Column(Float))


class Backup(SQLModel, table=True):
    __tablename__ = "backups"
    __table_args__ = (Index("ix_backups_session", "agent_id", "session_id"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    agent_id: Optional[str] = Field(default=None, sa_column=Column(String))
    session_id: Optional[str] = Field(default=None, sa_column=Column(String))
    path: str = Field(sa_column=Column(Text, nullable=False, unique=True))
    size: Optional[int] = Field(default=None, sa_column=Column(Integer))
    created: float = Field(sa_column=Column(Float, nullable=False))
    pruned_at: Optional[float] = Field(default=None, sa_column=Column(Float))
    action_id: Optional[int] = _fk("actions.id", ondelete="SET NULL", nullable=True)
    sha256: Optional[str] = Field(default=None, sa_column=Column(String))  # 0003
    sha256_source: Optional[str] = Field(default=None, sa_column=Column(String))  # creation | first-check


class BreakerRow(SQLModel, table=True):
    __tablename__ = "breakers"
    agent_id: str = Field(sa_column=Column(String, primary_key=True))
    kind: str = Field(sa_column=Column(String, primary_key=True))
    state: str = Field(sa_column=Column(String, nullable=False, server_default="closed"))  # closed|open|half_open
    opened_at: Optional[float] = Field(default=None, sa_column=Column(Float))
    failures: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    cooloff_minutes: Optional[float] = Field(default=None, sa_column=Column(Float))
    trial_started_at: Optional[float] = Field(default=None, sa_column=Column(Float))
    reason: Optional[str] = Field(default=None, sa_column=Column(Text))
    updated_at: float = Field(sa_column=Column(Float, nullable=False))


class BreakerTransition(SQLModel, table=True):
    __tablename__ = "breaker_transitions"
    __table_args__ = (Index("ix_breaker_transitions_agent_ts", "agent_id", "ts"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    ts: float = Field(sa_column=Column(Float, nullable=False))
    agent_id: str = Field(sa_column=Column(String, nullable=False))
    kind: str = Field(sa_column=Column(String, nullable=False))
    from_state: str = Field(sa_column=Column(String, nullable=False))
    to_state: str = Field(sa_column=Column(String, nullable=False))
    reason: Optional[str] = Field(default=None, sa_column=Column(Text))


class ScanRun(SQLModel, table=True):
    __tablename__ = "scan_runs"
    __table_args__ = (Index("ix_scan_runs_started", "started"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    started: float = Field(sa_column=Column(Float, nullable=False))
    duration_s: float = Field(sa_column=Column(Float, nullable=False))
    agents: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    sessions_seen: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    sessions_changed: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    bytes_read: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    errors: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    error_text: Optional[str] = Field(default=None, sa_column=Column(Text))


class DaemonRun(SQLModel, table=True):
    __tablename__ = "daemon_runs"
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    pid: int = Field(sa_column=Column(Integer, nullable=False))
    host: Optional[str] = Field(default=None, sa_column=Column(String))
    version: Optional[str] = Field(default=None, sa_column=Column(String))
    mode: Optional[str] = Field(default=None, sa_column=Column(String))
    started: float = Field(sa_column=Column(Float, nullable=False))
    heartbeat: float = Field(sa_column=Column(Float, nullable=False))
    last_cycle: Optional[float] = Field(default=None, sa_column=Column(Float))
    next_scan: Optional[float] = Field(default=None, sa_column=Column(Float))
    stopped: Optional[float] = Field(default=None, sa_column=Column(Float))
    exit_reason: Optional[str] = Field(default=None, sa_column=Column(Text))


# ---- added by migration 0002 (rotation, relevance, LLM spend) ----


class Rotation(SQLModel, table=True):
    __tablename__ = "rotations"
    __table_args__ = (Index("ix_rotations_agent_key_started", "agent_id", "session_key", "started"),
                      Index("ix_rotations_state", "state"))
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    agent_id: str = Field(sa_column=Column(String, nullable=False))
    session_key: str = Field(sa_column=Column(String, nullable=False))
    era: Optional[str] = Field(default=None, sa_column=Column(String))
    trigger: str = Field(sa_column=Column(String, nullable=False, server_default="auto"))
    reason: Optional[str] = Field(default=None, sa_column=Column(Text))
    old_session_id: Optional[str] = Field(default=None, sa_column=Column(String))
    new_session_id: Optional[str] = Field(default=None, sa_column=Column(String))
    old_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    new_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    archive_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    state: str = Field(sa_column=Column(String, nullable=False))  # IDLE PENDING ARCHIVING ARCHIVED INJECTED COOLDOWN
    seed_budget_percent: Optional[float] = Field(default=None, sa_column=Column(Float))
    seed_tokens: Optional[int] = Field(default=None, sa_column=Column(Integer))
    compactions_before: Optional[int] = Field(default=None, sa_column=Column(Integer))
    health: Optional[str] = Field(default=None, sa_column=Column(String))  # healthy | unhealthy | None (unknown)
    details_json: Optional[str] = Field(default=None, sa_column=Column(Text))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    started: float = Field(sa_column=Column(Float, nullable=False))
    updated: float = Field(sa_column=Column(Float, nullable=False))
    finished: Optional[float] = Field(default=None, sa_column=Column(Float))


class RotationTransition(SQLModel, table=True):
    __tablename__ = "rotation_transitions"
    __table_args__ = (Index("ix_rotation_transitions_rotation", "rotation_id", "ts"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    rotation_id: int = _fk("rotations.id")
    ts: float = Field(sa_column=Column(Float, nullable=False))
    from_state: Optional[str] = Field(default=None, sa_column=Column(String))
    to_state: str = Field(sa_column=Column(String, nullable=False))
    note: Optional[str] = Field(default=None, sa_column=Column(Text))


class RelevanceScore(SQLModel, table=True):
    __tablename__ = "relevance_scores"
    session_id: str = Field(sa_column=Column(String, primary_key=True))
    fingerprint: str = Field(sa_column=Column(String, primary_key=True))  # session state (size, mtime, ...)
    task_hash: str = Field(sa_column=Column(String, primary_key=True))
    score: float = Field(sa_column=Column(Float, nullable=False))
    method: str = Field(sa_column=Column(String, nullable=False))  # model | keywords
    model: Optional[str] = Field(default=None, sa_column=Column(String))
    reason: Optional[str] = Field(default=None, sa_column=Column(Text))
    ts: float = Field(sa_column=Column(Float, nullable=False))


class LLMCall(SQLModel, table=True):
    __tablename__ = "llm_calls"
    __table_args__ = (Index("ix_llm_calls_ts", "ts"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    ts: float = Field(sa_column=Column(Float, nullable=False))
    model: str = Field(sa_column=Column(String, nullable=False))
    purpose: Optional[str] = Field(default=None, sa_column=Column(String))
    prompt_tokens: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    completion_tokens: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    cost_usd: float = Field(sa_column=Column(Float, nullable=False, server_default="0"))
    outcome: str = Field(sa_column=Column(String, nullable=False))  # ok | timeout | error | bad_json | budget
    duration_ms: Optional[float] = Field(default=None, sa_column=Column(Float))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))


# ---- added by migration 0003 (occd check; verifying what occd did) ----


class Problem(SQLModel, table=True):
    """Something a check found (a damaged backup, a rotation that changed nothing, turns that bypassed the lean
    view). Open while resolved_at is NULL: until a later check passes (resolution 'passed') or the user accepts
    the loss (`occd check --forget`, resolution 'forgotten', code FORGOTTEN keeps the path out of later checks)."""

    __tablename__ = "problems"
    __table_args__ = (Index("ix_problems_open", "resolved_at", "source"), Index("ix_problems_subject", "subject", "code"))
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    source: str = Field(sa_column=Column(String, nullable=False))  # check | check-data | rotation | strip | lean
    subject: str = Field(sa_column=Column(String, nullable=False))  # backup:12 | archive:34 | ledger | ...
    code: str = Field(sa_column=Column(String, nullable=False))
    severity: str = Field(sa_column=Column(String, nullable=False, server_default="fail"))  # fail | warn
    agent_id: Optional[str] = Field(default=None, sa_column=Column(String))
    session_id: Optional[str] = Field(default=None, sa_column=Column(String))
    path: Optional[str] = Field(default=None, sa_column=Column(Text))
    message: str = Field(sa_column=Column(Text, nullable=False))
    hint: Optional[str] = Field(default=None, sa_column=Column(Text))
    details_json: Optional[str] = Field(default=None, sa_column=Column(Text))
    first_seen: float = Field(sa_column=Column(Float, nullable=False))
    last_seen: float = Field(sa_column=Column(Float, nullable=False))
    resolved_at: Optional[float] = Field(default=None, sa_column=Column(Float))
    resolution: Optional[str] = Field(default=None, sa_column=Column(String))  # passed | forgotten


class CheckRun(SQLModel, table=True):
    __tablename__ = "check_runs"
    __table_args__ = (Index("ix_check_runs_started", "started"),)
    id: Optional[int] = Field(default=None, sa_column=Column(Integer, primary_key=True))
    started: float = Field(sa_column=Column(Float, nullable=False))
    finished: float = Field(sa_column=Column(Float, nullable=False))
    read_data: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    trigger: str = Field(sa_column=Column(String, nullable=False, server_default="manual"))
    artifacts: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    bytes_read: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    problems: int = Field(sa_column=Column(Integer, nullable=False, server_default="0"))
    summary_json: Optional[str] = Field(default=None, sa_column=Column(Text))


metadata = SQLModel.metadata
