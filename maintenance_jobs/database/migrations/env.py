"""Alembic environment: runs on the connection `maintenance_jobs.database.migrate` hands over (no logging config)."""

from __future__ import annotations

from alembic import context

from maintenance_jobs.database.migrate import VERSION_TABLE
from maintenance_jobs.database.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through maintenance_jobs.database.migrate.upgrade(url)")

context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
