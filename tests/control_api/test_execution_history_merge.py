"""`/executions` merges the execution history with the runs still in Dagster's run storage: page by page it equals a
reference built from both sources in full, for every filter and page size, before and after the history has caught
up; and runs that start, end, get recorded or get pruned while a client pages are neither skipped nor repeated."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.test_utils import create_run_for_test

from control_api.executions import ExecutionQuery, list_executions
from maintenance_jobs.execution_history import store
from maintenance_jobs.execution_history.items import ExecutionItem, item_from_history, item_from_run
from maintenance_jobs.execution_history.recorder import backfill_history, record_run
from maintenance_jobs.execution_history.run_storage import RunRow
from maintenance_jobs.execution_history.summary import execution_id, utc
from tests.maintenance_jobs.job_origins import job_origins
from tests.orchestration_core.audit.run_factory import backdate_finished_run, backdate_runs

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus
UI = "http://ui"
NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def engine(registry_url: str) -> Iterator[sa.Engine]:
    from orchestration_core.postgres import create_engine

    engine = create_engine(registry_url, "registry")
    yield engine
    engine.dispose()


def maintenance_run(instance: dg.DagsterInstance, task: str, service: str, status: dg.DagsterRunStatus,
                    **tags: str) -> str:
    all_tags = {"orchestration/kind": "maintenance", "maintenance/task": task, "maintenance/service": service,
                "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
                "maintenance/priority": "50", **tags}
    origins = {}
    if status == S.QUEUED:
        remote, python = job_origins("example_executor")
        origins = {"remote_job_origin": remote, "job_code_origin": python}
    return create_run_for_test(instance, job_name="example_executor", status=status, tags=all_tags,
                               **origins).run_id


def reference(instance: dg.DagsterInstance, engine: sa.Engine, query: ExecutionQuery) -> list[str]:
    """Every execution matching `query`, newest first, from both sources read in full: a recorded run as the history
    has it, any other maintenance run as run storage has it."""
    with engine.connect() as conn:
        history = {row.run_id: row for row in conn.execute(sa.select(store.task_executions))}
    items: dict[str, ExecutionItem] = {run_id: item_from_history(row, UI, False) for run_id, row in history.items()}
    for record in instance.get_run_records(dg.RunsFilter(tags={"orchestration/kind": "maintenance"})):
        run = record.dagster_run
        if run.run_id not in history:
            items[run.run_id] = item_from_run(RunRow(run.run_id, run.job_name, run.status,
                                                     utc(record.create_timestamp), record.start_time,
                                                     record.end_time, run.tags), UI)
    selected = [i for i in items.values()
                if (query.task_name is None or i.task_name == query.task_name)
                and (query.service is None or i.service == query.service)
                and (query.status is None or i.status == query.status)
                and (query.since is None or i.triggered_at >= query.since)
                and (query.until is None or i.triggered_at < query.until)]
    return [i.run_id for i in sorted(selected, key=lambda i: i.key, reverse=True)]


def pages(instance: dg.DagsterInstance, engine: sa.Engine, query: ExecutionQuery) -> list[list[ExecutionItem]]:
    found = []
    for _ in range(1000):  # a cursor that stops advancing fails here instead of hanging the suite
        page = list_executions(instance, engine, query, UI)
        found.append(page.items)
        if page.next_cursor is None:
            return found
        assert len(page.items) == query.limit
        query = ExecutionQuery(**{**query.__dict__, "cursor": page.next_cursor})
    raise AssertionError(f"more than 1000 pages for {query}")


def build_month(instance: dg.DagsterInstance, engine: sa.Engine) -> dict[str, list[str]]:
    """60 old runs (recorded, a third of the successes then pruned), 15 recent ones (live, ended unrecorded, a few
    recorded), two of them created in the same microsecond."""
    rng = random.Random(27)
    old_statuses = [S.SUCCESS] * 6 + [S.FAILURE, S.CANCELED]
    made: dict[str, list[str]] = {"old": [], "recent": [], "pruned": []}
    for i in range(60):
        status = rng.choice(old_statuses)
        tags = {"maintenance/status": "timeout"} if status == S.CANCELED and i % 2 else {}
        run_id = maintenance_run(instance, rng.choice(["backup", "sync"]), rng.choice(["infra", "docs"]), status,
                                 **tags)
        backdate_finished_run(instance, run_id, NOW - dt.timedelta(days=40 - i * 0.5), duration_seconds=30)
        made["old"].append(run_id)
    backdate_runs(instance, made["old"][10:12], (NOW - dt.timedelta(days=20)).replace(tzinfo=None))  # a key tie
    # The history catches up and the mark is set. A pass stops after 30 s (the sensor's evaluation timeout); on a
    # loaded host 60 runs can take longer (seen: a pass ended at day -20), so pass again, as the next tick does.
    assert any(backfill_history(instance, engine, NOW).caught_up for _ in range(10))
    for run_id in made["old"][::3]:
        if instance.get_run_by_id(run_id).status == S.SUCCESS:
            instance.delete_run(run_id)  # retention
            made["pruned"].append(run_id)
    recent_statuses = [S.QUEUED, S.STARTED, S.SUCCESS, S.FAILURE, S.CANCELED]
    for i in range(15):
        run_id = maintenance_run(instance, rng.choice(["backup", "sync"]), rng.choice(["infra", "docs"]),
                                 recent_statuses[i % 5], **({"dagster/retry_number": "1"} if i == 7 else {}))
        made["recent"].append(run_id)
        if i in (2, 8):  # recorded by the status sensor already
            record_run(instance, instance.get_run_record_by_id(run_id), engine)
    create_run_for_test(instance, job_name="morning_scrape", tags={"orchestration/kind": "racing"})
    return made


QUERIES = [{}, {"task_name": "backup"}, {"service": "docs"}, {"status": "success"}, {"status": "failed"},
           {"status": "timeout"}, {"status": "canceled"}, {"status": "pending"}, {"status": "running"},
           {"task_name": "sync", "service": "infra", "status": "success"},
           {"since": NOW - dt.timedelta(days=30), "until": NOW - dt.timedelta(days=10)},
           {"since": NOW - dt.timedelta(days=25), "task_name": "backup"}]


@pytest.mark.parametrize("caught_up", [True, False], ids=["history-caught-up", "fresh-install"])
def test_every_page_equals_the_reference(pg_instance: dg.DagsterInstance, engine: sa.Engine, caught_up: bool) -> None:
    made = build_month(pg_instance, engine)
    if not caught_up:  # as before the first backfill pass: every maintenance run is read from storage
        with engine.begin() as conn:
            conn.execute(sa.delete(store.registry_meta).where(store.registry_meta.c.key == store.RECORDED_THROUGH_KEY))
    compared = 0
    for filters in QUERIES:
        for limit in (1, 7, 100):
            query = ExecutionQuery(limit=limit, **filters)
            got = pages(pg_instance, engine, query)
            assert [i.run_id for page in got for i in page] == reference(pg_instance, engine, query), (filters, limit)
            compared += sum(len(page) for page in got)
    assert compared > 500  # real pages were compared, not empty lists
    everything = {i.run_id: i for page in pages(pg_instance, engine, ExecutionQuery(limit=100)) for i in page}
    assert len(everything) == 75
    for run_id in made["pruned"]:
        assert everything[run_id].run_pruned and everything[run_id].dagster_url is None and everything[run_id].recorded
    for run_id in set(made["old"]) - set(made["pruned"]):
        assert not everything[run_id].run_pruned and everything[run_id].dagster_url == f"{UI}/runs/{run_id}"
    live = everything[made["recent"][0]]
    assert (live.status, live.recorded, live.metadata, live.id) == ("pending", False, {}, execution_id(live.run_id))
    retry = everything[made["recent"][7]]
    assert retry.retry_count == 1 and not retry.recorded


def test_pages_have_no_gap_or_repeat_while_runs_start_end_and_get_pruned(
    pg_instance: dg.DagsterInstance, engine: sa.Engine
) -> None:
    instance = pg_instance
    made = build_month(instance, engine)
    before = reference(instance, engine, ExecutionQuery())
    query = ExecutionQuery(limit=6)
    seen: list[str] = []
    first = list_executions(instance, engine, query, UI)
    seen += [i.run_id for i in first.items]
    # Between the pages: a queued run already shown starts and ends, a running one further down ends and is
    # recorded, a recorded one further down is pruned, an unrecorded one is recorded and pruned, and a new run starts.
    shown_queued = next(r for r in made["recent"] if r in seen and instance.get_run_by_id(r).status == S.QUEUED)
    instance.report_run_failed(instance.get_run_by_id(shown_queued))
    later = [r for r in before if r not in seen]
    running = next(r for r in later if instance.get_run_by_id(r) and instance.get_run_by_id(r).status == S.STARTED)
    instance.report_run_failed(instance.get_run_by_id(running))
    record_run(instance, instance.get_run_record_by_id(running), engine)
    unrecorded = next(r for r in later if instance.get_run_by_id(r) and instance.get_run_by_id(r).status == S.SUCCESS
                      and r in made["recent"])
    record_run(instance, instance.get_run_record_by_id(unrecorded), engine)
    instance.delete_run(unrecorded)
    recorded_old = next(r for r in later if r in made["old"] and r not in made["pruned"]
                        and instance.get_run_by_id(r).status == S.SUCCESS)
    instance.delete_run(recorded_old)
    new_run = maintenance_run(instance, "backup", "infra", S.QUEUED)
    cursor = first.next_cursor
    while cursor:
        page = list_executions(instance, engine, ExecutionQuery(limit=6, cursor=cursor), UI)
        seen += [i.run_id for i in page.items]
        cursor = page.next_cursor
    assert seen == before  # every run once, in its original place; the new one is on a fresh first page
    assert new_run not in seen
    assert list_executions(instance, engine, ExecutionQuery(limit=1), UI).items[0].run_id == new_run
    items = {i.run_id: i for page in pages(instance, engine, ExecutionQuery(limit=100)) for i in page}
    assert items[running].status == "failed" and items[running].recorded
    assert items[unrecorded].run_pruned and items[recorded_old].run_pruned
