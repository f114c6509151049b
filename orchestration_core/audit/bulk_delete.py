"""Deleting runs in bulk: set-based SQL on SQL storages, `instance.delete_run` everywhere else.

`DagsterInstance.delete_run` costs several round trips (and, on Postgres with its NullPool, several new connections) per
run. For SQL storages whose event log is not sharded per run (Postgres, MySQL, consolidated SQLite) the same rows go
with a handful of `DELETE ... WHERE run_id IN (...)` statements per batch, mirroring `SqlRunStorage.delete_run` and
`SqlEventLogStorage.delete_events`: event_logs rows, the asset_event_tags of their materializations/observations, held
concurrency slots and pending steps, run_tags and the runs rows. Neither path touches job snapshots or asset_keys, like
Dagster's own delete. Events go first, so an interrupted batch leaves runs without events (pruned again next time),
never orphaned events.

Deleted rows stay as dead tuples until a VACUUM. A night's cleanup deletes about one day in fifteen of the rows (14
days kept), under autovacuum's default threshold (50 rows + 20% of the table), so without a VACUUM of its own the dead
rows of four or five nights would pile up before autovacuum came: `vacuum_after_delete` runs VACUUM (ANALYZE) on the
tables the cleanup deletes from, so their space is reused by the next day's rows (BENCHMARKS.md "Storage over a
month").

VACUUM frees a table's space, but an index page is only freed once every entry on it is gone. The runs kept for a
problem (about 2% of a day's runs, spread over the day) leave an entry on most pages of the indexes ordered by id or
time, so those pages outlive their day; measured, they hold about as much again as a day's runs while their day was
kept. `reindex_tables` (REINDEX TABLE CONCURRENTLY, the nightly job's `reindex_every_days`) rebuilds them packed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import dagster as dg
from sqlalchemy import select, union

from orchestration_core.dagster_schema import (
    asset_event_tags,
    concurrency_slots,
    event_logs,
    pending_steps,
    run_tags,
    runs,
)
from orchestration_core.postgres import vacuum_tables

_LOG_DELETE_THREADS = 8
_ASSET_EVENT_TYPES = [
    dg.DagsterEventType.ASSET_MATERIALIZATION.value,
    dg.DagsterEventType.ASSET_OBSERVATION.value,
]


class RunDeleter(Protocol):
    def delete(self, run_ids: Sequence[str]) -> None: ...


def delete_compute_logs(instance: dg.DagsterInstance, run_ids: Sequence[str]) -> None:
    """Remove captured stdout/stderr (delete_run does not, #4498); every manager keys a run's logs under [run_id].

    File and object-store deletes wait on I/O, not CPU, so a few threads overlap them; errors still propagate.
    """
    manager = instance.compute_log_manager
    with ThreadPoolExecutor(max_workers=_LOG_DELETE_THREADS) as pool:
        list(pool.map(lambda run_id: manager.delete_logs(prefix=[run_id]), run_ids))


class InstanceRunDeleter:
    """One `instance.delete_run` per run: works on every storage."""

    def __init__(self, instance: dg.DagsterInstance):
        self._instance = instance

    def delete(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            self._instance.delete_run(run_id)
        delete_compute_logs(self._instance, run_ids)


class SqlBulkRunDeleter:
    """Set-based deletes through the storages' own SQLAlchemy connections."""

    def __init__(self, instance: dg.DagsterInstance):
        self._instance = instance
        self._runs = instance.run_storage
        self._events = instance.event_log_storage
        if not supports_bulk_delete(instance):
            kind = type(self._events).__name__
            raise TypeError(f"bulk delete needs SQL run storage and an unsharded SQL event log, got {kind}")

    def delete(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return
        ids = list(run_ids)
        events = event_logs
        with self._events.index_connection() as conn:
            asset_event_ids = select(events.c.id).where(
                events.c.run_id.in_(ids), events.c.dagster_event_type.in_(_ASSET_EVENT_TYPES)
            )
            conn.execute(asset_event_tags.delete().where(asset_event_tags.c.event_id.in_(asset_event_ids)))
            conn.execute(events.delete().where(events.c.run_id.in_(ids)))
            slot_holders = self._runs_holding_concurrency(conn, ids)
        # Rare for finished runs; Dagster's own method also hands freed slots to waiting steps.
        for run_id in slot_holders:
            self._events.free_concurrency_slots_for_run(run_id)
        with self._runs.connect() as conn:
            # run_tags cascade on Postgres; deleted explicitly for storages created without the foreign key.
            conn.execute(run_tags.delete().where(run_tags.c.run_id.in_(ids)))
            conn.execute(runs.delete().where(runs.c.run_id.in_(ids)))
        delete_compute_logs(self._instance, ids)

    def _runs_holding_concurrency(self, conn, ids: list[str]) -> list[str]:
        if not self._events.supports_global_concurrency_limits:
            return []
        query = union(
            select(concurrency_slots.c.run_id).where(concurrency_slots.c.run_id.in_(ids)),
            select(pending_steps.c.run_id).where(pending_steps.c.run_id.in_(ids)),
        )
        return [row[0] for row in conn.execute(query)]


def supports_bulk_delete(instance: dg.DagsterInstance) -> bool:
    """SQL run storage and an unsharded SQL event log: the storages' public `connect()` / `index_connection()` give
    SQLAlchemy connections to the tables (orchestration_core/dagster_schema.py) in one database each."""
    events = instance.event_log_storage
    return (
        callable(getattr(instance.run_storage, "connect", None))
        and callable(getattr(events, "index_connection", None))
        and not events.is_run_sharded
    )


# The tables a cleanup deletes from, by the storage that owns them (the one whose connection vacuums them).
EVENT_LOG_TABLES = (event_logs.name, asset_event_tags.name)
RUN_TABLES = (run_tags.name, runs.name)


def vacuum_after_delete(instance: dg.DagsterInstance) -> float | None:
    """VACUUM (ANALYZE) the run and event tables after a cleanup deleted from them; seconds taken, or None when the
    storage is not Postgres through SQL connections."""
    if not supports_bulk_delete(instance):
        return None
    started = time.perf_counter()
    if not vacuum_tables(instance.event_log_storage.index_connection, EVENT_LOG_TABLES):
        return None
    vacuum_tables(instance.run_storage.connect, RUN_TABLES)
    return time.perf_counter() - started


def reindex_tables(instance: dg.DagsterInstance) -> float | None:
    """REINDEX TABLE CONCURRENTLY the run and event tables (writers keep going; autocommit, as it must run outside a
    transaction). A rebuild an earlier attempt left invalid (`<index>_ccnew`) is dropped first. Seconds taken, or None
    when the storage is not Postgres through SQL connections."""
    if not supports_bulk_delete(instance):
        return None
    started = time.perf_counter()
    for connect, tables in ((instance.event_log_storage.index_connection, EVENT_LOG_TABLES[:1]),
                            (instance.run_storage.connect, RUN_TABLES)):
        with connect() as conn:
            if conn.dialect.name != "postgresql":
                return None
            if conn.in_transaction():
                conn.commit()
            autocommit = conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in tables:
                leftovers = autocommit.exec_driver_sql(
                    "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                    "JOIN pg_class t ON t.oid = x.indrelid WHERE t.relname = %(table)s AND NOT x.indisvalid "
                    "AND i.relname LIKE '%%\\_ccnew%%'", {"table": table}).scalars().all()
                for index in leftovers:
                    autocommit.exec_driver_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{index}"')
                autocommit.exec_driver_sql(f'REINDEX TABLE CONCURRENTLY "{table}"')
    return time.perf_counter() - started


def run_deleter_for(instance: dg.DagsterInstance) -> RunDeleter:
    return SqlBulkRunDeleter(instance) if supports_bulk_delete(instance) else InstanceRunDeleter(instance)
