"""Race database tables (SQLAlchemy Core). Alembic migrations in `migrations/versions/` must match this module."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

# Constraint names are stable so later migrations can refer to them.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _tz() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _updated_at() -> sa.Column:
    return sa.Column("updated_at", _tz(), nullable=False, server_default=sa.func.now())


meetings = sa.Table(
    "meetings",
    metadata,
    sa.Column("meeting_id", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("meeting_date", sa.Date, nullable=False),  # the meeting's local date, as TAB gives it
    sa.Column("category", sa.Text, nullable=False),  # T / H / G
    sa.Column("category_name", sa.Text),
    sa.Column("country", sa.Text, nullable=False),
    sa.Column("state", sa.Text),
    sa.Column("track_condition", sa.Text),
    _updated_at(),
    sa.Index(None, "meeting_date"),
)

races = sa.Table(
    "races",
    metadata,
    sa.Column("race_id", sa.Text, primary_key=True),
    sa.Column("meeting_id", sa.Text, sa.ForeignKey("meetings.meeting_id"), nullable=False),
    sa.Column("race_number", sa.Integer, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("start_time", _tz(), nullable=False),  # latest known advertised start (UTC)
    sa.Column("status", sa.Text, nullable=False),  # kept as TAB gives it; compare case-insensitively
    sa.Column("distance", sa.Integer),
    sa.Column("track_condition", sa.Text),
    sa.Column("weather", sa.Text),
    sa.Column("country", sa.Text),
    sa.Column("actual_start", _tz()),
    # Set when a re-scrape moves the start time, so sensors and operators can see delays.
    sa.Column("previous_start_time", _tz()),
    sa.Column("start_time_changed_at", _tz()),
    _updated_at(),
    sa.Index(None, "start_time"),
    sa.Index(None, "status", "start_time"),
    sa.Index(None, "meeting_id"),
)

runners = sa.Table(
    "runners",
    metadata,
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("runner_number", sa.Integer, primary_key=True),
    sa.Column("entrant_id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("barrier", sa.Integer),
    sa.Column("jockey", sa.Text),
    sa.Column("trainer_name", sa.Text),
    sa.Column("is_scratched", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("is_late_scratched", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("scratch_time", _tz()),
    _updated_at(),
)

odds_snapshots = sa.Table(
    "odds_snapshots",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), nullable=False),
    sa.Column("runner_number", sa.Integer, nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=False),  # 't60', 't15', ...
    sa.Column("fixed_win", sa.Float),
    sa.Column("fixed_place", sa.Float),
    sa.Column("pool_win", sa.Float),
    sa.Column("pool_place", sa.Float),
    sa.Column("is_scratched", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("captured_at", _tz(), nullable=False),
    sa.Column("run_id", sa.Text),
    # Re-taking a checkpoint replaces its row instead of adding another.
    sa.UniqueConstraint("race_id", "runner_number", "checkpoint"),
    sa.Index(None, "checkpoint", "captured_at"),
)

results = sa.Table(
    "results",
    metadata,
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("runner_number", sa.Integer, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("name", sa.Text),
    sa.Column("entrant_id", sa.Text),
    sa.Column("margin_length", sa.Float),
    sa.Column("is_provisional", sa.Boolean, nullable=False),
    _updated_at(),
)

dividends = sa.Table(
    "dividends",
    metadata,
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("dividend_id", sa.Text, primary_key=True),  # TAB's id: Interim and Final rows have different ids
    sa.Column("product_name", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),  # 'Interim' | 'Final', as TAB gives it
    sa.Column("dividend", sa.Float),
    sa.Column("pool_size", sa.Float),
    sa.Column("positions", JSONB, nullable=False),  # [[runner_number, position], ...]
    sa.Column("description", sa.Text),
    sa.Column("tote", sa.Text),
    _updated_at(),
    sa.Index(None, "race_id", "status"),
)

scrapes = sa.Table(
    "scrapes",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    # A digest of (endpoint, params, started_at, attempts): re-recording the same call is a no-op.
    sa.Column("call_key", sa.Text, nullable=False, unique=True),
    sa.Column("endpoint", sa.Text, nullable=False),
    sa.Column("params", JSONB, nullable=False),
    sa.Column("outcome", sa.Text, nullable=False),  # ok | empty | error
    sa.Column("status_code", sa.Integer),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("items", sa.Integer, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("started_at", _tz(), nullable=False),
    sa.Column("run_id", sa.Text),  # the Dagster run that made the call (the old Scrape -> JobRun link)
    sa.Column("recorded_at", _tz(), nullable=False, server_default=sa.func.now()),
    sa.Index(None, "started_at"),
    sa.Index(None, "run_id"),
)

race_checkpoints = sa.Table(
    "race_checkpoints",
    metadata,
    # Ledger of checkpoint runs: "exactly one run per race per checkpoint" survives Dagster run deletion.
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("checkpoint", sa.Text, primary_key=True),
    sa.Column("scheduled_for", _tz(), nullable=False),
    sa.Column("requested_at", _tz(), nullable=False, server_default=sa.func.now()),
    sa.Column("run_id", sa.Text),
    sa.Column("state", sa.Text, nullable=False, server_default="requested"),
    sa.Column("note", sa.Text),
    _updated_at(),
    # Post-race chain: attempt n ran; while not Final the sensor requests n+1 once next_attempt_at has passed.
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", _tz()),
    sa.Column("previous_run_id", sa.Text),  # the run of attempt n-1, so the audit trail shows the chain
    # Re-requests of this attempt after its run failed / was canceled / never came (bounded), and the latest run key.
    sa.Column("relaunches", sa.Integer, nullable=False, server_default="0"),
    sa.Column("run_key", sa.Text),
    sa.Column("checked_at", _tz()),  # when the sensor last looked whether a run took the row
    sa.Index(None, "state", "next_attempt_at"),
)

market_movers = sa.Table(
    "market_movers",
    metadata,
    sa.Column("race_id", sa.Text, sa.ForeignKey("races.race_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("runner_number", sa.Integer, primary_key=True),
    sa.Column("meeting_date", sa.Date, nullable=False),
    sa.Column("win_t60", sa.Float),
    sa.Column("win_t15", sa.Float),
    sa.Column("finish_position", sa.Integer),
    sa.Column("move_pct", sa.Float),
    sa.Column("computed_at", _tz(), nullable=False),
    sa.Index(None, "meeting_date"),
)
