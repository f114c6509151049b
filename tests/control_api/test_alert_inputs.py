"""The pure logic behind the alert rules' inputs: daemon liveness, code-server addresses, tick state (failed ticks in a
row, the last error, lateness), cron intervals and grace, retry limits (platform_monitoring/liveness.py,
schedulers.py, overdue.py, alert_metrics.py)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from platform_monitoring.alert_metrics import run_retry_limits, step_retry_limits
from platform_monitoring.liveness import (
    CodeServer,
    code_server_states,
    daemon_liveness,
    daemon_starting,
    parse_code_servers,
    sensor_tick_inputs,
)
from platform_monitoring.catalog import Definition, Job
from platform_monitoring.job_policies import load_policies
from platform_monitoring.job_policies_from_code import retry_window_seconds
from platform_monitoring.overdue import (
    longest_cron_gap_seconds,
    scheduled_jobs,
    slack_seconds,
    task_schedule,
)
from platform_monitoring.schedulers import tick_error_text, tick_state
from tests.control_api.job_policies import code_definitions, repositories
from maintenance_jobs.schedule import CronFields
from dagster._core.scheduler.instigation import (  # tests fabricate states and ticks: no public constructor
    InstigatorStatus,
    ScheduleInstigatorData,
    SensorInstigatorData,
    TickStatus,
)

pytestmark = pytest.mark.unit
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
REQUIRED = ("SENSOR", "SCHEDULER")


# ---- daemon liveness -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ages", "intervals", "newest", "up", "problem"),
    [
        ({"SENSOR": 10, "SCHEDULER": 29}, [15, 30], 12.0, True, None),
        # A heartbeat 95 s old: down, whatever the ticks say.
        ({"SENSOR": 10, "SCHEDULER": 95}, [15], 3.0, False, "no SCHEDULER heartbeat for 95 s"),
        ({"SENSOR": 10}, [15], 3.0, False, "no SCHEDULER heartbeat"),
        # Heartbeats still fresh (they come every 30 s) but the 15 s sensors stopped ticking 31 s ago: down.
        ({"SENSOR": 25, "SCHEDULER": 25}, [15, 60], 31.0, False, "no sensor tick for 31 s (expected every 15 s)"),
        ({"SENSOR": 25, "SCHEDULER": 25}, [15, 60], 29.0, True, None),
        # Only 60 s sensors run: their ticks may be 75 s apart.
        ({"SENSOR": 25, "SCHEDULER": 25}, [60], 70.0, True, None),
        # No running sensor has ticked (a new instance): the heartbeats decide.
        ({"SENSOR": 25, "SCHEDULER": 25}, [], None, True, None),
    ],
)
def test_daemon_liveness(ages, intervals, newest, up, problem) -> None:
    liveness = daemon_liveness(ages, REQUIRED, 90, intervals, newest)
    assert liveness.up is up
    assert (problem in liveness.problems) if problem else liveness.problems == []


@pytest.mark.parametrize(
    ("ages", "watched_for", "starting"),
    [
        # A fresh deployment: no heartbeat yet, the control API up for 4 minutes: still starting.
        ({}, 240.0, True),
        # The previous start's heartbeats (older than the watch): still starting.
        ({"SENSOR": 900.0, "SCHEDULER": 901.0}, 240.0, True),
        # One daemon beat 10 s ago, inside the watch: it started, and from now on down means down.
        ({"SENSOR": 10.0, "SCHEDULER": 901.0}, 240.0, False),
        # Five minutes (300 s, a literal: docs/alerts.md promises it) without a beat: no longer starting.
        ({}, 299.0, True),
        ({}, 300.0, False),
        ({"SENSOR": 900.0}, 301.0, False),
    ],
)
def test_daemon_starting(ages, watched_for, starting) -> None:
    assert daemon_starting(ages, watched_for) is starting


def test_sensor_tick_inputs_count_running_sensors_that_ticked() -> None:
    sensors = [(True, 1000.0, 15.0), (True, 990.0, 30.0), (False, 1010.0, 5.0), (True, None, 1.0)]
    assert sensor_tick_inputs(sensors, now=1020.0) == ([15.0, 30.0], 20.0)
    assert sensor_tick_inputs([(True, None, 15.0), (False, 1.0, 15.0)], now=5.0) == ([], None)


def test_code_server_addresses() -> None:
    assert parse_code_servers(" racing=code-racing:4000, maintenance=10.0.0.2:4001 ,") == (
        CodeServer("racing", "code-racing", 4000), CodeServer("maintenance", "10.0.0.2", 4001))
    assert parse_code_servers(None) == () and parse_code_servers("") == ()
    for bad in ("racing", "racing=code-racing", "=host:1", "racing=host:port"):
        with pytest.raises(ValueError, match="location=host:port"):
            parse_code_servers(bad)


def test_code_server_states_report_each_failure_by_class() -> None:
    def ping(server: CodeServer) -> None:
        if server.location == "down":
            raise ConnectionRefusedError("refused")

    servers = (CodeServer("up", "a", 1), CodeServer("down", "b", 2))
    assert code_server_states(servers, ping) == {"up": "ok", "down": "unreachable (ConnectionRefusedError)"}
    assert code_server_states((), ping) == {}


# ---- tick state ------------------------------------------------------------------------------------------------


def error(message: str, cause=None, cls_name: str = "Error"):
    return SimpleNamespace(message=message, cause=cause, cls_name=cls_name)


def tick(status: str, timestamp: float, consecutive: int = 0, failure_count: int = 0, err=None):
    return SimpleNamespace(status=TickStatus[status], timestamp=timestamp, consecutive_failure_count=consecutive,
                           failure_count=failure_count, error=err)


SENSOR = Definition("racing_orchestration", "__repository__", "sensor", "fast_sensor", True, minimum_interval_seconds=15)
SCHEDULE = Definition("racing_orchestration", "__repository__", "schedule", "daily_schedule", True,
                      cron_schedule="0 6 * * *", timezone="Pacific/Auckland", job_name="some_job")


def sensor_state(started: float | None = None):
    return SimpleNamespace(status=InstigatorStatus.DECLARED_IN_CODE, instigator_data=SensorInstigatorData(last_sensor_start_timestamp=started))


def test_failed_ticks_in_a_row_is_daggers_count_on_the_newest_finished_tick() -> None:
    now = NOW.timestamp()
    cause = error("permission denied for table race_checkpoints\nLINE 1: SELECT ...")
    wrapped = error("Error occurred during the execution of evaluation_fn for sensor fast_sensor", cause)
    ticks = [tick("STARTED", now - 2), tick("FAILURE", now - 17, consecutive=4, err=wrapped),
             tick("FAILURE", now - 32, consecutive=3)]
    state = tick_state(SENSOR, None, ticks, NOW)
    assert (state.failed_in_a_row, state.last_error) == (4, "permission denied for table race_checkpoints")
    assert state.last_tick_at == now - 2 and state.running and state.interval_seconds == 15
    recovered = tick_state(SENSOR, None, [tick("SKIPPED", now - 2), *ticks[1:]], NOW)
    assert (recovered.failed_in_a_row, recovered.last_error) == (0, None)
    # A failed tick written before Dagster counted (no consecutive count) is one failure.
    assert tick_state(SENSOR, None, [tick("FAILURE", now, err=wrapped)], NOW).failed_in_a_row == 1


def test_tick_errors_are_scrubbed_and_truncated() -> None:
    secret = error("could not connect to postgresql://racing:s3cret@postgres:5432/racing " + "x" * 300)
    text = tick_error_text(error("wrapper", secret))
    assert "s3cret" not in text and "postgresql://***@postgres" in text and len(text) == 200
    assert tick_error_text(error("", None, cls_name="TimeoutError")) == "TimeoutError"
    assert tick_error_text(None) is None


@pytest.mark.parametrize(
    ("last_tick_ago", "started_ago", "late"),
    [
        (10, None, 0.0),  # within its 15 s
        (100, None, 85.0),  # 100 s since its last tick: 85 s past the next one
        (None, 20, 5.0),  # never ticked since the daemon started it 20 s ago
        (None, None, None),  # the daemon never recorded it: nothing to measure from
    ],
)
def test_sensor_lateness(last_tick_ago, started_ago, late) -> None:
    now = NOW.timestamp()
    stored = sensor_state(now - started_ago if started_ago is not None else None)
    ticks = [tick("SKIPPED", now - last_tick_ago)] if last_tick_ago is not None else []
    assert tick_state(SENSOR, stored, ticks, NOW).late_seconds == late


def test_schedule_lateness_from_its_cron_in_its_timezone() -> None:
    # 06:00 in Auckland on 2 December 2026 (NZDT, +13) is 17:00 UTC on 1 December.
    six = dt.datetime(2026, 12, 1, 17, 0, tzinfo=dt.UTC)
    stored = SimpleNamespace(status=InstigatorStatus.DECLARED_IN_CODE, instigator_data=ScheduleInstigatorData("0 6 * * *",
                                                                                 (six - dt.timedelta(days=3)).timestamp()))
    at = six + dt.timedelta(minutes=10)
    yesterday = [tick("SUCCESS", (six - dt.timedelta(days=1)).timestamp())]
    assert tick_state(SCHEDULE, stored, yesterday, at).late_seconds == 600.0  # today's tick is missing
    today = [tick("SUCCESS", six.timestamp()), *yesterday]
    assert tick_state(SCHEDULE, stored, today, at).late_seconds == 0.0
    # Started after today's 06:00: nothing was due yet.
    started_later = SimpleNamespace(status=InstigatorStatus.DECLARED_IN_CODE, instigator_data=ScheduleInstigatorData(
        "0 6 * * *", (six + dt.timedelta(minutes=5)).timestamp()))
    assert tick_state(SCHEDULE, started_later, [], at).late_seconds == 0.0
    assert tick_state(SCHEDULE, stored, today, at).interval_seconds == 86400


def test_a_stopped_instigator_has_no_lateness() -> None:
    stopped = SimpleNamespace(status=InstigatorStatus.STOPPED, instigator_data=SensorInstigatorData())
    state = tick_state(SENSOR, stopped, [tick("SKIPPED", NOW.timestamp() - 1000)], NOW)
    assert (state.running, state.default_running, state.late_seconds) == (False, True, None)


# ---- expected intervals and grace --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "day_or", "gap"),
    [
        ("* * * * *", True, 60),
        ("*/30 7-23 * * *", True, 7.5 * 3600),  # card_refresh's cron: overnight 23:30 -> 07:00
        ("0 6 * * *", True, 86400),
        ("0 6 * * 1", True, 7 * 86400),
        ("* 3 * * *", True, 23 * 3600 + 60),  # every minute of 03:00-03:59
        ("0 4 11 * *", False, 31 * 86400),
        ("0 0 31 * *", False, 61 * 86400),  # months without a 31st: 31 January -> 31 March
        ("0 0 29 2 *", False, (4 * 365 + 1) * 86400),  # leap days only
    ],
)
def test_longest_cron_gap(expression: str, day_or: bool, gap: float) -> None:
    assert longest_cron_gap_seconds(expression, day_or=day_or) == gap


@pytest.mark.parametrize(("interval", "slack"), [(60, 60), (1800, 450), (86400, 3600), (31 * 86400, 3600)])
def test_slack(interval: float, slack: float) -> None:
    assert slack_seconds(interval) == slack


def test_task_schedule_from_the_registry_row() -> None:
    created = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    backup = task_schedule("backup", "config_backup_executor", CronFields(minute=5, hour=3), timeout_seconds=3600,
                           max_retries=1, created_at=created)
    assert (backup.job, backup.expected_interval_seconds) == ("config_backup_executor", 86400)
    assert backup.grace_seconds == 3600 * 2 + 3600 and backup.created_at == created.timestamp()
    every_minute = task_schedule("tick", "example_executor", CronFields(), 60, 0, created)
    assert (every_minute.expected_interval_seconds, every_minute.grace_seconds) == (60, 120)
    # day_of_week 0 is Monday in the registry (cron's 1).
    monday = task_schedule("weekly", "example_executor", CronFields(minute=0, hour=4, day_of_week=0), 60, 0, created)
    assert monday.expected_interval_seconds == 7 * 86400
    plugin = task_schedule("disk", "disk_usage_executor", CronFields(minute=0), 60, 5, created)
    assert plugin.job == "plugin_executor" and plugin.max_retries == 5


def test_racing_jobs_from_their_schedules_with_their_retry_windows() -> None:
    jobs = {job.job: job for job in scheduled_jobs(code_definitions(), load_policies())}
    # The morning scrape: daily, and its 3 retries 30 minutes apart (failed or still-empty combinations) + 1 h.
    assert (jobs["morning_scrape"].expected_interval_seconds, jobs["morning_scrape"].grace_seconds) == (
        86400, 3 * 1800 + 3600)
    assert (jobs["cleanup_job_runs"].expected_interval_seconds, jobs["cleanup_job_runs"].grace_seconds) == (86400, 3600)
    # card_refresh skips once the day's last race has started: it declares two days.
    assert jobs["card_refresh"].expected_interval_seconds == 2 * 86400
    racing = dict(repositories())["racing_orchestration"]
    assert retry_window_seconds(racing.get_job("pre_race_t15")) == 60 + 120  # LINEAR 60 s


# ---- retry limits ------------------------------------------------------------------------------------------------


def test_step_retry_limits_are_each_jobs_own_policies() -> None:
    jobs = [Job(location, job) for location, names in (("racing_orchestration", ("morning_scrape", "pre_race_t15",
            "pre_race_t60", "post_race_t5")), ("maintenance_jobs", ("example_executor",))) for job in names]
    limits = step_retry_limits(jobs, load_policies())
    assert limits["morning_scrape"] == 3 and limits["pre_race_t15"] == 2 and limits["pre_race_t60"] == 2
    assert limits["post_race_t5"] == 0 and limits["example_executor"] == 0


def test_run_retry_limits_per_job_and_per_task() -> None:
    tagged, plain = Job("l", "tagged", {"dagster/max_retries": "4"}), Job("l", "plain")
    created = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    tasks = [task_schedule("five", "example_executor", CronFields(), 60, 5, created),
             task_schedule("none", "example_executor", CronFields(), 60, 0, created)]
    assert run_retry_limits([tagged, plain], 1, tasks) == {
        ("tagged", ""): 4, ("plain", ""): 1, ("example_executor", "five"): 5, ("example_executor", "none"): 0}
