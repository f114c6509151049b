"""Postgres URLs and engines: one place for the driver rule and the pool settings every process uses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import make_url


def psycopg2_url(url: str) -> str:
    """Normalise a Postgres URL to the psycopg2 driver (dagster-postgres cannot use psycopg 3)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed.render_as_string(hide_password=False)


@dataclass(frozen=True)
class Pool:
    """Connection pool of one kind of user; None sizes mean no pool (a connection per use, closed after)."""

    size: int | None
    max_overflow: int = 0
    # Waiting for a pooled connection, and for Postgres to accept one: short where a caller must answer quickly.
    timeout_seconds: float = 30.0
    connect_timeout_seconds: int | None = None
    # Longest statement a connection may run (Postgres `statement_timeout`); None: no limit.
    statement_timeout_ms: int | None = None


# Every engine of the project, by who uses it. Sizes follow the threads that share the engine.
POOLS = {
    # A run worker's race database: the threadpool executor runs up to 8 steps, most of them HTTP-bound.
    "run": Pool(size=5, max_overflow=5),
    # Sensor ticks in a code server (a few threads, short queries).
    "sensor": Pool(size=2, max_overflow=2),
    # The maintenance registry in a code server (dispatcher ticks, run-status sensors).
    "registry": Pool(size=2, max_overflow=4),
    # The control API's registry engine, sized for its thread pool; short timeouts keep /health answering when
    # Postgres is gone.
    "api": Pool(size=5, max_overflow=15, timeout_seconds=10, connect_timeout_seconds=3),
    # The control API's reads of Dagster's storage tables (/executions, /stats, /health, /schedulers, /metrics): the
    # registry's sizes, and the 10 s statement limit dagster-webserver sets on its own storage connections.
    "api_dagster": Pool(size=5, max_overflow=15, timeout_seconds=10, connect_timeout_seconds=3,
                        statement_timeout_ms=10_000),
    # The control API's race-database reads for /metrics (one scrape at a time).
    "api_metrics": Pool(size=1, max_overflow=2, connect_timeout_seconds=3),
    # Migrations and one-off commands: nothing kept open afterwards.
    "oneshot": Pool(size=None),
    # The local stack's watch on Dagster's Postgres (local_stack/code_server_watch.py): a new connection per 2 s
    # check, so a restarted Postgres is seen, and a check that gives up within its interval.
    "watch": Pool(size=None, connect_timeout_seconds=2),
}


def create_engine(url: str, use: str) -> sa.Engine:
    """The engine for `url` with the pool of `use` (a key of POOLS), always on psycopg2, connections pre-pinged."""
    pool = POOLS[use]
    connect_args: dict[str, object] = {"connect_timeout": pool.connect_timeout_seconds} \
        if pool.connect_timeout_seconds else {}
    if pool.statement_timeout_ms:
        connect_args["options"] = f"-c statement_timeout={pool.statement_timeout_ms}"
    if pool.size is None:
        return sa.create_engine(psycopg2_url(url), poolclass=sa.pool.NullPool, connect_args=connect_args)
    return sa.create_engine(
        psycopg2_url(url),
        pool_pre_ping=True,
        pool_size=pool.size,
        max_overflow=pool.max_overflow,
        pool_timeout=pool.timeout_seconds,
        connect_args=connect_args,
    )


def alembic_revision(conn: sa.Connection, version_table: str) -> str | None:
    """The revision an Alembic-managed schema is at, read from its version table with plain SQL (no Alembic loaded);
    None when no migration has run (no table) or all were undone (an empty one)."""
    if conn.execute(sa.text("SELECT to_regclass(:table)"), {"table": version_table}).scalar() is None:
        return None
    return conn.execute(sa.text(f"SELECT version_num FROM {version_table}")).scalar()


def vacuum_tables(connect, tables: Sequence[str]) -> bool:
    """VACUUM (ANALYZE) `tables` on a connection from `connect()` (a storage's public connection method), in
    autocommit: VACUUM cannot run inside a transaction. False (nothing done) when the database is not Postgres."""
    with connect() as conn:
        if conn.dialect.name != "postgresql":
            return False
        if conn.in_transaction():  # a pooled connection may come with one begun; VACUUM needs none
            conn.commit()
        autocommit = conn.execution_options(isolation_level="AUTOCOMMIT")
        for table in tables:
            autocommit.exec_driver_sql(f'VACUUM (ANALYZE) "{table}"')
    return True
