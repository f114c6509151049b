"""bench/suite_times.py: each worker's timeline from the JUnit report's per-test properties (tests/conftest.py)."""

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("suite_times", REPO_ROOT / "bench" / "suite_times.py")
suite_times = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = suite_times  # its dataclasses look their module up there while it loads
spec.loader.exec_module(suite_times)


def test_the_worker_that_ended_last_comes_first_with_its_last_file() -> None:
    cases = [  # (worker, file, seconds, ended_at)
        ("gw0", "tests/a.py", 10.0, 1010.0),  # the first test began at 1000
        ("gw0", "tests/b.py", 30.0, 1100.0),
        ("gw1", "tests/c.py", 50.0, 1060.0),
        ("gw1", "tests/c.py", 5.0, 1070.0),
    ]
    assert suite_times.worker_timelines(cases) == [("gw0", 40.0, 100.0, "tests/b.py", 2),
                                                   ("gw1", 55.0, 70.0, "tests/c.py", 1)]
    assert suite_times.worker_timelines([]) == []


def test_the_report_the_suite_writes_has_each_tests_worker_and_end(tmp_path) -> None:
    (tmp_path / "test_two.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    report = tmp_path / "junit.xml"
    # The suite's conftest as a plugin, on two tests of a folder of their own.
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          f"--rootdir={tmp_path}", f"--junitxml={report}", str(tmp_path / "test_two.py")],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                         # Not an xdist worker's environment, which names the worker running this test.
                         env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")})
    assert run.returncode == 0, run.stdout + run.stderr
    printed = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "suite_times.py"), str(report)],
                             capture_output=True, text=True, timeout=60).stdout
    assert "| main | " in printed and "test_two.py" in printed, printed
