"""The Dagster storage tables this project reads or deletes from, and the key Dagster files schedule state under.

These are Dagster's storage format, created and migrated by dagster-postgres (`dagster instance migrate`), not this
project: it reads them directly where the public instance API has no equivalent at the speed needed (the control API's
/executions, /stats, /metrics and /health pages, bulk run retention) and the benches write rows into them. They are
declared here, with only the columns the project uses, so that no module imports Dagster's private schema modules;
tests/orchestration_core/test_dagster_schema.py reflects a real Dagster Postgres schema and checks that every table
and column declared here exists there with a compatible type, so an upgrade that changes one fails there, not in a
page. Connections come from the storages' public `connect()` / `index_connection()`, or (the control API, which does
not import Dagster) from an engine on the Postgres database that holds all three storages.
"""

from __future__ import annotations

import hashlib
import json

import sqlalchemy as sa

metadata = sa.MetaData()

# Run storage.
runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("run_id", sa.String(255)),
    sa.Column("pipeline_name", sa.Text),  # the job's name
    sa.Column("status", sa.String(63)),  # a DagsterRunStatus value
    sa.Column("run_body", sa.Text),  # the serialized DagsterRun
    sa.Column("create_timestamp", sa.DateTime),  # naive UTC
    sa.Column("update_timestamp", sa.DateTime),  # naive UTC
    sa.Column("start_time", sa.Float),  # epoch seconds
    sa.Column("end_time", sa.Float),  # epoch seconds
)

daemon_heartbeats = sa.Table(
    "daemon_heartbeats", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("daemon_type", sa.String(255)),  # one row per type, replaced by each beat
    sa.Column("body", sa.Text),  # the serialized DaemonHeartbeat (its `timestamp`: epoch seconds)
)

run_tags = sa.Table(
    "run_tags", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("run_id", sa.String(255)),
    sa.Column("key", sa.Text),
    sa.Column("value", sa.Text),
)

# Event log storage (one index database, not sharded per run).
event_logs = sa.Table(
    "event_logs", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),  # the event's storage id
    sa.Column("run_id", sa.String(255)),
    sa.Column("event", sa.Text),  # the serialized EventLogEntry
    sa.Column("dagster_event_type", sa.Text),  # a DagsterEventType value; NULL for a user log line
    sa.Column("timestamp", sa.DateTime),  # naive UTC
    sa.Column("step_key", sa.Text),
    sa.Column("asset_key", sa.Text),  # an AssetKey's `to_string()` (JSON list) on asset events; else NULL
)

asset_check_executions = sa.Table(
    "asset_check_executions", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("asset_key", sa.Text),  # an AssetKey's `to_string()`
    sa.Column("check_name", sa.Text),
    sa.Column("execution_status", sa.String(255)),  # PLANNED | SUCCEEDED | FAILED | ...
    sa.Column("evaluation_event", sa.Text),  # the serialized EventLogEntry of the evaluation; NULL while planned
)

asset_event_tags = sa.Table(
    "asset_event_tags", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("event_id", sa.BigInteger),  # event_logs.id of a materialization or observation
)

concurrency_slots = sa.Table(
    "concurrency_slots", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("run_id", sa.Text),  # the run holding the slot; NULL when free
)

pending_steps = sa.Table(
    "pending_steps", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("run_id", sa.Text),
)

# Schedule storage.
job_ticks = sa.Table(
    "job_ticks", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),  # the tick id
    sa.Column("job_origin_id", sa.String(255)),
    sa.Column("selector_id", sa.String(255)),
    sa.Column("status", sa.String(63)),  # a TickStatus value
    sa.Column("type", sa.String(63)),  # SCHEDULE | SENSOR
    sa.Column("timestamp", sa.DateTime),  # naive UTC
    sa.Column("tick_body", sa.Text),  # the serialized TickData
)


instigators = sa.Table(
    "instigators", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("selector_id", sa.String(255)),
    sa.Column("status", sa.String(63)),  # an InstigatorStatus value
    sa.Column("instigator_body", sa.Text),  # the serialized InstigatorState
)


def instigator_selector_id(location: str, repository: str, name: str) -> str:
    """The id under which Dagster's schedule storage keeps a schedule's or sensor's state and ticks (the
    `selector_id` of InstigatorState and of job_ticks, what `get_instigator_state`, `get_ticks` and `get_batch_ticks`
    take): the SHA-1 of its serialized instigator selector, keys sorted as Dagster's serdes writes them. Stored ids
    are this value, so it is as stable as the stored data."""
    body = {"__class__": "InstigatorSelector", "location_name": location, "name": name, "repository_name": repository}
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
