"""The issue's "done when": after the nightly retention has pruned a month of successful maintenance runs,
`/executions` and the per-task history still show every one of them with the old fields, and the per-task view shows
each expected run of the month as ran or missed (with the dispatcher's reason where it skipped the minute).

Real parts throughout: the example executor's job executed for every night of the month on Postgres run storage, the
run status sensor and the backfill sensor recording them, the dispatcher's own catch-up after downtime, the
retention job's pruning, and the control API and the `maintenance history` CLI over HTTP and the registry.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from maintenance_jobs.cli import main as maintenance_cli
from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.dispatch import run_tags_for
from maintenance_jobs.execution_history.recorder import backfill_history
from maintenance_jobs.jobs import example_executor_job
from maintenance_jobs.registry import create_task, get_task
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.schedule import local_iso
from maintenance_jobs.seed import prepare_registry
from maintenance_jobs.sensors import dispatch_tick, record_maintenance_success
from maintenance_jobs.tags import TAG_SCHEDULED_MINUTE
from orchestration_core.audit.cleanup import prune_successful_runs
from tests.control_api.conftest import RunningApi
from tests.orchestration_core.audit.run_factory import backdate_finished_run
from tests.task_rows import task_data

pytestmark = [pytest.mark.api, pytest.mark.integration]

TZ = "Pacific/Auckland"
ZONE = ZoneInfo(TZ)
TASK = "backup_nightly"
DAYS = 30
SKIPPED_BY_DISPATCHER = 5  # the dispatcher was down that night for longer than its catch-up bound
NOT_LAUNCHED = 12  # no run and no recorded skip (e.g. the daemon was stopped by hand)


def nightly_minutes(today: dt.date) -> list[dt.datetime]:
    """03:05 Auckland time of each of the DAYS nights ending 16 days ago (all older than the 14-day retention)."""
    first = today - dt.timedelta(days=16 + DAYS - 1)
    return [dt.datetime.combine(first + dt.timedelta(days=i), dt.time(3, 5), ZONE).astimezone(dt.UTC)
            for i in range(DAYS)]


def run_night(api: RunningApi, registry: MaintenanceRegistryResource, minute: dt.datetime, message: str) -> str:
    """The dispatcher's run for `minute`, really executed, then moved back to that night (Dagster has no API to
    create a run in the past)."""
    task = get_task(registry.engine(), TASK)
    tags = run_tags_for(task, "scheduler") | {TAG_SCHEDULED_MINUTE: local_iso(minute, TZ)}
    result = example_executor_job.execute_in_process(
        run_config={"ops": {"run_example_executor": {"config": {"message": message, "delay_seconds": 0}}}},
        instance=api.instance, tags=tags)
    backdate_finished_run(api.instance, result.run_id, minute + dt.timedelta(seconds=42), duration_seconds=40)
    return result.run_id


def record_with_the_status_sensor(instance: dg.DagsterInstance, registry: MaintenanceRegistryResource,
                                  run_id: str) -> None:
    event = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_SUCCESS).records[0]
    context = dg.build_run_status_sensor_context(
        sensor_name="record_maintenance_success", dagster_event=event.event_log_entry.dagster_event,
        dagster_instance=instance, dagster_run=instance.get_run_by_id(run_id),
        resources={"maintenance_registry": registry})
    record_maintenance_success(context)


def test_a_month_of_pruned_runs_stays_on_record(api: RunningApi, capsys: pytest.CaptureFixture[str]) -> None:
    registry = MaintenanceRegistryResource(database_url=api.registry_url, timezone=TZ, max_catchup_minutes=60)
    engine = registry.engine()
    prepare_registry(api.registry_url)
    now = dt.datetime.now(dt.UTC)
    minutes = nightly_minutes(now.astimezone(ZONE).date())
    create_task(engine, task_data(TASK, minute=5, hour=3, service="infra"))
    with engine.begin() as conn:  # the task has existed since before the month (test-only back-dating)
        conn.execute(scheduled_tasks.update().where(scheduled_tasks.c.task_name == TASK)
                     .values(created_at=minutes[0] - dt.timedelta(days=20),
                             updated_at=minutes[0] - dt.timedelta(days=20)))
    task_id = get_task(engine, TASK).id

    # The night the dispatcher was down from 01:00 to 05:30: on resuming it evaluates the last 60 minutes only.
    down = minutes[SKIPPED_BY_DISPATCHER - 1]
    skipped_tick = dispatch_tick(registry, (down - dt.timedelta(hours=2, minutes=5)).isoformat(),
                                 down + dt.timedelta(hours=2, minutes=25))
    assert skipped_tick.catch_up_notice and not any(
        r.tags["maintenance/task"] == TASK for r in skipped_tick.result.run_requests)

    ran: dict[dt.datetime, str] = {}
    for night, minute in enumerate(minutes, start=1):
        if night in (SKIPPED_BY_DISPATCHER, NOT_LAUNCHED):
            continue
        ran[minute] = run_night(api, registry, minute, f"night {night}")
        if night % 2:  # half recorded by the run status sensor as the runs end ...
            record_with_the_status_sensor(api.instance, registry, ran[minute])
    # ... the rest by the backfill sensor (the status sensor missed them: a restart, a registry outage).
    report = backfill_history(api.instance, engine, now)
    assert report.caught_up and not report.failed
    assert len(report.recorded) == len(ran) - sum(1 for n in range(1, DAYS + 1)
                                                  if n % 2 and n not in (SKIPPED_BY_DISPATCHER, NOT_LAUNCHED))
    assert get_task(engine, TASK).last_status == "success"

    # The nightly retention: every run is older than 14 days; the task's latest success stays (its last-success time).
    pruned = prune_successful_runs(api.instance, 14)
    latest = ran[max(ran)]
    assert pruned.deleted == len(ran) - 1
    assert {r.run_id for r in api.instance.get_runs()} == {latest}

    with api.client() as client:
        # /executions: every night still there, newest first, with the old scheduler's fields.
        items = client.get("/executions", params={"task_name": TASK, "limit": 100}).json()
        assert [i["run_id"] for i in items] == [ran[m] for m in sorted(ran, reverse=True)]
        for item in items:
            night = minutes.index(dt.datetime.fromisoformat(item["scheduled_for"])) + 1
            assert item["id"] > 0 and item["task_id"] == task_id and item["task_name"] == TASK
            assert (item["service"], item["executor"], item["priority"]) == ("infra", "example_executor", 50)
            assert (item["status"], item["triggered_by"], item["retry_count"]) == ("success", "scheduler", 0)
            assert item["output"] == f"Example task completed: night {night} (waited 0s)"
            assert item["metadata"] == {"message": item["output"], "delay_seconds": 0.0}
            assert item["duration_seconds"] == 40.0 and item["error"] is None and item["recorded"]
            started = dt.datetime.fromisoformat(item["started_at"])
            assert started == dt.datetime.fromisoformat(item["triggered_at"]) == ran_start(minutes[night - 1])
            assert dt.datetime.fromisoformat(item["completed_at"]) - started == dt.timedelta(seconds=40)
            if item["run_id"] == latest:
                assert not item["run_pruned"] and item["dagster_url"] == f"http://dagster.test/runs/{latest}"
            else:
                assert item["run_pruned"] and item["dagster_url"] is None
        # Paged by the Link header: the same runs, no gaps, no repeats.
        paged, response = [], client.get("/executions", params={"task_name": TASK, "limit": 10})
        while True:
            paged += [i["run_id"] for i in response.json()]
            if "next" not in response.links:
                break
            response = client.get(response.links["next"]["url"])
        assert paged == [i["run_id"] for i in items]
        # A week of it by date.
        week = client.get("/executions", params={"task_name": TASK, "since": minutes[7].isoformat(),
                                                 "until": minutes[14].isoformat()}).json()
        in_week = [ran[m] for m in sorted(ran, reverse=True) if minutes[7] <= m < minutes[14]]
        assert [i["run_id"] for i in week] == in_week and len(in_week) == 6  # nights 8-14 but the 12th

        # The per-task view: each expected night of the month, ran (how it ended) or missed (why).
        since, until = minutes[0] - dt.timedelta(hours=1), minutes[-1] + dt.timedelta(hours=1)
        history = client.get(f"/tasks/{TASK}/history", params={"since": since.isoformat(),
                                                               "until": until.isoformat()}).json()
    assert history["counts"] == {"expected": DAYS, "ran": DAYS - 2, "success": DAYS - 2, "missed": 2, "running": 0,
                                 "due": 0}
    assert [dt.datetime.fromisoformat(e["scheduled_for"]) for e in history["expected_runs"]] == minutes
    for night, expected in enumerate(history["expected_runs"], start=1):
        assert dt.datetime.fromisoformat(expected["scheduled_for"]).utcoffset() in (dt.timedelta(hours=12),
                                                                                   dt.timedelta(hours=13))
        if night == SKIPPED_BY_DISPATCHER:
            assert (expected["outcome"], expected["status"], expected["executions"]) == ("missed", None, [])
            assert "skipped by the dispatcher" in expected["reason"]
            assert "MAINTENANCE_MAX_CATCHUP_MINUTES" in expected["reason"]
        elif night == NOT_LAUNCHED:
            assert expected["outcome"] == "missed" and "recorded no skip" in expected["reason"]
        else:
            assert (expected["outcome"], expected["status"], expected["attempts"]) == ("ran", "success", 1)
            assert expected["executions"][0]["run_id"] == ran[minutes[night - 1]] and expected["reason"] is None
    assert history["other_runs"] == [] and history["task_id"] == task_id

    # The same from the CLI, straight from the registry.
    assert maintenance_cli(["--database-url", api.registry_url, "history", TASK, "--since", since.isoformat(),
                            "--until", until.isoformat()]) == 0
    out = capsys.readouterr().out
    assert f"{DAYS} expected, {DAYS - 2} ran ({DAYS - 2} success), 2 missed" in out
    assert out.count("(run pruned)") == DAYS - 3 and out.count(" missed ") == 2
    assert "skipped by the dispatcher" in out


def ran_start(minute: dt.datetime) -> dt.datetime:
    return minute + dt.timedelta(seconds=2)  # backdated: ended 42 s after the minute, 40 s long
