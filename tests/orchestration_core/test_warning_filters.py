"""The code locations start without Dagster's known-harmless BetaWarnings (`backfill_policy` on the partitioned
assets, `owners` on the sensors Dagster builds), filtered by exact category and message: other warnings still show."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

HARMLESS = ("Parameter `backfill_policy` of function `asset` is currently in beta",
            "Parameter `owners` of initializer `SensorDefinition.__init__` is currently in beta")


@pytest.mark.parametrize("module", ["racing_orchestration.definitions", "maintenance_jobs.definitions"])
def test_a_code_location_loads_without_the_harmless_warnings_and_others_still_show(module) -> None:
    code = (f"import warnings, dagster as dg, {module} as m\n"
            "m.defs.get_repository_def().get_all_jobs()  # what a code server does: builds every sensor\n"
            "warnings.warn('another beta parameter', dg.BetaWarning)\n"
            "warnings.warn('a user warning', UserWarning)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    for message in HARMLESS:
        assert message not in done.stderr, done.stderr[-3000:]
    assert "BetaWarning: another beta parameter" in done.stderr and "UserWarning: a user warning" in done.stderr
