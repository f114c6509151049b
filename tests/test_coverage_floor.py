"""`make test`'s coverage (Makefile `RUN_TESTS`, `COVERAGE_FLOOR`): SlipCover over xdist workers, then the floor.

A project of two functions in tmp_path, tested side by side on two workers exactly as the Makefile runs the suite: the
report must hold the lines the workers ran (not only the controller's), and the floor check must fail under 80% and
pass over it. SlipCover's own --fail-under would delete the workers' data before its table is printed; the Makefile
checks the floor on the written report instead, and so does this.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

MODULE = '''\
def settled(status):
    if status == "Final":
        return True
    return False


def label(status):
    words = status.split()
    first = words[0]
    rest = words[1:]
    return " ".join([first.upper(), *rest])
'''


def run_under_slipcover(project: Path, tests: str) -> dict:
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "status.py").write_text(MODULE)
    (project / "tests").mkdir()
    (project / "tests" / "test_status.py").write_text(f"from pkg.status import label, settled\n\n{tests}")
    # A clean environment: this suite's own workers carry SlipCover's variables (its coverage directory among them).
    env = {"PATH": os.environ["PATH"], "HOME": str(project), "PYTHONPATH": str(project)}
    done = subprocess.run([sys.executable, "-m", "slipcover", "--source", "pkg", "--json", "--out", "coverage.json",
                           "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "tests"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((project / "coverage.json").read_text())


def floor_check(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slipcover", "--merge", "coverage.json", "--out", "/dev/null",
                           "--skip-covered", "--fail-under", "80"], cwd=project, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "HOME": str(project)}, timeout=60)


def test_the_workers_lines_are_in_the_report_and_under_the_floor_fails(tmp_path: Path) -> None:
    # Only settled("Final") runs: the `return False` line and label's body are missed.
    report = run_under_slipcover(tmp_path, 'def test_final():\n    assert settled("Final")\n')
    status = report["files"]["pkg/status.py"]
    assert status["missing_lines"] == [4, 8, 9, 10, 11], status
    assert {1, 2, 3, 7} <= set(status["executed_lines"]), status
    done = floor_check(tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pkg/status.py" in done.stdout


def test_a_report_over_the_floor_passes(tmp_path: Path) -> None:
    report = run_under_slipcover(tmp_path, (
        'def test_final():\n    assert settled("Final") and not settled("Interim")\n\n\n'
        'def test_label():\n    assert label("race one") == "RACE one"\n'))
    assert report["files"]["pkg/status.py"]["missing_lines"] == []
    done = floor_check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
