"""The execution history's ranges and selections, one behaviour per test, on Postgres: which rows and runs a
since/until range, a filter and the paging cursor select on each of the two sources (the registry's recorded history,
maintenance_jobs/execution_history/store.py, and Dagster's run storage, run_storage.py), which skips touch a range,
how the recorded-through mark moves, and which runs count as not recorded yet. These are the statements `make
mutation` holds the two modules' SQL to (tools/mutation.py); /executions and a task's history page are built on them.

Rows are written straight into the tables (Dagster's own, created by dagster-postgres, as bench/api_latency.py does),
so every instant is exact to the microsecond: a row on a boundary is on it, not a second away."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster_postgres import PostgresRunStorage

from local_stack.embedded_postgres import drop_database, ensure_database
from maintenance_jobs.database.migrate import upgrade
from maintenance_jobs.database.tables import dispatch_skips, registry_meta, scheduled_tasks, task_executions
from maintenance_jobs.execution_history.run_storage import (
    EndedRun,
    RunRow,
    RunSelection,
    existing_run_ids,
    live_rows,
    unrecorded_ended_runs,
)
from maintenance_jobs.execution_history.store import (
    RECORDED_THROUGH_KEY,
    HistoryFilter,
    Skip,
    advance_recorded_through,
    newest_rows,
    record_skip,
    recorded_through,
    skips_between,
    task_rows,
)
from orchestration_core.dagster_schema import run_tags, runs
from orchestration_core.run_status import ENDED, IN_PROGRESS, RunStatus
from tests.host_timezone import host_timezone
from tests.maintenance_jobs.job_origins import job_origins

pytestmark = pytest.mark.integration

B = dt.datetime(2026, 3, 10, 4, 0, tzinfo=dt.UTC)  # the boundary instant
MICROSECOND = dt.timedelta(microseconds=1)
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
PLUS_13 = dt.timezone(dt.timedelta(hours=13))  # New Zealand daylight time
AROUND_B = {"before": B - MICROSECOND, "on": B, "after": B + MICROSECOND}
_IDS = itertools.count(1)


def _module_database(server_url: str, prefix: str) -> Iterator[tuple[str, str]]:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = ensure_database(server_url, name)
    try:
        yield name, url
    finally:
        drop_database(server_url, name)


# --- the registry's side: task_executions, dispatch_skips, the recorded-through mark -------------------------------
@pytest.fixture(scope="module")
def registry_db(postgres_server_url: str) -> Iterator[str]:
    """A registry database migrated to head, shared by the module (a database and its migration cost seconds)."""
    for _, url in _module_database(postgres_server_url, "history_ranges"):
        upgrade(url)
        yield url


@pytest.fixture
def registry(registry_db: str) -> Iterator[sa.Engine]:
    """An engine on the module's registry, emptied before each test."""
    engine = sa.create_engine(registry_db)
    with engine.begin() as conn:  # a few rows each: DELETE is cheaper than TRUNCATE's new files
        for table in (task_executions, dispatch_skips, registry_meta, scheduled_tasks):
            conn.execute(sa.delete(table))
    try:
        yield engine
    finally:
        engine.dispose()


def recorded(engine: sa.Engine, run_id: str, triggered_at: dt.datetime, *, task_name: str = "nightly",
             service: str = "scheduler", status: str = "success", scheduled_for: dt.datetime | None = None) -> None:
    """One run's row in the history, as the recorder writes it (the columns a selection reads)."""
    with engine.begin() as conn:
        conn.execute(sa.insert(task_executions).values(
            id=next(_IDS), run_id=run_id, task_name=task_name, service=service, status=status,
            triggered_at=triggered_at, scheduled_for=scheduled_for, job_name="example_executor",
            dagster_status="SUCCESS" if status == "success" else "FAILURE"))


def newest(engine: sa.Engine, selection: HistoryFilter = HistoryFilter(),
           before: tuple[dt.datetime, str] | None = None, limit: int = 50) -> list[str]:
    with engine.connect() as conn:
        return [row.run_id for row in newest_rows(conn, selection, before, limit)]


def of_task(engine: sa.Engine, task_name: str, since: dt.datetime, until: dt.datetime) -> list[str]:
    with engine.connect() as conn:
        return [row.run_id for row in task_rows(conn, task_name, since, until)]


@pytest.mark.parametrize(("since", "until", "expected"), [
    (B, None, ["after", "on"]),
    (None, B, ["before"]),
    (B, B + MICROSECOND, ["on"]),
    (B - MICROSECOND, B, ["before"]),
    (B, B, []),
    (None, None, ["after", "on", "before"]),
    # The same instants written with another offset select the same rows.
    (B.astimezone(PLUS_13), (B + MICROSECOND).astimezone(PLUS_13), ["on"]),
], ids=["since", "until", "since-on", "until-on", "empty", "unbounded", "offset"])
def test_the_history_range_holds_a_row_on_since_and_not_one_on_until(registry, since, until, expected) -> None:
    for run_id, triggered in AROUND_B.items():
        recorded(registry, run_id, triggered)
    assert newest(registry, HistoryFilter(since=since, until=until)) == expected


@pytest.mark.parametrize(("selection", "expected"), [
    (HistoryFilter(), ["match", "other-task", "other-service", "other-status"]),
    (HistoryFilter(task_name="nightly"), ["match", "other-service", "other-status"]),
    (HistoryFilter(service="scheduler"), ["match", "other-task", "other-status"]),
    (HistoryFilter(status="success"), ["match", "other-task", "other-service"]),
    (HistoryFilter(task_name="nightly", service="scheduler", status="success", since=B - HOUR, until=B + HOUR),
     ["match"]),
], ids=["none", "task", "service", "status", "all"])
def test_each_history_filter_keeps_only_the_rows_that_match_it(registry, selection, expected) -> None:
    recorded(registry, "match", B)
    recorded(registry, "other-task", B - MINUTE, task_name="weekly")
    recorded(registry, "other-service", B - 2 * MINUTE, service="api")
    recorded(registry, "other-status", B - 3 * MINUTE, status="failed")
    assert newest(registry, selection) == expected


def test_history_rows_come_newest_first_and_a_tie_by_run_id_descending(registry) -> None:
    for run_id, triggered in [("run-a", B), ("run-c", B), ("run-z", B - MICROSECOND), ("run-b", B),
                              ("run-0", B + MICROSECOND)]:
        recorded(registry, run_id, triggered)
    assert newest(registry) == ["run-0", "run-c", "run-b", "run-a", "run-z"]


def test_the_history_cursor_gives_the_rows_strictly_after_it(registry) -> None:
    for run_id, triggered in [("run-a", B), ("run-b", B), ("run-c", B), ("run-z", B - MICROSECOND),
                              ("run-0", B + MICROSECOND)]:
        recorded(registry, run_id, triggered)
    # The cursor's own row and every newer one are out; an older row with a larger run id is in.
    assert newest(registry, before=(B, "run-b")) == ["run-a", "run-z"]
    assert newest(registry, before=(B + MICROSECOND, "run-0")) == ["run-c", "run-b", "run-a", "run-z"]
    assert newest(registry, HistoryFilter(since=B), before=(B, "run-c")) == ["run-b", "run-a"]


def test_a_history_page_is_the_newest_rows_up_to_its_limit(registry) -> None:
    for run_id, triggered in [("run-a", B), ("run-b", B + MINUTE), ("run-c", B + 2 * MINUTE)]:
        recorded(registry, run_id, triggered)
    assert newest(registry, limit=2) == ["run-c", "run-b"]
    assert newest(registry, before=(B + 2 * MINUTE, "run-c"), limit=1) == ["run-b"]


def test_a_tasks_rows_are_those_triggered_in_its_range(registry) -> None:
    since, until = B, B + HOUR
    recorded(registry, "early", since - MICROSECOND)
    recorded(registry, "first", since)
    recorded(registry, "last", until - MICROSECOND)
    recorded(registry, "at-until", until)
    recorded(registry, "other-task", since, task_name="weekly")
    assert of_task(registry, "nightly", since, until) == ["first", "last"]


def test_a_late_catch_up_is_in_the_range_of_the_minute_it_was_scheduled_for(registry) -> None:
    since, until = B, B + HOUR
    later = until + 10 * MINUTE  # launched after the range ended (the dispatcher caught up late)
    recorded(registry, "for-since", later, scheduled_for=since)
    recorded(registry, "for-last-minute", later + MINUTE, scheduled_for=until - MINUTE)
    recorded(registry, "for-until", later, scheduled_for=until)
    recorded(registry, "for-before", since - MICROSECOND, scheduled_for=since - MINUTE)
    recorded(registry, "other-task", later, task_name="weekly", scheduled_for=since)
    assert of_task(registry, "nightly", since, until) == ["for-since", "for-last-minute"]


def test_a_tasks_rows_come_oldest_first_and_a_tie_by_run_id_whatever_the_plan(registry) -> None:
    for run_id, triggered in [("run-c", B + MINUTE), ("run-e", B), ("run-d", B), ("run-b", B), ("run-a", B),
                              ("run-0", B + 2 * MINUTE)]:
        recorded(registry, run_id, triggered)
    assert of_task(registry, "nightly", B, B + HOUR) == ["run-a", "run-b", "run-d", "run-e", "run-c", "run-0"]
    # A big table's planner may well read the OR of two ranges with a bitmap scan, in the table's own order: the
    # order is the query's, not the index's.
    with registry.connect() as conn:
        conn.exec_driver_sql("SET enable_indexscan = off")
        conn.exec_driver_sql("SET enable_indexonlyscan = off")
        assert [row.run_id for row in task_rows(conn, "nightly", B, B + HOUR)] == [
            "run-a", "run-b", "run-d", "run-e", "run-c", "run-0"]


def skips(engine: sa.Engine, since: dt.datetime, until: dt.datetime) -> list[Skip]:
    with engine.connect() as conn:
        return skips_between(conn, since, until)


def test_a_skip_is_recorded_once_with_its_first_reason(registry) -> None:
    record_skip(registry, B, B + HOUR, "catch-up limited to the last 60 minutes")
    record_skip(registry, B, B + HOUR, "recorded again by a tick evaluated twice")
    record_skip(registry, B, B + 2 * HOUR, "another range from the same minute")
    assert skips(registry, B - HOUR, B + 3 * HOUR) == [
        Skip(B, B + HOUR, "catch-up limited to the last 60 minutes"),
        Skip(B, B + 2 * HOUR, "another range from the same minute"),
    ]


def test_a_skip_that_only_touches_a_range_is_not_in_it(registry) -> None:
    since, until = B, B + HOUR
    record_skip(registry, since - HOUR, since, "ends where the range starts")
    record_skip(registry, until, until + HOUR, "starts where the range ends")
    assert skips(registry, since, until) == []


def test_skips_that_overlap_a_range_by_a_microsecond_are_in_it_by_their_start(registry) -> None:
    since, until = B, B + HOUR
    record_skip(registry, until - MICROSECOND, until + HOUR, "last microsecond")
    record_skip(registry, since - HOUR, since + MICROSECOND, "first microsecond")
    record_skip(registry, since - 2 * HOUR, until + 2 * HOUR, "all of it")
    record_skip(registry, since + MINUTE, since + 2 * MINUTE, "inside")
    assert [skip.reason for skip in skips(registry, since, until)] == [
        "all of it", "first microsecond", "inside", "last microsecond"]


def mark(engine: sa.Engine) -> dt.datetime | None:
    with engine.connect() as conn:
        return recorded_through(conn)


def mark_updated_at(engine: sa.Engine) -> dt.datetime:
    with engine.connect() as conn:
        return conn.execute(sa.select(registry_meta.c.updated_at)
                            .where(registry_meta.c.key == RECORDED_THROUGH_KEY)).scalar_one()


def test_the_recorded_through_mark_is_unset_on_a_fresh_registry(registry) -> None:
    assert mark(registry) is None


def test_the_mark_holds_the_instant_to_the_microsecond_in_utc_whatever_the_hosts_zone(registry) -> None:
    moment = (B + dt.timedelta(microseconds=123456)).astimezone(PLUS_13)
    with host_timezone("Pacific/Auckland"):
        advance_recorded_through(registry, moment)
        read = mark(registry)
    assert read == B + dt.timedelta(microseconds=123456)
    assert read.utcoffset() == dt.timedelta(0)


def test_the_mark_moves_forward_only(registry) -> None:
    advance_recorded_through(registry, B)
    advance_recorded_through(registry, B - MICROSECOND)  # a slower backfill pass that raced this one
    assert mark(registry) == B
    advance_recorded_through(registry, B + MICROSECOND)
    assert mark(registry) == B + MICROSECOND
    # Whole seconds against fractions: the stored text still orders like the instants.
    advance_recorded_through(registry, B + dt.timedelta(seconds=1))
    advance_recorded_through(registry, B + dt.timedelta(microseconds=999999))
    assert mark(registry) == B + dt.timedelta(seconds=1)


def test_the_marks_updated_at_says_when_it_last_moved(registry) -> None:
    advance_recorded_through(registry, B)
    moved = mark_updated_at(registry)
    advance_recorded_through(registry, B)  # the same mark again: not a move
    advance_recorded_through(registry, B - HOUR)
    assert mark_updated_at(registry) == moved
    advance_recorded_through(registry, B + MINUTE)
    assert mark_updated_at(registry) > moved


# --- Dagster's side: runs and run_tags -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dagster_db(postgres_server_url: str) -> Iterator[str]:
    """A database with Dagster's run storage tables, created by dagster-postgres itself, shared by the module."""
    for _, url in _module_database(postgres_server_url, "history_ranges_dagster"):
        PostgresRunStorage(url).dispose()
        yield url


@pytest.fixture
def storage(dagster_db: str) -> Iterator[sa.Engine]:
    """An engine on the module's Dagster database, as the control API reads it; runs emptied before each test."""
    engine = sa.create_engine(dagster_db)
    with engine.begin() as conn:
        conn.execute(sa.delete(run_tags))
        conn.execute(sa.delete(runs))
    try:
        yield engine
    finally:
        engine.dispose()


MAINTENANCE_TAGS = {"orchestration/kind": "maintenance", "maintenance/task": "nightly",
                    "maintenance/service": "scheduler", "maintenance/executor": "example_executor",
                    "maintenance/triggered_by": "scheduler", "maintenance/priority": "50"}
ORIGINS = job_origins("example_executor")  # a queued run's body must name its code


def naive_utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(tzinfo=None)  # how Dagster stores its times


def run(engine: sa.Engine, run_id: str, created: dt.datetime, status: RunStatus = RunStatus.STARTED, *,
        updated: dt.datetime | None = None, **tags: str) -> None:
    """One run as Dagster stores it: naive UTC times, its tags in run_tags (keyword names use `_` for `/`:
    maintenance_task="weekly" sets maintenance/task)."""
    all_tags = MAINTENANCE_TAGS | {key.replace("_", "/", 1): value for key, value in tags.items()}
    remote, python = ORIGINS
    body = dg.DagsterRun(job_name="example_executor", run_id=run_id, status=dg.DagsterRunStatus(status.value),
                         tags=all_tags, remote_job_origin=remote, job_code_origin=python)
    updated = updated or created
    with engine.begin() as conn:
        conn.execute(sa.insert(runs).values(
            run_id=run_id, pipeline_name="example_executor", status=status.value, run_body=dg.serialize_value(body),
            create_timestamp=naive_utc(created), update_timestamp=naive_utc(updated),
            start_time=created.timestamp() + 1, end_time=updated.timestamp() if status in ENDED else None))
        conn.execute(sa.insert(run_tags), [{"run_id": run_id, "key": k, "value": v} for k, v in all_tags.items()])


def live(engine: sa.Engine, selection: RunSelection = RunSelection(), mark: dt.datetime | None = None,
         before: tuple[dt.datetime, str] | None = None, limit: int = 50) -> list[str]:
    return [row.run_id for row in live_rows(engine, selection, mark, before, limit)]


@pytest.mark.parametrize(("since", "until", "expected"), [
    (B, None, ["after", "on"]),
    (None, B, ["before"]),
    (B, B + MICROSECOND, ["on"]),
    (B - MICROSECOND, B, ["before"]),
    (B, B, []),
    (None, None, ["after", "on", "before"]),
    (B.astimezone(PLUS_13), (B + MICROSECOND).astimezone(PLUS_13), ["on"]),
], ids=["since", "until", "since-on", "until-on", "empty", "unbounded", "offset"])
def test_the_run_storage_range_holds_a_run_created_on_since_and_not_one_on_until(storage, since, until,
                                                                                 expected) -> None:
    for run_id, created in AROUND_B.items():
        run(storage, run_id, created)
    assert live(storage, RunSelection(since=since, until=until)) == expected


def test_the_run_storage_range_and_the_mark_mean_the_same_instants_whatever_the_hosts_zone(storage) -> None:
    for run_id, created in AROUND_B.items():
        run(storage, run_id, created, RunStatus.SUCCESS, updated=created + HOUR)
    with host_timezone("Pacific/Auckland"):
        assert live(storage, RunSelection(since=B.astimezone(PLUS_13))) == ["after", "on"]
        assert live(storage, RunSelection(until=B)) == ["before"]
        assert live(storage, mark=B + HOUR) == ["after", "on"]
        assert [r.run_id for r in unrecorded_ended_runs(storage, B + HOUR, 10)] == ["on", "after"]


@pytest.mark.parametrize(("selection", "expected"), [
    (RunSelection(), ["match", "other-task", "other-service", "other-status"]),
    (RunSelection(task_name="nightly"), ["match", "other-service", "other-status"]),
    (RunSelection(service="scheduler"), ["match", "other-task", "other-status"]),
    (RunSelection(statuses=[RunStatus.STARTED]), ["match", "other-task", "other-service"]),
    (RunSelection(statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]), ["other-status"]),
    (RunSelection(statuses=["FAILURE", "CANCELED"]), ["other-status"]),  # a status's value stands for it
    (RunSelection(task_name="nightly", service="scheduler", statuses=[RunStatus.STARTED], since=B - HOUR,
                  until=B + HOUR), ["match"]),
], ids=["none", "task", "service", "status", "dagster-statuses", "status-values", "all"])
def test_each_run_selection_keeps_only_the_maintenance_runs_that_match_it(storage, selection, expected) -> None:
    run(storage, "match", B)
    run(storage, "other-task", B - MINUTE, maintenance_task="weekly")
    run(storage, "other-service", B - 2 * MINUTE, maintenance_service="api")
    run(storage, "other-status", B - 3 * MINUTE, RunStatus.FAILURE)
    # Runs that are not maintenance runs are never in the history, whatever their tags say otherwise.
    run(storage, "racing", B + MINUTE, orchestration_kind="racing")
    run(storage, "kind-as-task", B + 2 * MINUTE, orchestration_kind="racing", maintenance_task="maintenance")
    assert live(storage, selection) == expected


def test_runs_come_newest_first_and_a_tie_by_run_id_descending(storage) -> None:
    for run_id, created in [("run-a", B), ("run-c", B), ("run-z", B - MICROSECOND), ("run-b", B),
                            ("run-0", B + MICROSECOND)]:
        run(storage, run_id, created)
    assert live(storage) == ["run-0", "run-c", "run-b", "run-a", "run-z"]


def test_the_run_storage_cursor_gives_the_runs_strictly_after_it(storage) -> None:
    for run_id, created in [("run-a", B), ("run-b", B), ("run-c", B), ("run-z", B - MICROSECOND),
                            ("run-0", B + MICROSECOND)]:
        run(storage, run_id, created)
    assert live(storage, before=(B, "run-b")) == ["run-a", "run-z"]
    # A cursor written in another offset names the same key.
    assert live(storage, before=((B + MICROSECOND).astimezone(PLUS_13), "run-0")) == [
        "run-c", "run-b", "run-a", "run-z"]
    assert live(storage, RunSelection(since=B), before=(B, "run-c")) == ["run-b", "run-a"]


def test_a_run_storage_page_is_the_newest_runs_up_to_its_limit(storage) -> None:
    for run_id, created in [("run-a", B), ("run-b", B + MINUTE), ("run-c", B + 2 * MINUTE)]:
        run(storage, run_id, created)
    assert live(storage, limit=2) == ["run-c", "run-b"]
    assert live(storage, before=(B + 2 * MINUTE, "run-c"), limit=1) == ["run-b"]


def test_a_live_row_carries_the_runs_columns_and_the_tags_an_item_shows(storage) -> None:
    run(storage, "ended", B, RunStatus.FAILURE, updated=B + MINUTE, racing_error="exit 3",
        dagster_retry_number="1", dagster_root_run_id="first")
    run(storage, "running", B + MINUTE)
    shown = {"maintenance/task": "nightly", "maintenance/service": "scheduler",
             "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
             "maintenance/priority": "50"}
    assert live_rows(storage, RunSelection(), None, None, 10) == [
        RunRow("running", "example_executor", RunStatus.STARTED, B + MINUTE, (B + MINUTE).timestamp() + 1, None,
               shown),
        RunRow("ended", "example_executor", RunStatus.FAILURE, B, B.timestamp() + 1, (B + MINUTE).timestamp(),
               shown | {"racing/error": "exit 3", "dagster/retry_number": "1"}),
    ]


def test_a_run_in_progress_is_not_recorded_yet_however_long_ago_it_was_updated(storage) -> None:
    for day, status in enumerate(IN_PROGRESS):
        run(storage, status.value, B - dt.timedelta(days=30 + day), status)
    assert live(storage, mark=B) == ["QUEUED", "NOT_STARTED", "MANAGED", "STARTING", "STARTED", "SUSPENDED",
                                     "CANCELING"]


def test_an_ended_run_is_not_recorded_yet_from_the_mark_on(storage) -> None:
    for status in ENDED:  # SUCCESS, FAILURE, CANCELED
        run(storage, f"{status.value}-before", B - HOUR, status, updated=B - MICROSECOND)
        run(storage, f"{status.value}-on", B - 2 * HOUR, status, updated=B)
        run(storage, f"{status.value}-after", B - 3 * HOUR, status, updated=B + MICROSECOND)
    assert live(storage, mark=B) == ["SUCCESS-on", "FAILURE-on", "CANCELED-on",
                                     "SUCCESS-after", "FAILURE-after", "CANCELED-after"]


def test_without_a_mark_every_maintenance_run_may_be_unrecorded(storage) -> None:
    run(storage, "old", B - 400 * 24 * HOUR, RunStatus.SUCCESS)
    run(storage, "going", B, RunStatus.QUEUED)
    run(storage, "racing", B, RunStatus.SUCCESS, orchestration_kind="racing")
    assert live(storage, mark=None) == ["going", "old"]


def test_runs_still_in_storage_are_named_whatever_their_kind(storage) -> None:
    run(storage, "maintenance", B, RunStatus.SUCCESS)
    run(storage, "racing", B, RunStatus.SUCCESS, orchestration_kind="racing")
    assert existing_run_ids(storage, ["maintenance", "racing", "deleted"]) == {"maintenance", "racing"}
    assert existing_run_ids(storage, ("deleted",)) == set()
    assert existing_run_ids(storage, []) == set()


def unrecorded(engine: sa.Engine, mark: dt.datetime | None, limit: int = 50) -> list[str]:
    return [ended.run_id for ended in unrecorded_ended_runs(engine, mark, limit)]


def test_the_backfill_takes_ended_runs_updated_from_the_mark_on(storage) -> None:
    run(storage, "before", B - HOUR, RunStatus.SUCCESS, updated=B - MICROSECOND)
    run(storage, "on", B - HOUR, RunStatus.FAILURE, updated=B)
    run(storage, "after", B - HOUR, RunStatus.CANCELED, updated=B + MICROSECOND)
    run(storage, "going", B - HOUR, RunStatus.STARTED, updated=B + MINUTE)
    run(storage, "racing", B - HOUR, RunStatus.SUCCESS, updated=B + MINUTE, orchestration_kind="racing")
    assert unrecorded_ended_runs(storage, B, 10) == [EndedRun("on", B), EndedRun("after", B + MICROSECOND)]
    assert unrecorded(storage, None) == ["before", "on", "after"]


def test_the_backfill_skips_a_run_marked_recorded_but_not_one_carrying_its_parents_mark(storage) -> None:
    run(storage, "recorded", B, RunStatus.SUCCESS, maintenance_history_recorded="recorded")
    # A retry copies its parent's tags, the parent's recorded mark with them: the retry itself is not recorded.
    run(storage, "retry", B + MINUTE, RunStatus.FAILURE, maintenance_history_recorded="recorded")
    run(storage, "plain", B + 2 * MINUTE, RunStatus.SUCCESS)
    assert unrecorded(storage, None) == ["retry", "plain"]


def test_the_backfill_goes_oldest_update_first_a_tie_by_run_id_up_to_its_limit(storage) -> None:
    for run_id, updated in [("run-c", B + MINUTE), ("run-b", B), ("run-a", B), ("run-0", B + 2 * MINUTE)]:
        run(storage, run_id, B - HOUR, RunStatus.SUCCESS, updated=updated)
    assert unrecorded(storage, None) == ["run-a", "run-b", "run-c", "run-0"]
    assert unrecorded(storage, None, limit=3) == ["run-a", "run-b", "run-c"]
