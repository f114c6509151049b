"""The footprint bench's pure parts (bench/compose_footprint.py): parsing `docker stats`, finding the control API's
serving processes, the core total and the budget verdicts the live production test alarms on."""

from __future__ import annotations

import pytest

from bench import compose_footprint as footprint

STATS = """\
1a2b3c4d5e6f 142.3MiB / 1GiB
aaaaaaaaaaaa 1.5GiB / 2GiB
bbbbbbbbbbbb 6.1MiB / 64MiB
"""


def test_docker_stats_lines_are_matched_to_services_by_container_id() -> None:
    containers = {"webserver": "1a2b3c4d5e6f", "code-racing": "aaaaaaaaaaaa", "front": "bbbbbbbbbbbb",
                  "daemon": "cccccccccccc"}
    assert footprint.memory_by_service(STATS, containers) == {"webserver": 142.3, "code-racing": 1536.0,
                                                              "front": 6.1}


SPAWN = ["/usr/bin/python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
         "--multiprocessing-fork"]
SUPERVISOR = ["/usr/bin/python", "/usr/local/bin/maintenance-api", "--host", "0.0.0.0", "--port", "8090"]
TRACKER = ["/usr/bin/python", "-c", "from multiprocessing.resource_tracker import main;main(4)"]


@pytest.mark.parametrize(("processes", "expected"), [
    # Two workers: the spawned children serve, the supervisor and the tracker do not.
    ([(SUPERVISOR, 30.0), (TRACKER, 9.0), (SPAWN, 160.0), (SPAWN, 158.5)], [160.0, 158.5]),
    # One worker: the API's own process serves.
    ([(SUPERVISOR, 71.0)], [71.0]),
    ([(["/usr/bin/python", "-m", "control_api", "--port", "8090"], 64.0), (TRACKER, 9.0)], [64.0]),
    # A healthcheck running at that moment names the API's package but serves nothing.
    ([(["/usr/bin/python", "-m", "control_api.container_probe"], 8.9), (SUPERVISOR, 77.5)], [77.5]),
    ([(SUPERVISOR, 77.5), (["/usr/bin/python", "-m", "control_api.container_probe"], 8.9)], [77.5]),
    # Something else in the container (a shell from `docker exec`) is not the API.
    ([(["/bin/sh"], 1.0)], []),
])
def test_the_api_figure_is_each_serving_process(processes, expected) -> None:
    assert footprint.api_worker_pss(processes) == expected


def test_the_core_total_sums_the_core_services_only() -> None:
    by_service = {"front": 6.0, "webserver": 140.0, "daemon": 130.0, "code-racing": 190.0, "code-maintenance": 185.5,
                  "api": 75.0, "postgres": 110.0, "tab-sim": 80.0, "prometheus": 200.0}
    assert footprint.core_total(by_service) == 836.5


def test_a_core_service_without_a_figure_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="daemon"):
        footprint.core_total({"front": 6.0})


@pytest.mark.parametrize(("value", "verdict"), [
    (700.0, "within budget"),
    (768.0, "within budget"),   # on the budget
    (768.1, "over budget"),
    (960.0, "over budget"),     # on the alarm threshold: 768 x 1.25
    (960.1, "ALARM"),
])
def test_a_figure_is_within_over_or_alarmingly_over_its_budget(value, verdict) -> None:
    [row] = footprint.budget_rows({footprint.CORE_IDLE: value})
    assert (row.budget, row.alarm_at, row.verdict) == (768.0, 960.0, verdict)


def test_only_alarms_are_reported_and_figures_without_a_budget_are_ignored() -> None:
    rows = footprint.budget_rows({footprint.CORE_IDLE: 1000.0, footprint.API_PER_WORKER: 90.0, "tab-sim": 500.0})
    assert [row.name for row in rows] == [footprint.CORE_IDLE, footprint.API_PER_WORKER]
    assert footprint.alarms(rows) == ["core services at idle: 1000.0 MiB, budget 768.0 (alarm above 960.0)"]


def test_the_budgets_are_the_issue_s_goals() -> None:
    assert footprint.BUDGETS_MIB == {"core services at idle": 768.0, "control API per worker": 80.0,
                                     "make run at idle": 1228.8}
    assert footprint.ALARM_FACTOR == 1.25


def test_the_idle_figures_with_budgets_are_the_core_total_and_the_largest_api_worker() -> None:
    idle = {"services_mib": {"api": 250.0}, "core_services_mib": 990.0, "api_workers_pss_mib": [118.2, 119.9],
            "api_per_worker_mib": 119.9}
    assert footprint.idle_budget_figures(idle) == {"core services at idle": 990.0, "control API per worker": 119.9}
