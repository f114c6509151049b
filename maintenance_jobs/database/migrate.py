"""Programmatic Alembic: `upgrade(url)` brings the registry schema to the newest revision.

Alembic is imported only when a migration has to run: a process whose registry is already at the newest revision
(the control API in compose and Kubernetes, started after the migrate service or Job) never loads it, ~10 MiB of
every API worker's memory. `HEAD_REVISION` names that revision for the check; a test fails when a new migration
does not move it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from orchestration_core.postgres import alembic_revision, create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Our own version table: the registry may share a database with other Alembic-managed schemas.
VERSION_TABLE = "maintenance_alembic_version"
# Two processes starting at once (code server, CLI) must not both run the DDL.
_MIGRATION_LOCK_ID = 0x6D61696E74


# The newest migration's revision (migrations/versions/): a registry there needs no Alembic.
HEAD_REVISION = "0002"


def applied_revision(connection: sa.Connection) -> str | None:
    """The revision the registry is at; None when no migration has run."""
    return alembic_revision(connection, VERSION_TABLE)


def alembic_config(connection: sa.Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply the registry migrations up to `revision`, under an advisory lock; a registry already at the newest
    revision is left alone without loading Alembic (a schema never goes back by itself)."""
    engine = create_engine(database_url, "oneshot")
    try:
        if revision == "head":
            with engine.connect() as connection:
                if applied_revision(connection) == HEAD_REVISION:
                    return
        from alembic import command

        with engine.begin() as connection:
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
            command.upgrade(alembic_config(connection), revision)
    finally:
        engine.dispose()


def current_revision(database_url: str) -> str | None:
    """The applied revision, or None on an empty database."""
    engine = create_engine(database_url, "oneshot")
    try:
        with engine.connect() as connection:
            return applied_revision(connection)
    finally:
        engine.dispose()
