"""SQLAlchemy Core tables of the task registry (the migrations in `migrations/` create them)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from orchestration_core.audit.execution_history import DISPATCH_SKIPS_TABLE, EXECUTION_HISTORY_TABLE

metadata = sa.MetaData()

scheduled_tasks = sa.Table(
    "scheduled_tasks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("task_name", sa.String(200), nullable=False, unique=True),
    sa.Column("service", sa.String(100), nullable=False),
    sa.Column("executor", sa.String(100), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, server_default="50"),
    sa.Column("minute", sa.Integer, nullable=False, server_default="-1"),
    sa.Column("hour", sa.Integer, nullable=False, server_default="-1"),
    sa.Column("day_of_month", sa.Integer, nullable=False, server_default="-1"),
    sa.Column("month", sa.Integer, nullable=False, server_default="-1"),
    sa.Column("day_of_week", sa.Integer, nullable=False, server_default="-1"),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("config", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("timeout_seconds", sa.Integer, nullable=False, server_default="3600"),
    sa.Column("max_retries", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_run", sa.DateTime(timezone=True)),
    sa.Column("last_status", sa.String(20)),
    sa.Column("last_duration_seconds", sa.Float),
    # Dagster's retry number of the run last_status comes from (0: its first attempt).
    sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Column("created_by", sa.String(100), nullable=False, server_default="system"),
    # The database guards the ranges too, so a hand-written INSERT cannot store a row the dispatcher misreads.
    sa.CheckConstraint("priority BETWEEN 1 AND 100", name="ck_scheduled_tasks_priority"),
    sa.CheckConstraint("minute BETWEEN -1 AND 59", name="ck_scheduled_tasks_minute"),
    sa.CheckConstraint("hour BETWEEN -1 AND 23", name="ck_scheduled_tasks_hour"),
    sa.CheckConstraint("day_of_month = -1 OR day_of_month BETWEEN 1 AND 31", name="ck_scheduled_tasks_day_of_month"),
    sa.CheckConstraint("month = -1 OR month BETWEEN 1 AND 12", name="ck_scheduled_tasks_month"),
    sa.CheckConstraint("day_of_week BETWEEN -1 AND 6", name="ck_scheduled_tasks_day_of_week"),
    sa.CheckConstraint("timeout_seconds > 0", name="ck_scheduled_tasks_timeout"),
    sa.CheckConstraint("max_retries >= 0", name="ck_scheduled_tasks_max_retries"),
)

# Facts about the registry itself, e.g. when it was seeded (so deleted seed tasks stay deleted).
registry_meta = sa.Table(
    "maintenance_registry_meta",
    metadata,
    sa.Column("key", sa.String(100), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
)

# One row per ended maintenance run, written once when it ends (the old scheduler's `task_executions`): what outlives
# Dagster's run retention. `id` is derived from the run id (execution_history.summary.execution_id), so a run has the
# same id while it is live in /executions and once recorded; `task_id` is the task's id when the run ended.
task_executions = sa.Table(
    EXECUTION_HISTORY_TABLE,
    metadata,
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

# Minutes the dispatcher skipped, [skipped_from, skipped_until) in real (UTC) minutes, and why: what the per-task
# history shows for an expected run that never launched.
dispatch_skips = sa.Table(
    DISPATCH_SKIPS_TABLE,
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("skipped_from", sa.DateTime(timezone=True), nullable=False),
    sa.Column("skipped_until", sa.DateTime(timezone=True), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.UniqueConstraint("skipped_from", "skipped_until", name="uq_dispatch_skips_range"),
)
