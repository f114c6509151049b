"""The execution history (`task_executions`), the dispatcher's skipped minutes, and the task row's retry count.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("scheduled_tasks", sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "task_executions",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("run_id", sa.String(255), nullable=False, unique=True),
        sa.Column("task_id", sa.Integer),
        sa.Column("task_name", sa.String(255), nullable=False),
        sa.Column("service", sa.String(255)),
        sa.Column("executor", sa.String(255)),
        sa.Column("priority", sa.Integer),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("triggered_by", sa.String(20)),
        sa.Column("triggered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("completed_at", sa.DateTime(timezone=True)),
        sa.Column("duration_seconds", sa.Float),
        sa.Column("output", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("scheduled_for", sa.DateTime(timezone=True)),
        sa.Column("parent_run_id", sa.String(255)),
        sa.Column("job_name", sa.String(255), nullable=False),
        sa.Column("dagster_status", sa.String(20), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    # /executions pages newest first by (triggered_at, run_id), unfiltered or by one of task, service or status;
    # the per-task history reads a task's runs in a time range. Backward index scans serve the descending order.
    op.create_index("ix_task_executions_key", "task_executions", ["triggered_at", "run_id"])
    op.create_index("ix_task_executions_task_key", "task_executions", ["task_name", "triggered_at", "run_id"])
    op.create_index("ix_task_executions_service_key", "task_executions", ["service", "triggered_at", "run_id"])
    op.create_index("ix_task_executions_status_key", "task_executions", ["status", "triggered_at", "run_id"])
    op.create_table(
        "dispatch_skips",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("skipped_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("skipped_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("skipped_from", "skipped_until", name="uq_dispatch_skips_range"),
    )
    op.create_index("ix_dispatch_skips_until", "dispatch_skips", ["skipped_until"])


def downgrade() -> None:
    op.drop_index("ix_dispatch_skips_until", table_name="dispatch_skips")
    op.drop_table("dispatch_skips")
    for name in ("ix_task_executions_status_key", "ix_task_executions_service_key", "ix_task_executions_task_key",
                 "ix_task_executions_key"):
        op.drop_index(name, table_name="task_executions")
    op.drop_table("task_executions")
    op.drop_column("scheduled_tasks", "retry_count")
