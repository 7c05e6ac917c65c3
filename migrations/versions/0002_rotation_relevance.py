"""Rotation state machine, relevance score cache, LLM spend; where an archived session went.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # SQLite cannot alter tables in place for everything; batch mode copies the table, keeping its rows.
    with op.batch_alter_table("sessions") as batch_op:
        batch_op.add_column(sa.Column("archive_path", sa.Text(), nullable=True))
    op.create_table(
        "rotations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("era", sa.String(), nullable=True),
        sa.Column("trigger", sa.String(), server_default="auto", nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("old_session_id", sa.String(), nullable=True),
        sa.Column("new_session_id", sa.String(), nullable=True),
        sa.Column("old_path", sa.Text(), nullable=True),
        sa.Column("new_path", sa.Text(), nullable=True),
        sa.Column("archive_path", sa.Text(), nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("seed_budget_percent", sa.Float(), nullable=True),
        sa.Column("seed_tokens", sa.Integer(), nullable=True),
        sa.Column("compactions_before", sa.Integer(), nullable=True),
        sa.Column("health", sa.String(), nullable=True),
        sa.Column("details_json", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("updated", sa.Float(), nullable=False),
        sa.Column("finished", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rotations_agent_key_started", "rotations", ["agent_id", "session_key", "started"], unique=False)
    op.create_index("ix_rotations_state", "rotations", ["state"], unique=False)
    op.create_table(
        "rotation_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rotation_id", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=True),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["rotation_id"], ["rotations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rotation_transitions_rotation", "rotation_transitions", ["rotation_id", "ts"], unique=False)
    op.create_table(
        "relevance_scores",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("task_hash", sa.String(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "fingerprint", "task_hash"),
    )
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("purpose", sa.String(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("completion_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_llm_calls_ts", "llm_calls", ["ts"], unique=False)


def downgrade() -> None:
    for name in ["llm_calls", "relevance_scores", "rotation_transitions", "rotations"]:
        op.drop_table(name)
    with op.batch_alter_table("sessions") as batch_op:
        batch_op.drop_column("archive_path")
