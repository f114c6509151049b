"""bench/suite_host.py: what the host gave a `make test` run, printed last so that a CI log's tail shows it."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

sys.path.insert(0, str(REPO_ROOT / "bench"))  # suite_host imports suite_times beside it, as when run as a script
spec = importlib.util.spec_from_file_location("suite_host", REPO_ROOT / "bench" / "suite_host.py")
suite_host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_host)

# /proc/stat's first line: user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s.
STAT = "cpu  1000 200 300 4000 50 10 40 70 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def test_the_cpu_line_is_read_by_state() -> None:
    assert suite_host.cpu_seconds(STAT, 100) == {"user": 10.0, "nice": 2.0, "system": 3.0, "idle": 40.0,
                                                 "iowait": 0.5, "irq": 0.1, "softirq": 0.4, "steal": 0.7}


def test_a_runs_share_is_the_difference_busy_idle_and_stolen() -> None:
    start = suite_host.cpu_seconds(STAT, 100)
    end = dict(start, user=110.0, system=23.0, idle=60.0, iowait=1.5, steal=5.7)
    assert suite_host.cpu_share(start, end) == pytest.approx({"busy": 120.0, "idle": 21.0, "steal": 5.0})


@pytest.mark.parametrize(
    ("cgroup_text", "expected"),
    [
        ("9:name=systemd:/\n4:memory:/process_api/f6f3\n2:cpuacct:/\n1:cpu:/\n0::/\n", "/"),  # this machine
        ("4:memory:/x\n2:cpu,cpuacct:/ci/job-1\n0::/\n", "/ci/job-1"),  # a CI runner's child cgroup (v1)
        ("0::/user.slice/session-3.scope\n", "/user.slice/session-3.scope"),  # cgroup v2 only
    ],
)
def test_the_cpu_cgroup_is_found_in_either_hierarchy(cgroup_text: str, expected: str) -> None:
    assert suite_host.cpu_cgroup(cgroup_text) == expected


@pytest.mark.parametrize(
    ("cgroup_text", "switch", "says"),
    [
        ("1:cpu:/\n", "1\n", "autogroups apply"),
        ("1:cpu:/ci\n", "1\n", "autogroups do not apply"),  # the kernel's autogroups are for the root cgroup only
        ("1:cpu:/\n", "0\n", "autogroups do not apply"),
        # pytest moved into a cgroup of its own (tests/suite_cgroup.py): the report, run after it, is back in the root
        ("1:cpu:/\n", "1\n", "its own; started in /) (autogroups do not apply"),
    ],
)
def test_the_report_says_whether_sessions_are_weighed(cgroup_text: str, switch: str, says: str) -> None:
    start = {"at": 1000.0, "cpu": {"user": 0.0, "idle": 0.0, "steal": 0.0}, "load": 1.0}
    end = {"at": 1600.0, "cpu": {"user": 1100.0, "idle": 80.0, "steal": 20.0}, "load": 9.5}
    workers = [("gw1", 560.0, 590.0, "tests/test_settings.py", 12)]
    own = "/pytest-suite-7" if "its own" in says else None
    lines = suite_host.report_lines(start, end, cgroup_text, switch, workers, [("tests/slow.py", 400.0)], own)
    assert f"({says})" in lines[0] and "load 1.0 at the start, 9.5 at the end" in lines[0]
    assert lines[1:] == ["suite host: 600 s: 1100 CPU-s busy, 80 idle, 20 stolen by the hypervisor",
                         "suite host: longest files tests/slow.py 400 s",
                         "suite host: gw1 ended 590 s after the first test, 560 s busy, 12 files, "
                         "last tests/test_settings.py"]


def test_the_script_reports_after_a_snapshot_and_never_fails_the_build(tmp_path) -> None:
    script = [sys.executable, str(REPO_ROOT / "bench" / "suite_host.py")]
    start = tmp_path / "host-start.json"
    assert subprocess.run([*script, "snapshot", str(start)], check=True).returncode == 0
    assert set(json.loads(start.read_text())) == {"at", "cpu", "load"}
    stale = tmp_path / "junit.xml"  # left by an earlier run: older than the snapshot, so not read
    stale.write_text("not xml")
    os.utime(stale, (0, 0))
    out = subprocess.run([*script, "report", str(start), str(stale)], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("suite host: uid ") and "CPU-s busy" in out.stdout
    missing = subprocess.run([*script, "report", str(tmp_path / "none.json")], capture_output=True, text=True)
    assert missing.returncode == 0 and missing.stdout.startswith("suite host: no report")


@pytest.mark.parametrize("newer", [True, False])
def test_the_report_reads_the_suites_own_cgroup_only_when_this_run_wrote_it(tmp_path, capsys, newer: bool) -> None:
    import os

    start = tmp_path / "host-start.json"
    assert suite_host.main(["snapshot", str(start)]) == 0
    record = tmp_path / suite_host.SUITE_CGROUP_RECORD
    record.write_text("/pytest-suite-42\n")
    if not newer:  # left by an earlier run
        os.utime(record, (0, 0))
    assert suite_host.main(["report", str(start)]) == 0
    assert ("cpu cgroup /pytest-suite-42 (its own;" in capsys.readouterr().out) is newer
