"""Programmatic Alembic: `upgrade(url)` brings the registry schema to the newest revision."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from orchestration_core.postgres import create_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Our own version table: the registry may share a database with other Alembic-managed schemas.
VERSION_TABLE = "maintenance_alembic_version"
# Two processes starting at once (code server, CLI) must not both run the DDL.
_MIGRATION_LOCK_ID = 0x6D61696E74


def alembic_config(connection: sa.Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply the registry migrations up to `revision`, under an advisory lock."""
    engine = create_engine(database_url, "oneshot")
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
            command.upgrade(alembic_config(connection), revision)
    finally:
        engine.dispose()


def current_revision(database_url: str) -> str | None:
    """The applied revision, or None on an empty database."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(database_url, "oneshot")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()
    finally:
        engine.dispose()
