"""The monitoring's reads of Dagster's storage, through SQL on the tables and columns
orchestration_core/dagster_schema.py declares, without importing Dagster (the control API's workers stay small):
daemon heartbeats, schedule and sensor states and ticks, the last run of a schedule or sensor, step restarts, asset
materializations and check evaluations.

Where a value lives only in a serialized Dagster body (a heartbeat's time, a sensor's start, a tick's error, an
event's job), one pure function per body reads the JSON fields needed (`parse_*`). Dagster's serdes writes a record as
a JSON object of its fields plus `__class__`, an enum as `{"__enum__": "Type.MEMBER"}`, and renames a few fields
(InstigatorState.instigator_data is `job_specific_data`, an event's job_name is `pipeline_name`,
AssetCheckEvaluation.passed is `success`).
tests/platform_monitoring/test_dagster_storage.py builds each body with real Dagster and checks these parsers read it.

Each read takes `storage`: anything whose `connect()` gives a SQLAlchemy connection to Dagster's Postgres database,
which holds the run, event log and schedule tables (the control API's engine), or a Dagster instance (each table
through its own storage's public connection: tests and benches, on any SQL storage).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from maintenance_jobs.execution_history.run_storage import RunStorage, connect
from orchestration_core import dagster_schema as tables
from orchestration_core.dagster_schema import asset_check_executions, event_logs, job_ticks, run_tags, runs
from orchestration_core.run_status import RunStatus, run_status


def _events(storage: RunStorage) -> AbstractContextManager[sa.Connection]:
    """A connection to the event log tables: an instance's event log index, else the database's."""
    events = getattr(storage, "event_log_storage", None)
    return events.index_connection() if events is not None else connect(storage)


def _schedules(storage: RunStorage) -> AbstractContextManager[sa.Connection]:
    """A connection to the schedule tables: an instance's schedule storage, else the database's."""
    schedules = getattr(storage, "schedule_storage", None)
    return schedules.connect() if schedules is not None else connect(storage)


class InstigatorStatus(StrEnum):
    """Dagster's InstigatorStatus values (`instigators.status`)."""

    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    DECLARED_IN_CODE = "DECLARED_IN_CODE"
    AUTOMATICALLY_RUNNING = "AUTOMATICALLY_RUNNING"


class TickStatus(StrEnum):
    """Dagster's TickStatus values (`job_ticks.status`)."""

    STARTED = "STARTED"
    SKIPPED = "SKIPPED"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"


def _object(body: str | None) -> dict[str, Any]:
    value = json.loads(body) if body else {}
    return value if isinstance(value, dict) else {}


def _enum_member(value: Any) -> str | None:
    """`{"__enum__": "TickStatus.FAILURE"}` -> "FAILURE"."""
    if isinstance(value, dict) and isinstance(value.get("__enum__"), str):
        return value["__enum__"].rpartition(".")[2]
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# ---- daemon heartbeats ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heartbeat:
    timestamp: float  # epoch seconds of the beat


def parse_heartbeat(body: str) -> Heartbeat:
    """A serialized DaemonHeartbeat: its `timestamp` (epoch seconds, a float)."""
    timestamp = _number(_object(body).get("timestamp"))
    if timestamp is None:
        raise ValueError("a daemon heartbeat without a timestamp")
    return Heartbeat(timestamp)


def daemon_heartbeats(storage: RunStorage) -> dict[str, Heartbeat]:
    """Each daemon type's latest heartbeat (what DagsterInstance.get_daemon_heartbeats returns), one query."""
    with connect(storage) as conn:
        beats = tables.daemon_heartbeats
        rows = conn.execute(sa.select(beats.c.daemon_type, beats.c.body)).all()
    return {daemon_type: parse_heartbeat(body) for daemon_type, body in rows}


# ---- schedule and sensor states ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstigatorData:
    """What the monitoring reads of a stored SensorInstigatorData or ScheduleInstigatorData (None where absent)."""

    last_sensor_start_timestamp: float | None = None  # a sensor's: when the daemon started it
    start_timestamp: float | None = None  # a schedule's: when it was started


@dataclass(frozen=True)
class StoredInstigator:
    selector_id: str
    status: InstigatorStatus
    instigator_data: InstigatorData | None


def parse_instigator_data(body: str | None) -> InstigatorData | None:
    """A serialized InstigatorState's data (`job_specific_data`): a sensor's start or a schedule's start."""
    data = _object(body).get("job_specific_data")
    if not isinstance(data, dict):
        return None
    return InstigatorData(last_sensor_start_timestamp=_number(data.get("last_sensor_start_timestamp")),
                          start_timestamp=_number(data.get("start_timestamp")))


def instigator_states(storage: RunStorage) -> dict[str, StoredInstigator]:
    """Every stored schedule and sensor state by selector id (DagsterInstance.all_instigator_state), one query. The
    `instigators` table is where Dagster reads them once its selector-id index is built, which a storage created by
    dagster-postgres, or brought up to date by `dagster instance migrate` (the deployments' `migrate`), has."""
    table = tables.instigators
    with _schedules(storage) as conn:
        rows = conn.execute(sa.select(table.c.selector_id, table.c.status, table.c.instigator_body)).all()
    return {selector: StoredInstigator(selector, InstigatorStatus(status), parse_instigator_data(body))
            for selector, status, body in rows if selector}


# ---- ticks ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorInfo:
    """A SerializableErrorInfo: message, exception class, and the error it wraps."""

    message: str | None
    cls_name: str | None
    cause: ErrorInfo | None = None


def parse_error(value: Any) -> ErrorInfo | None:
    if not isinstance(value, dict):
        return None
    return ErrorInfo(value.get("message"), value.get("cls_name"), parse_error(value.get("cause")))


@dataclass(frozen=True)
class Tick:
    tick_id: int
    status: TickStatus
    timestamp: float
    consecutive_failure_count: int | None
    failure_count: int | None
    error: ErrorInfo | None


def parse_tick(tick_id: int, body: str) -> Tick:
    """A serialized TickData: status, time, Dagster's failure counts and the error of a failed tick."""
    data = _object(body)
    status = _enum_member(data.get("status"))
    timestamp = _number(data.get("timestamp"))
    if status is None or timestamp is None:
        raise ValueError(f"tick {tick_id} has no status or timestamp")
    counts = [data.get(k) for k in ("consecutive_failure_count", "failure_count")]
    consecutive, failures = (int(c) if isinstance(c, int) else None for c in counts)
    return Tick(tick_id, TickStatus(status), timestamp, consecutive, failures, parse_error(data.get("error")))


def newest_ticks(storage: RunStorage, selector_ids: Sequence[str], limit: int) -> dict[str, list[Tick]]:
    """The newest `limit` ticks of each instigator, newest first (ticks of one instant by id, as they were made), in
    one query that walks the tick table's (selector_id, timestamp) index once per instigator (LATERAL). Dagster's
    `get_batch_ticks` ranks every stored tick of them instead: 1.7 s at 400k ticks against ~10 ms
    (bench/alert_metrics.py)."""
    if not selector_ids:
        return {}
    wanted = sa.values(sa.column("selector_id", sa.String), name="wanted").data([(key,) for key in selector_ids])
    ticks = job_ticks
    newest = (sa.select(ticks.c.id, ticks.c.selector_id, ticks.c.tick_body)
              .where(ticks.c.selector_id == wanted.c.selector_id)
              .order_by(ticks.c.timestamp.desc()).limit(limit).lateral("newest"))
    query = sa.select(newest.c.id, newest.c.selector_id, newest.c.tick_body).select_from(wanted.join(newest, sa.true()))
    found: dict[str, list[Tick]] = {}
    with _schedules(storage) as conn:
        for tick_id, selector, body in conn.execute(query):
            found.setdefault(selector, []).append(parse_tick(tick_id, body))
    return {key: sorted(items, key=lambda t: (t.timestamp, t.tick_id), reverse=True) for key, items in found.items()}


# ---- runs -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LastRun:
    run_id: str
    status: RunStatus
    tags: Mapping[str, str]  # the tags asked for
    created: dt.datetime  # naive UTC, as stored


def last_run_tagged(storage: RunStorage, key: str, value: str, tag_keys: Sequence[str] = ()) -> LastRun | None:
    """The newest run (by storage id, as Dagster's get_run_records orders) carrying tag `key`=`value`, with its
    `tag_keys` tags."""
    tag = run_tags.alias("wanted_tag")
    query = (sa.select(runs.c.run_id, runs.c.status, runs.c.create_timestamp)
             .select_from(runs.join(tag, sa.and_(tag.c.run_id == runs.c.run_id, tag.c.key == key,
                                                 tag.c.value == value)))
             .order_by(runs.c.id.desc()).limit(1))
    with connect(storage) as conn:
        row = conn.execute(query).first()
        if row is None:
            return None
        tags = dict(conn.execute(sa.select(run_tags.c.key, run_tags.c.value).where(
            run_tags.c.run_id == row.run_id, run_tags.c.key.in_(list(tag_keys)))).all()) if tag_keys else {}
    return LastRun(row.run_id, run_status(row.status), tags, row.create_timestamp)


# ---- events ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventFacts:
    """What the monitoring reads of a serialized EventLogEntry."""

    timestamp: float
    job_name: str | None
    event_type: str | None  # the DagsterEventType value of a Dagster event; None for a log line
    specific: Mapping[str, Any]  # the event's own data (event_specific_data), as serialized


def parse_event(body: str) -> EventFacts:
    data = _object(body)
    timestamp = _number(data.get("timestamp"))
    if timestamp is None:
        raise ValueError("an event without a timestamp")
    event = data.get("dagster_event") if isinstance(data.get("dagster_event"), dict) else {}
    specific = event.get("event_specific_data")
    return EventFacts(timestamp, data.get("pipeline_name") or data.get("job_name"),
                      event.get("event_type_value"), specific if isinstance(specific, dict) else {})


@dataclass(frozen=True)
class StepRestart:
    run_id: str
    step_key: str | None
    job_name: str | None
    timestamp: float


def step_restarts(storage: RunStorage, after: float) -> list[StepRestart]:
    """STEP_RESTARTED events after `after` (epoch seconds), oldest first (the storage id's order)."""
    since = dt.datetime.fromtimestamp(after, dt.UTC).replace(tzinfo=None)
    query = (sa.select(event_logs.c.run_id, event_logs.c.step_key, event_logs.c.event)
             .where(event_logs.c.dagster_event_type == "STEP_RESTARTED", event_logs.c.timestamp > since)
             .order_by(event_logs.c.id))
    with _events(storage) as conn:
        rows = conn.execute(query).all()
    return [StepRestart(run_id, step_key, facts.job_name, facts.timestamp)
            for run_id, step_key, facts in ((r, s, parse_event(b)) for r, s, b in rows)]


def asset_key_string(path: Sequence[str]) -> str:
    """How Dagster stores an asset key in its tables (AssetKey.to_string(): the path as a JSON list)."""
    return json.dumps(list(path))


def latest_materialization_timestamp(storage: RunStorage, path: Sequence[str]) -> float | None:
    """Epoch seconds of the newest materialization of the asset `path`, or None (get_latest_materialization_event)."""
    query = (sa.select(event_logs.c.event)
             .where(event_logs.c.asset_key == asset_key_string(path),
                    event_logs.c.dagster_event_type == "ASSET_MATERIALIZATION")
             .order_by(event_logs.c.id.desc()).limit(1))
    with _events(storage) as conn:
        body = conn.execute(query).scalar()
    return parse_event(body).timestamp if body is not None else None


@dataclass(frozen=True)
class CheckEvaluation:
    passed: bool
    timestamp: float
    metadata: dict[str, Any]  # plain values: a metadata entry's `value` (or `text`)


def metadata_value(entry: Any) -> Any:
    """A serialized metadata value (IntMetadataValue is `{"__class__": "IntMetadataEntryData", "value": 3}`, text is
    `{"text": ...}`) as its plain value."""
    if isinstance(entry, dict):
        for field in ("value", "text"):
            if field in entry:
                return entry[field]
        return None
    return entry


def parse_check_evaluation(body: str | None) -> CheckEvaluation | None:
    """A stored check execution's evaluation event: None unless it is an ASSET_CHECK_EVALUATION (planned, running)."""
    if not body:
        return None
    facts = parse_event(body)
    if facts.event_type != "ASSET_CHECK_EVALUATION":
        return None
    metadata = facts.specific.get("metadata")
    plain = {key: metadata_value(entry) for key, entry in metadata.items()} if isinstance(metadata, dict) else {}
    # AssetCheckEvaluation.passed is stored as `success`.
    return CheckEvaluation(bool(facts.specific.get("success")), facts.timestamp, plain)


def check_evaluations(storage: RunStorage, path: Sequence[str], check: str, limit: int) -> list[CheckEvaluation | None]:
    """The newest `limit` executions of asset check `check` on `path`, newest first
    (get_asset_check_execution_history), each its evaluation or None while it has none."""
    table = asset_check_executions
    query = (sa.select(table.c.evaluation_event)
             .where(table.c.asset_key == asset_key_string(path), table.c.check_name == check)
             .order_by(table.c.id.desc()).limit(limit))
    with _events(storage) as conn:
        return [parse_check_evaluation(body) for body in conn.execute(query).scalars()]
