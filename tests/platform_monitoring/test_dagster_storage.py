"""platform_monitoring/dagster_storage.py: each parser of a serialized Dagster body against the body real Dagster
writes (built here, where importing Dagster is fine), so a format change in an upgrade fails here; and the SQL reads
against Dagster's own answers on a real Postgres storage."""

from __future__ import annotations

import json
import time

import dagster as dg
import pytest
from dagster._core.remote_origin import GrpcServerCodeLocationOrigin, RemoteInstigatorOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import (
    InstigatorState,
    InstigatorStatus,
    InstigatorType,
    ScheduleInstigatorData,
    SensorInstigatorData,
    TickData,
    TickStatus,
)
from dagster._daemon.types import DaemonHeartbeat
from dagster_shared.error import SerializableErrorInfo
from dagster_shared.serdes import serialize_value

from platform_monitoring import dagster_storage as ds

ORIGIN = RemoteInstigatorOrigin(RemoteRepositoryOrigin(
    GrpcServerCodeLocationOrigin(host="code", port=4000, location_name="loc"), "__repository__"), "probe")


@pytest.mark.parametrize("timestamp", [0.5, 1_796_575_231.0068069])
def test_a_heartbeat_body_gives_its_time(timestamp: float) -> None:
    body = serialize_value(DaemonHeartbeat(timestamp=timestamp, daemon_type="SENSOR", daemon_id="d", errors=[]))
    assert ds.parse_heartbeat(body) == ds.Heartbeat(timestamp)


@pytest.mark.parametrize("body", ['{"__class__": "DaemonHeartbeat"}', '{"timestamp": "soon"}', "[]", ""])
def test_a_heartbeat_body_without_a_time_is_refused(body: str) -> None:
    with pytest.raises(ValueError):
        ds.parse_heartbeat(body)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (SensorInstigatorData(last_tick_timestamp=1.0, last_sensor_start_timestamp=5.5, sensor_type=None),
         ds.InstigatorData(last_sensor_start_timestamp=5.5)),
        (SensorInstigatorData(last_tick_timestamp=1.0, last_sensor_start_timestamp=None, sensor_type=None),
         ds.InstigatorData()),
        (ScheduleInstigatorData("0 6 * * *", 7.5), ds.InstigatorData(start_timestamp=7.5)),
        (ScheduleInstigatorData("0 6 * * *", None), ds.InstigatorData()),
        (None, None),
    ],
)
def test_an_instigator_state_body_gives_its_start(data, expected) -> None:
    kind = InstigatorType.SCHEDULE if isinstance(data, ScheduleInstigatorData) else InstigatorType.SENSOR
    body = serialize_value(InstigatorState(ORIGIN, kind, InstigatorStatus.RUNNING, data))
    assert ds.parse_instigator_data(body) == expected


def test_every_instigator_and_tick_status_of_dagster_is_known() -> None:
    assert {s.value for s in InstigatorStatus} == {s.value for s in ds.InstigatorStatus}
    assert {s.value for s in TickStatus} == {s.value for s in ds.TickStatus}


@pytest.mark.parametrize(
    ("status", "error", "counts"),
    [
        (TickStatus.SKIPPED, None, (0, 0)),
        (TickStatus.STARTED, None, (0, 0)),
        (TickStatus.SUCCESS, None, (0, 2)),
        (TickStatus.FAILURE, SerializableErrorInfo("boom\nline 2", [], "ValueError"), (3, 4)),
        (TickStatus.FAILURE, SerializableErrorInfo("wrapper", [], "SensorExecutionError",
                                                   cause=SerializableErrorInfo("inner", [], "KeyError")), (1, 1)),
    ],
)
def test_a_tick_body_gives_status_time_counts_and_error(status, error, counts) -> None:
    tick = TickData(instigator_origin_id=ORIGIN.get_id(), instigator_name="probe",
                    instigator_type=InstigatorType.SENSOR,
                    status=status, timestamp=123.25, error=error, consecutive_failure_count=counts[0],
                    failure_count=counts[1], selector_id="sel", run_ids=[], run_keys=[])
    parsed = ds.parse_tick(7, serialize_value(tick))
    assert (parsed.tick_id, parsed.status.value, parsed.timestamp) == (7, status.value, 123.25)
    assert (parsed.consecutive_failure_count, parsed.failure_count) == counts
    if error is None:
        assert parsed.error is None
    else:
        assert (parsed.error.message, parsed.error.cls_name) == (error.message, error.cls_name)
        cause = parsed.error.cause
        assert (cause.message, cause.cls_name) == (error.cause.message, error.cause.cls_name) if error.cause \
            else cause is None


@pytest.mark.parametrize(("entry", "value"), [
    ({"__class__": "IntMetadataEntryData", "value": 3}, 3),
    ({"__class__": "FloatMetadataEntryData", "value": 0.5}, 0.5),
    ({"__class__": "TextMetadataEntryData", "text": "2026-01-01"}, "2026-01-01"),
    ({"__class__": "NullMetadataEntryData"}, None),
    (4, 4),
])
def test_metadata_values_read_plain(entry, value) -> None:
    assert ds.metadata_value(entry) == value


@pytest.mark.integration
def test_event_bodies_of_a_real_run_give_what_dagster_reads(pg_instance: dg.DagsterInstance) -> None:
    """A materialization with a check evaluation, and a step restarted by its retry policy, on a real Postgres
    instance (one event table, as the API reads it): each event body's time, job and check figures as Dagster itself
    deserializes them."""
    attempts = []

    @dg.asset(check_specs=[dg.AssetCheckSpec("complete", asset="probe_asset")])
    def probe_asset():
        yield dg.Output(1)
        yield dg.AssetCheckResult(check_name="complete", passed=False,
                                  metadata={"day": "2026-01-01", "completeness": 0.5, "captured": 3})

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=1))
    def flaky() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    @dg.job
    def flaky_job() -> None:
        flaky()

    instance = pg_instance
    dg.materialize([probe_asset], instance=instance)
    assert flaky_job.execute_in_process(instance=instance).success
    [restart] = instance.get_event_records(dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_RESTARTED))
    [check] = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("probe_asset"), "complete"), limit=1)
    materialization = instance.get_latest_materialization_event(dg.AssetKey("probe_asset"))

    restarts = ds.step_restarts(instance, time.time() - 3600)
    assert [(r.run_id, r.step_key, r.job_name, r.timestamp) for r in restarts] == [
        (restart.event_log_entry.run_id, "flaky", "flaky_job", restart.event_log_entry.timestamp)]
    assert ds.latest_materialization_timestamp(instance, ["probe_asset"]) == materialization.timestamp
    [evaluation] = ds.check_evaluations(instance, ["probe_asset"], "complete", 5)
    theirs = check.event.dagster_event.event_specific_data
    assert evaluation.passed is theirs.passed is False
    assert evaluation.timestamp == check.event.timestamp
    assert evaluation.metadata == {k: v.value for k, v in theirs.metadata.items()}
    assert ds.check_evaluations(instance, ["probe_asset"], "other", 5) == []
    assert ds.latest_materialization_timestamp(instance, ["nothing"]) is None


def test_a_planned_check_has_no_evaluation() -> None:
    planned = {"timestamp": 1.0, "dagster_event": {"event_type_value": "ASSET_CHECK_EVALUATION_PLANNED",
                                                   "event_specific_data": {}}}
    assert ds.parse_check_evaluation(json.dumps(planned)) is None
    assert ds.parse_check_evaluation(None) is None


@pytest.mark.integration
def test_sql_reads_agree_with_dagster_on_postgres(pg_instance: dg.DagsterInstance, dagster_database_url: str) -> None:
    """Heartbeats, stored states and the last run of a schedule read through a plain engine (as the API does) are
    what the instance's own methods return."""
    from orchestration_core.postgres import create_engine
    from orchestration_core.run_outcome import TAG_OUTCOME

    now = time.time()
    for daemon in ("SENSOR", "SCHEDULER"):
        pg_instance.add_daemon_heartbeat(DaemonHeartbeat(now - 5, daemon, None, None))
    sensor = InstigatorState(ORIGIN, InstigatorType.SENSOR, InstigatorStatus.STOPPED,
                             SensorInstigatorData(last_tick_timestamp=None, last_sensor_start_timestamp=now - 60,
                                                  sensor_type=None))
    pg_instance.add_instigator_state(sensor)

    @dg.op
    def noop() -> None:
        pass

    @dg.job
    def scheduled_job() -> None:
        noop()

    older = scheduled_job.execute_in_process(instance=pg_instance, tags={"dagster/schedule_name": "daily"})
    newest = scheduled_job.execute_in_process(instance=pg_instance,
                                              tags={"dagster/schedule_name": "daily", TAG_OUTCOME: "partial"})
    engine = create_engine(dagster_database_url, "oneshot")
    try:
        beats = ds.daemon_heartbeats(engine)
        assert {k: v.timestamp for k, v in beats.items()} == {
            k: v.timestamp for k, v in pg_instance.get_daemon_heartbeats().items()}
        [stored] = ds.instigator_states(engine).values()
        [theirs] = pg_instance.all_instigator_state()
        assert (stored.selector_id, stored.status.value) == (theirs.selector_id, theirs.status.value)
        assert stored.instigator_data.last_sensor_start_timestamp == theirs.instigator_data.last_sensor_start_timestamp
        last = ds.last_run_tagged(engine, "dagster/schedule_name", "daily", (TAG_OUTCOME,))
        [record] = pg_instance.get_run_records(dg.RunsFilter(tags={"dagster/schedule_name": "daily"}), limit=1)
        assert last.run_id == record.dagster_run.run_id == newest.run_id != older.run_id
        assert (last.status.value, dict(last.tags)) == (record.dagster_run.status.value, {TAG_OUTCOME: "partial"})
        assert ds.last_run_tagged(engine, "dagster/schedule_name", "never", ()) is None
    finally:
        engine.dispose()
