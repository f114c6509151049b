"""The control API's workers do not import Dagster: `import dagster` alone is over 100 MiB of each worker's memory
(BENCHMARKS.md, control API memory). They read Dagster's storage by SQL (platform_monitoring/dagster_storage.py) and
launch runs through the webserver. Checked in a fresh interpreter, as a worker starts."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT

PROBE = """
import json, sys
import control_api.app
from control_api.app import app_from_env
app_from_env()  # what a `maintenance-api --workers N` worker builds (no database is opened here)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0].startswith("dagster"))))
"""


def test_the_api_and_its_app_import_no_dagster_module() -> None:
    env = {"PATH": "/usr/bin:/bin", "MAINTENANCE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/registry",
           "DAGSTER_POSTGRES_URL": "postgresql://nobody@127.0.0.1:1/dagster",
           "SCHEDULER_API_KEY": "probe-key-0123456789"}
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert imported == [], f"the control API imports {imported[:10]}"


def test_the_probe_sees_dagster_when_it_is_imported() -> None:
    """The check above can fail: the same probe reports Dagster once something imports it."""
    probe = "import dagster\n" + PROBE
    env = {"PATH": "/usr/bin:/bin", "MAINTENANCE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/registry",
           "SCHEDULER_API_KEY": "probe-key-0123456789"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dagster" in json.loads(result.stdout.strip().splitlines()[-1])
