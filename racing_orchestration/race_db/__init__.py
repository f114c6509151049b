"""The race database: SQLAlchemy Core tables, Alembic migrations, idempotent stores and the Dagster resource."""

from __future__ import annotations

from racing_orchestration.race_db.migrations import (
    SchemaBehindError,
    assert_schema_current,
    current_revision,
    head_revision,
    upgrade,
)

__all__ = ["SchemaBehindError", "assert_schema_current", "current_revision", "head_revision", "upgrade"]
