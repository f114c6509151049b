"""bench/soak.py's arithmetic and readings: what a soak reports must be right before hours are spent on one."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("soak", REPO_ROOT / "bench" / "soak.py")
soak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(soak)


@pytest.mark.parametrize(("cmdline", "service"), [
    (["/venv/bin/python", "-m", "dagster", "api", "execute_run", '{"__class__": "ExecuteRunArgs"}'], "run-workers"),
    (["/venv/bin/python", "-m", "dagster._daemon", "run", "--log-level", "warning"], "daemon"),
    (["/venv/bin/dagster-daemon", "run", "-w", "workspace.yaml"], "daemon"),
    (["/venv/bin/python", "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", "3000"], "webserver"),
    (["/venv/bin/python", "-m", "dagster", "api", "grpc", "--module-name", "racing_orchestration.definitions"],
     "code-racing"),
    (["/venv/bin/python", "-m", "dagster", "code-server", "start", "-m", "maintenance_jobs.definitions"],
     "code-maintenance"),
    (["/venv/bin/python", "-m", "control_api", "--host", "127.0.0.1", "--port", "8090"], "api"),
    (["/venv/bin/python", "-m", "racing_orchestration.cli", "sim", "--host", "127.0.0.1"], "feed"),
    (["/venv/bin/python", "-m", "dagster", "dev", "-w", "workspace.yaml"], "dagster-dev"),
    (["/usr/lib/pgserver/bin/postgres", "-D", "/data/pgdata"], "postgres"),
    (["postgres: checkpointer "], "postgres"),
    (["/bin/sleep", "5"], "other"),
])
def test_each_local_process_is_counted_under_its_service(cmdline, service) -> None:
    assert soak.classify_local_process(cmdline) == service


@pytest.mark.parametrize(("usage", "mib"), [
    ("123.4MiB / 1GiB", 123.4), ("1.5GiB / 2GiB", 1536.0), ("512KiB / 1GiB", 0.5), ("0B / 0B", 0.0),
])
def test_docker_stats_memory_reads_as_mib(usage, mib) -> None:
    assert soak.docker_memory_mib(usage) == pytest.approx(mib)


def test_a_docker_figure_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a docker memory figure"):
        soak.docker_memory_mib("--")


def test_pss_comes_from_the_pss_line_in_mib() -> None:
    text = "00400000-7ffd [rollup]\nRss:              204800 kB\nPss:              102400 kB\nShared_Clean: 1 kB\n"
    assert soak.pss_mib_from_smaps_rollup(text) == 100.0


def test_the_pss_of_this_process_is_read_from_proc() -> None:
    assert 1 < soak.read_pss_mib(os.getpid()) < 4096
    assert soak.read_pss_mib(2**22 + 7) == 0.0  # a pid that is gone counts nothing


@pytest.mark.parametrize(("points", "slope"), [
    ([(0, 100), (1, 102), (2, 104)], 2.0),
    ([(0, 100), (0.5, 100), (4, 100)], 0.0),
    ([(0, 10), (1, 8), (2, 6), (3, 4)], -2.0),
    ([(1, 5), (1, 7)], None),  # one moment: no slope
    ([], None),
])
def test_slope_is_least_squares_per_hour(points, slope) -> None:
    assert soak.slope_per_hour(points) == (pytest.approx(slope) if slope is not None else None)


def samples_every_10_minutes(values: dict[str, list[float]], runs: list[dict] | None = None) -> list[dict]:
    count = len(next(iter(values.values())))
    out = []
    for i in range(count):
        sample = {"t": 1_000_000 + i * 600, "pss_mib": {name: vals[i] for name, vals in values.items()}}
        if runs:
            sample["runs"] = runs[i]
        out.append(sample)
    return out


def test_the_warmup_is_left_out_of_the_slope() -> None:
    # 10 MiB a sample for the first 20 minutes (warm-up), then 1 MiB an hour: the slope is 1, not the warm-up's.
    daemon = [100, 110, 120, *[120 + (i * 10) / 60 for i in range(1, 25)]]
    report = soak.summarize(samples_every_10_minutes({"daemon": daemon}))
    assert report["pss_mib"]["daemon"]["per_hour"] == pytest.approx(1.0)
    assert report["pss_mib"]["daemon"]["first"] == 120.0
    assert report["memory_goal"]["daemon"]["within_goal"] is True


@pytest.mark.parametrize(("per_hour", "within"), [(2.0, True), (2.01, False), (-0.5, True)])
def test_the_goal_is_two_mib_an_hour_inclusive(per_hour, within) -> None:
    values = [200 + per_hour * i / 6 for i in range(30)]
    report = soak.summarize(samples_every_10_minutes({"code-racing": values}))
    assert report["memory_goal"]["code-racing"]["within_goal"] is within


def test_thirty_days_projects_the_last_value_at_the_slope() -> None:
    values = [300 + 3 * i / 6 for i in range(30)]  # 3 MiB/h, last value 300 + 3 * 29/6 = 314.5
    trend = soak.summarize(samples_every_10_minutes({"api": values}))["pss_mib"]["api"]
    assert trend["last"] == 314.5
    assert trend["in_30_days"] == pytest.approx(314.5 + 3 * 24 * 30, abs=0.1)


def test_run_workers_are_not_held_to_the_memory_goal() -> None:
    report = soak.summarize(samples_every_10_minutes({"run-workers": [0, 500, 0, 900, 100, 700]}))
    assert "run-workers" not in report["memory_goal"]


def test_runs_per_day_and_failed_share_count_only_after_the_warmup() -> None:
    runs = [{"SUCCESS": 1000, "FAILURE": 50}] * 2 + [{"SUCCESS": 2000 + 100 * i, "FAILURE": 100 + i} for i in range(10)]
    report = soak.summarize(samples_every_10_minutes({"daemon": [100] * 12}, runs))
    # After the warm-up (from the third sample): 9 intervals of 10 min (1.5 h), 909 runs, 9 of them failed.
    assert report["runs"] == {"per_day": round(909 / (1.5 / 24)), "failed_share": round(9 / 909, 4)}


def test_compose_figures_come_from_docker_stats_when_present() -> None:
    samples = samples_every_10_minutes({"daemon": [100] * 12})
    for i, sample in enumerate(samples):
        sample["docker_mib"] = {"daemon": 150 + 12 * i / 6}
    report = soak.summarize(samples)
    assert report["memory_goal"]["daemon"]["per_hour"] == pytest.approx(12.0)


@pytest.mark.parametrize("pair", ["NOEQUALS", "lower=1", "=1", "A-B=1"])
def test_a_malformed_env_setting_is_refused(pair) -> None:
    with pytest.raises(ValueError, match="NAME=VALUE"):
        soak.env_assignments([pair])


def test_env_settings_keep_their_values_whole() -> None:
    assert soak.env_assignments(["DAEMON_RESTART_ABOVE_MIB=150", "X_Y=a=b"]) == {
        "DAEMON_RESTART_ABOVE_MIB": "150", "X_Y": "a=b"}


@pytest.mark.parametrize(("hours", "races"), [(4, 330), (0.5, 120)])
def test_the_dense_feed_races_a_minute_through_the_whole_soak(hours, races) -> None:
    args = soak.dense_sim_args(hours)
    assert args[args.index("--dense-every") + 1] == "1"
    assert int(args[args.index("--dense-races") + 1]) == races


def test_the_folder_size_counts_every_file_below(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_bytes(b"x" * 2**20)
    (tmp_path / "two").write_bytes(b"x" * 2**19)
    assert soak.folder_mib(tmp_path) == 1.5
    assert soak.folder_mib(tmp_path / "missing") == 0.0


def test_the_report_of_a_finished_soak_prints_its_figures(tmp_path) -> None:
    out = tmp_path / "local"
    out.mkdir()
    samples = samples_every_10_minutes({"daemon": [100 + i / 6 for i in range(30)]})
    (out / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples)
                                       + json.dumps({"t": 1, "sample_error": "busy"}) + "\n")
    (out / "meta.json").write_text(json.dumps({"form": "local", "ledger": {"not_ended_after_30_min": 0}}))
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "soak.py"), "--report", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [daemon_line] = [line for line in done.stdout.splitlines() if line.startswith("daemon ")]
    assert daemon_line.split()[3] == "1.0" and daemon_line.endswith("ok")
    assert "not_ended_after_30_min': 0" in done.stdout


def test_a_soak_without_form_or_out_is_refused() -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "soak.py"), "--hours", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--form and --out are required" in done.stderr


def test_a_process_its_command_line_does_not_name_belongs_to_its_nearest_named_ancestor() -> None:
    grpc = ["python", "-m", "dagster", "api", "grpc", "--module-name", "racing_orchestration.definitions"]
    cmdlines = {10: ["python", "-m", "dagster", "dev"], 11: grpc,
                12: ["python", "-c", "from multiprocessing.resource_tracker import main;main(12)"],
                13: ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=13)"],
                14: ["/bin/sh", "-c", "true"], 20: ["/bin/sh"]}
    parents = {11: 10, 12: 11, 13: 11, 14: 13, 10: 1, 20: 1}
    assert soak.services_of(cmdlines, parents) == {10: "dagster-dev", 11: "code-racing", 12: "code-racing",
                                                   13: "run-workers", 14: "run-workers", 20: "other"}


SS_TEXT = """Netid State Recv-Q Send-Q Local Address:Port Peer Address:Port Process
u_str ESTAB 0 0 /d/pgdata/.s.PGSQL.5432 13889 * 13888 users:(("postgres",pid=8065,fd=8))
u_str ESTAB 0 0 * 13888 * 13889 users:(("python",pid=700,fd=12))
u_str ESTAB 0 0 /d/pgdata/.s.PGSQL.5432 11860 * 11859 users:(("postgres",pid=7194,fd=8))
u_str ESTAB 0 0 * 11859 * 11860 users:(("python",pid=701,fd=9))
u_str ESTAB 0 0 /d/pgdata/.s.PGSQL.5432 11870 * 11869 users:(("postgres",pid=7195,fd=8))
u_str ESTAB 0 0 /run/other.sock 500 * 501 users:(("x",pid=9,fd=3))
u_str ESTAB 0 0 * 501 * 500 users:(("y",pid=10,fd=3))
"""


def test_each_postgres_connection_is_traced_to_its_clients_pid() -> None:
    # The third server end's client is gone from the listing (it closed meanwhile): not counted, not guessed.
    assert soak.unix_socket_clients(SS_TEXT, "/d/pgdata/.s.PGSQL.") == [700, 701]


def test_the_compose_sampler_finds_each_long_running_services_container() -> None:
    ps = "a1b2c3 daemon\nd4e5f6 postgres\n0a0b0c migrate\n778899 \nffeedd webserver\n"
    assert soak.long_running_containers(ps, ("daemon", "postgres", "webserver")) == {
        "daemon": "a1b2c3", "postgres": "d4e5f6", "webserver": "ffeedd"}
    # What `docker ps -q` prints (ids alone) matches no service: the format must name the service label.
    assert soak.long_running_containers("a1b2c3\nd4e5f6\n", ("daemon",)) == {}
    assert "com.docker.compose.service" in soak.CONTAINER_FORMAT


def test_guard_restarts_are_counted_by_the_name_each_guard_watches() -> None:
    log = ("memory-guard: dagster-daemon: restart above 384 MiB of tree PSS, read every 30 s\n"
           "memory-guard: dagster-daemon restarting: tree PSS 402 MiB above 384 MiB (restart 1)\n"
           "memory-guard: pid 604 still running 60 s after SIGTERM: SIGKILL\n"
           "memory-guard: code-racing restarting: tree PSS 530 MiB above 512 MiB (restart 1)\n"
           "memory-guard: dagster-daemon restarting: tree PSS 399 MiB above 384 MiB (restart 2)\n"
           "a run log quoting memory-guard: x restarting: is not a restart\n")
    assert soak.guard_restarts(log) == {"dagster-daemon": 2, "code-racing": 1}


@pytest.mark.parametrize(("stdout", "stderr", "code", "expected"), [
    ('{"day": "2026-12-06", "checked": 5, "mismatches": []}', "", 0,
     {"day": "2026-12-06", "checked": 5, "mismatches": []}),
    ("", "racing: error: invalid choice: 'verify-checks'", 2,
     {"error": "racing: error: invalid choice: 'verify-checks'", "exit": 2}),
])
def test_verify_checks_answer_or_what_was_said_instead(stdout, stderr, code, expected) -> None:
    done = subprocess.CompletedProcess(["racing"], code, stdout=stdout, stderr=stderr)
    assert soak.verify_checks(done) == expected


def test_a_spawned_worker_of_the_control_api_counts_as_the_api_and_one_of_a_code_server_as_a_run_worker() -> None:
    # `maintenance-api --workers 2` serves from multiprocessing spawn children of its supervisor, as the code servers
    # start each run: only the code servers' are run workers.
    spawn = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
             "--multiprocessing-fork"]
    cmdlines = {30: ["python", "-m", "control_api", "--workers", "2"], 31: spawn, 32: spawn,
                40: ["python", "-m", "dagster", "api", "grpc", "--module-name", "maintenance_jobs.definitions"],
                41: spawn, 50: spawn}
    parents = {30: 1, 31: 30, 32: 30, 40: 1, 41: 40, 50: 1}
    assert soak.services_of(cmdlines, parents) == {30: "api", 31: "api", 32: "api", 40: "code-maintenance",
                                                   41: "run-workers", 50: "run-workers"}


@pytest.mark.parametrize(("points", "per_hour", "late_per_hour"), [
    # A cache filling to its bound: +8 MiB in the first half hour after the warm-up, flat for the next 3.5 hours.
    # numpy.polyfit over the same points: 0.837 MiB/h.
    ([(0.5 + i / 6, 200 + min(i, 3) * 8 / 3) for i in range(25)], 0.84, 0.0),
    # A leak: the same slope all the way.
    ([(0.5 + i / 6, 200 + 3 * i / 6) for i in range(25)], 3.0, 3.0),
])
def test_the_later_half_s_slope_tells_a_filling_cache_from_a_leak(points, per_hour, late_per_hour) -> None:
    report = soak.trend(points, warmup_hours=1 / 3)
    assert (report["per_hour"], report["late_per_hour"]) == (per_hour, late_per_hour)
