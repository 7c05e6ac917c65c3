"""Initial ledger schema: agents, sessions, observations, actions, backups, breakers, scan and daemon runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("era", sa.String(), nullable=True),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=True),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("archived_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("agent_id", "session_id", name="uq_sessions_agent_session"),
    )
    op.create_index("ix_sessions_agent_key", "sessions", ["agent_id", "session_key"], unique=False)
    op.create_table(
        "observations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_pk", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("compaction_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("context_tokens", sa.Integer(), nullable=True),
        sa.Column("tokens_source", sa.String(), nullable=True),
        sa.Column("context_window", sa.Integer(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=True),
        sa.Column("entry_count", sa.Integer(), nullable=True),
        sa.Column("last_activity", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["session_pk"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_observations_session_ts", "observations", ["session_pk", "ts"], unique=False)
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=True),
        sa.Column("session_id", sa.String(), nullable=True),
        sa.Column("session_key", sa.String(), nullable=True),
        sa.Column("trigger", sa.String(), server_default="manual", nullable=False),
        sa.Column("policy", sa.String(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("dry_run", sa.Integer(), server_default="0", nullable=False),
        sa.Column("before_json", sa.Text(), nullable=True),
        sa.Column("after_json", sa.Text(), nullable=True),
        sa.Column("backup_path", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_actions_ts", "actions", ["ts"], unique=False)
    op.create_index("ix_actions_agent_kind_ts", "actions", ["agent_id", "kind", "ts"], unique=False)
    op.create_index("ix_actions_session", "actions", ["session_id"], unique=False)
    op.create_table(
        "backups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=True),
        sa.Column("session_id", sa.String(), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=True),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("pruned_at", sa.Float(), nullable=True),
        sa.Column("action_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["action_id"], ["actions.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("path"),
    )
    op.create_index("ix_backups_session", "backups", ["agent_id", "session_id"], unique=False)
    op.create_table(
        "breakers",
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("state", sa.String(), server_default="closed", nullable=False),
        sa.Column("opened_at", sa.Float(), nullable=True),
        sa.Column("failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cooloff_minutes", sa.Float(), nullable=True),
        sa.Column("trial_started_at", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "kind"),
    )
    op.create_table(
        "breaker_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=False),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_breaker_transitions_agent_ts", "breaker_transitions", ["agent_id", "ts"], unique=False)
    op.create_table(
        "scan_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("agents", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sessions_seen", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sessions_changed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("bytes_read", sa.Integer(), server_default="0", nullable=False),
        sa.Column("errors", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error_text", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_scan_runs_started", "scan_runs", ["started"], unique=False)
    op.create_table(
        "daemon_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(), nullable=True),
        sa.Column("version", sa.String(), nullable=True),
        sa.Column("mode", sa.String(), nullable=True),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("heartbeat", sa.Float(), nullable=False),
        sa.Column("last_cycle", sa.Float(), nullable=True),
        sa.Column("next_scan", sa.Float(), nullable=True),
        sa.Column("stopped", sa.Float(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    for name in ["daemon_runs", "scan_runs", "breaker_transitions", "breakers", "backups", "actions",
                 "observations", "sessions", "agents"]:
        op.drop_table(name)
