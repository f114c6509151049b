"""bench/daemon_memory.py's readings and arithmetic: what it reports of Dagster's own growth must be right before an
hour is spent on one."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("daemon_memory", REPO_ROOT / "bench" / "daemon_memory.py")
daemon_memory = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = daemon_memory
spec.loader.exec_module(daemon_memory)

SMAPS_ROLLUP = """\
55d1c8a4e000-7ffd5a7f2000 ---p 00000000 00:00 0                          [rollup]
Rss:               98304 kB
Pss:               81234 kB
Pss_Anon:          70000 kB
Pss_File:          11234 kB
Pss_Shmem:             0 kB
Shared_Clean:      20000 kB
"""


def test_pss_comes_from_the_pss_line_not_its_anon_or_file_parts() -> None:
    assert daemon_memory.pss_kib_from_smaps_rollup(SMAPS_ROLLUP) == 81234


def test_a_rollup_without_pss_is_refused() -> None:
    with pytest.raises(ValueError, match="no Pss line"):
        daemon_memory.pss_kib_from_smaps_rollup("Rss:  100 kB\nPss_Anon:  50 kB\n")


def test_the_pss_of_this_process_is_read_from_proc() -> None:
    text = Path(f"/proc/{os.getpid()}/smaps_rollup").read_text()
    assert daemon_memory.pss_kib_from_smaps_rollup(text) > 1024  # a Python interpreter with pytest: over 1 MiB


@pytest.mark.parametrize(("stat", "ppid"), [
    ("4242 (python3) S 17 4242 17 0 -1", 17),
    ("4243 (dagster (grpc) x) S 4242 4243 17 0 -1", 4242),  # a name with spaces and parentheses
])
def test_the_parent_pid_is_read_after_the_last_parenthesis(stat, ppid) -> None:
    assert daemon_memory.ppid_from_stat(stat) == ppid


def test_the_parent_pid_of_this_process_is_read_from_proc() -> None:
    assert daemon_memory.ppid_from_stat(Path(f"/proc/{os.getpid()}/stat").read_text()) == os.getppid()


def test_each_tree_is_summed_and_run_workers_are_counted_apart() -> None:
    parents = {1: 0, 10: 1, 11: 10, 20: 1, 21: 20, 22: 21, 23: 22, 24: 21, 25: 21, 26: 25, 30: 1}
    cmdlines = {
        10: ["/venv/bin/dagster-daemon", "run", "-w", "workspace.yaml"],
        11: ["/venv/bin/python", "-m", "dagster", "api", "execute_run", "{}"],  # launched under the daemon
        20: ["/venv/bin/dagster", "code-server", "start", "-p", "4000"],
        21: ["/venv/bin/python", "-m", "dagster", "api", "grpc", "--lazy-load-user-code"],
        # a run the gRPC server started (spawn child), and a step of that run
        22: ["/venv/bin/python", "-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=12, "
             "pipe_handle=18)", "--multiprocessing-fork"],
        23: ["/venv/bin/python", "-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"],
        24: ["/venv/bin/python", "-B", "-c", "from multiprocessing.resource_tracker import main;main(11)"],
        25: ["/venv/bin/python", "-m", "dagster", "api", "execute_run", "{}"],
        26: ["/bin/sh", "-c", "true"],  # a child of a run worker
        30: ["/bin/sleep", "5"],  # not ours
    }
    assert daemon_memory.classify_tree({"daemon": 10, "code-server": 20}, parents, cmdlines) == {
        10: "daemon", 11: "run-workers", 20: "code-server", 21: "code-server", 22: "run-workers", 23: "run-workers",
        24: "code-server", 25: "run-workers", 26: "run-workers"}


def test_a_root_that_has_exited_contributes_nothing() -> None:
    assert daemon_memory.classify_tree({"daemon": 99}, {1: 0}, {1: ["init"]}) == {}


@pytest.mark.parametrize(("points", "slope"), [
    ([(0.0, 100.0), (1.0, 103.0), (2.0, 106.0)], 3.0),
    ([(0.0, 100.0), (1.0, 110.0), (2.0, 100.0)], 0.0),
    ([(0.0, 1.0), (1.0, 2.0), (2.0, 2.0), (3.0, 5.0)], 1.2),  # sums: 6/5 by hand
    ([(1.0, 5.0), (1.0, 9.0)], None),  # one instant: no slope
    ([], None),
])
def test_slope_is_least_squares_per_hour(points, slope) -> None:
    result = daemon_memory.slope_per_hour(points)
    assert result == (pytest.approx(slope) if slope is not None else None)


def sample(minute: float, daemon: float, code: float, runs: dict | None = None) -> dict:
    return {"t": 1_000_000 + minute * 60, "pss_mib": {"daemon": daemon, "code-server": code, "run-workers": 0.0},
            "runs": runs or {}}


def test_the_warmup_is_left_out_and_thirty_days_projects_the_last_value_at_the_slope() -> None:
    samples = [sample(0, 50, 100), sample(10, 90, 190),  # the warm-up's climb
               sample(20, 100, 200), sample(50, 101, 205), sample(80, 102, 210)]
    report = daemon_memory.summarize(samples, warmup_minutes=20)
    assert report["daemon"] == {"samples": 3, "hours": 1.0, "first": 100.0, "last": 102.0, "per_hour": 2.0,
                                "in_30_days": 102.0 + 2.0 * 24 * 30}
    assert report["code-server"]["per_hour"] == 10.0
    assert report["code-server"]["in_30_days"] == 210.0 + 10.0 * 720
    assert report["duration_hours"] == pytest.approx(80 / 60, abs=0.01)


def test_a_run_stopped_within_the_warmup_reports_no_trend() -> None:
    report = daemon_memory.summarize([sample(0, 50, 100), sample(5, 60, 120)], warmup_minutes=20)
    assert report["daemon"] == {"samples": 0}
    assert "no trend" in daemon_memory.format_report(report)


def test_no_samples_at_all_still_reports() -> None:
    report = daemon_memory.summarize([], warmup_minutes=20)
    assert report["samples"] == 0 and report["daemon"] == {"samples": 0}
    assert daemon_memory.format_report(report).startswith("0 samples")


def test_runs_per_hour_count_the_runs_recorded_between_first_and_last_sample() -> None:
    samples = [sample(0, 1, 1, {"SUCCESS": 10}), sample(30, 1, 1, {"SUCCESS": 60, "FAILURE": 1}),
               sample(60, 1, 1, {"SUCCESS": 128, "FAILURE": 2})]
    report = daemon_memory.summarize(samples, warmup_minutes=20)
    assert report["runs_per_hour"] == 120.0
    assert report["runs"] == {"SUCCESS": 128, "FAILURE": 2}


def test_the_report_line_shows_first_last_slope_and_projection() -> None:
    samples = [sample(20, 100, 200), sample(80, 102, 210)]
    text = daemon_memory.format_report(daemon_memory.summarize(samples, warmup_minutes=0))
    daemon_line = next(line for line in text.splitlines() if line.strip().startswith("daemon"))
    assert "first   100.0 MiB" in daemon_line and "last   102.0 MiB" in daemon_line
    assert "+2.00 MiB/h" in daemon_line and "1542.0 MiB" in daemon_line


def test_the_code_location_has_nothing_from_this_project() -> None:
    code = daemon_memory.CODE_LOCATION
    for package in ("racing_orchestration", "maintenance_jobs", "orchestration_core", "control_api", "local_stack"):
        assert package not in code
    assert "minimum_interval_seconds=30" in code and 'cron_schedule="* * * * *"' in code
    source = (REPO_ROOT / "bench" / "daemon_memory.py").read_text()
    for package in ("racing_orchestration", "maintenance_jobs", "orchestration_core", "control_api", "local_stack"):
        assert f"import {package}" not in source and f"from {package}" not in source


def test_run_workers_report_the_mean_and_maximum_alive_after_the_warmup_not_a_trend() -> None:
    samples = [sample(0, 1, 1) | {"pss_mib": {"daemon": 1, "code-server": 1, "run-workers": 900.0}},
               sample(30, 1, 1) | {"pss_mib": {"daemon": 1, "code-server": 1, "run-workers": 0.0}},
               sample(40, 1, 1) | {"pss_mib": {"daemon": 1, "code-server": 1, "run-workers": 300.0}},
               sample(50, 1, 1) | {"pss_mib": {"daemon": 1, "code-server": 1, "run-workers": 120.0}}]
    report = daemon_memory.summarize(samples, warmup_minutes=20)
    assert report["run-workers"] == {"samples": 3, "mean": 140.0, "max": 300.0}
    assert "mean   140.0 MiB  max   300.0 MiB" in daemon_memory.format_report(report)


def test_the_report_can_be_printed_again_from_the_samples(tmp_path, capsys) -> None:
    rows = [sample(0, 50, 100), sample(20, 100, 200), sample(80, 102, 210)]
    path = tmp_path / "run.samples.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert daemon_memory.main(["--report", str(path), "--warmup-minutes", "20"]) == 0
    daemon_line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("daemon"))
    assert "first   100.0 MiB" in daemon_line and "+2.00 MiB/h" in daemon_line


@pytest.mark.parametrize(("rows", "expected"), [
    # Climbing, then flat within 1 MiB from 300 on.
    ([(0, 84.0), (100, 126.7), (200, 137.1), (300, 140.5), (400, 140.7), (500, 140.8)], 300),
    # Exactly 1 MiB below the last reading still counts as flat; 1.1 does not.
    ([(0, 80.0), (100, 99.0), (200, 100.0)], 100),
    ([(0, 80.0), (100, 98.9), (200, 100.0)], None),
    # Still climbing at the end: no plateau.
    ([(0, 80.0), (100, 90.0), (200, 100.0), (300, 110.0)], None),
    # Flat from the start.
    ([(0, 80.0), (100, 80.5), (200, 80.2)], 0),
    ([(0, 80.0)], None),
])
def test_the_plateau_is_where_memory_stops_moving(rows, expected) -> None:
    assert daemon_memory.plateau_from(rows) == expected
