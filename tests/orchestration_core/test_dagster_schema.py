"""orchestration_core/dagster_schema.py against the real thing: every table and column it declares exists, with a
compatible type, in the schema dagster-postgres creates; its selector id is the one Dagster files states and ticks
under. An upgrade that renames or retypes one fails here, naming it."""

from __future__ import annotations

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core import dagster_schema
from tests.code_server import module_workspace

pytestmark = pytest.mark.integration

# Which storage's connection reaches each table (all three are one database on Postgres, not elsewhere).
STORAGE_OF = {"runs": "run", "run_tags": "run", "daemon_heartbeats": "run", "event_logs": "event",
              "asset_event_tags": "event", "asset_check_executions": "event", "concurrency_slots": "event",
              "pending_steps": "event", "job_ticks": "schedule", "instigators": "schedule"}


def reflected_columns(instance: dg.DagsterInstance, table: str) -> dict[str, sa.types.TypeEngine]:
    storage = STORAGE_OF[table]
    if storage == "run":
        connection = instance.run_storage.connect()
    elif storage == "event":
        connection = instance.event_log_storage.index_connection()
    else:
        connection = instance.schedule_storage.connect()
    with connection as conn:
        return {column["name"]: column["type"] for column in sa.inspect(conn).get_columns(table)}


def test_every_declared_table_says_where_it_lives() -> None:
    assert set(dagster_schema.metadata.tables) == set(STORAGE_OF)


@pytest.mark.parametrize("table", sorted(dagster_schema.metadata.tables.values(), key=lambda t: t.name),
                         ids=lambda table: table.name)
def test_declared_columns_exist_in_dagsters_postgres_schema(pg_instance: dg.DagsterInstance, table: sa.Table) -> None:
    found = reflected_columns(pg_instance, table.name)
    assert found, f"Dagster's schema has no table {table.name}"
    missing = sorted(set(table.c.keys()) - set(found))
    assert not missing, f"{table.name} has no column {missing} in Dagster's schema"
    for column in table.c:
        ours, theirs = column.type.python_type, found[column.name].python_type
        assert ours is theirs, f"{table.name}.{column.name}: declared {ours.__name__}, Dagster's is {theirs.__name__}"


def test_the_selector_id_is_the_one_dagster_files_states_and_ticks_under(pg_instance: dg.DagsterInstance,
                                                                          monkeypatch, registry_url: str) -> None:
    """Every schedule and sensor of a location as Dagster's daemon loads it (a code server subprocess)."""
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", registry_url)
    with module_workspace(pg_instance, "maintenance_jobs.definitions", "maintenance_jobs") as context:
        repository = context.create_request_context().get_code_location("maintenance_jobs").get_repository(
            "__repository__")
        instigators = [*repository.get_schedules(), *repository.get_sensors()]
        assert len(instigators) >= 2
        for instigator in instigators:
            ours = dagster_schema.instigator_selector_id("maintenance_jobs", "__repository__", instigator.name)
            assert ours == instigator.selector_id, instigator.name
