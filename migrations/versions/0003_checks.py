"""`occd check`: the size and sha256 of each backup and archive recorded when occd made it; the problems a
check (or a verification of what occd did) found, open until a later check passes or the user forgets the
artifact; one row per check run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # rows made before this migration have no hash: the first check records it (sha256_source 'first-check')
    with op.batch_alter_table("backups") as batch_op:
        batch_op.add_column(sa.Column("sha256", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("sha256_source", sa.String(), nullable=True))
    with op.batch_alter_table("sessions") as batch_op:
        batch_op.add_column(sa.Column("archive_size", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("archive_sha256", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("archive_sha256_source", sa.String(), nullable=True))
    op.create_table(
        "problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("code", sa.String(), nullable=False),
        sa.Column("severity", sa.String(), server_default="fail", nullable=False),
        sa.Column("agent_id", sa.String(), nullable=True),
        sa.Column("session_id", sa.String(), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("hint", sa.Text(), nullable=True),
        sa.Column("details_json", sa.Text(), nullable=True),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("resolved_at", sa.Float(), nullable=True),
        sa.Column("resolution", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_problems_open", "problems", ["resolved_at", "source"], unique=False)
    op.create_index("ix_problems_subject", "problems", ["subject", "code"], unique=False)
    op.create_table(
        "check_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("finished", sa.Float(), nullable=False),
        sa.Column("read_data", sa.Integer(), server_default="0", nullable=False),
        sa.Column("trigger", sa.String(), server_default="manual", nullable=False),
        sa.Column("artifacts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("bytes_read", sa.Integer(), server_default="0", nullable=False),
        sa.Column("problems", sa.Integer(), server_default="0", nullable=False),
        sa.Column("summary_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_check_runs_started", "check_runs", ["started"], unique=False)


def downgrade() -> None:
    op.drop_table("check_runs")
    op.drop_table("problems")
    with op.batch_alter_table("sessions") as batch_op:
        batch_op.drop_column("archive_sha256_source")
        batch_op.drop_column("archive_sha256")
        batch_op.drop_column("archive_size")
    with op.batch_alter_table("backups") as batch_op:
        batch_op.drop_column("sha256_source")
        batch_op.drop_column("sha256")
