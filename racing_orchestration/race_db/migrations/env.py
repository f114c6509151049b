"""Alembic environment for the race database.

Run programmatically by `racing_orchestration.race_db.migrations` (no alembic.ini). There is deliberately no
`fileConfig` call: Alembic must not replace the application's logging configuration.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from orchestration_core.postgres import create_engine
from racing_orchestration.race_db.schema import metadata

config = context.config


def _run(connection: sa.Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # The caller may hand over an open connection (tests, `upgrade(url)`); otherwise connect to the configured URL.
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), "oneshot")
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
