"""What `make run` prints: the stack's own messages (its banner, the feed, the API's warnings), not the start-up
chatter of Dagster and the libraries underneath (local_stack/stack.py says which lines and how each is kept off)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local_stack.stack import DAGSTER_DEV_WARNING_FILTERS, dagster_dev_warnings
from tests.conftest import REPO_ROOT

# Each was on the console of a fresh `make run` before it was kept off.
CHATTER = [
    "XDG_RUNTIME_DIR",  # platformdirs, when the embedded Postgres' package loads
    "SupersessionWarning",  # `dagster dev` announcing `dg dev`
    "BetaWarning",
    "Found a dagster instance configuration value",  # dagster dev started beside the repository's dagster.yaml
    "Launching Dagster services",  # dagster dev's INFO lines
    "Checking for new runs for sensor",  # the daemon's INFO line per sensor evaluation
    "alembic.runtime.plugins",  # the API reading the registry's revision
    "httpx: HTTP Request",  # the API's GraphQL requests
]

# The stack as `python -m local_stack` runs it (its own embedded Postgres, children writing to the same console), on
# free ports and a folder of its own, stopped by SIGINT as Ctrl-C stops it.
DRIVER = """
import sys, time
from pathlib import Path
from local_stack.__main__ import banner
from local_stack.stack import LocalStack, StackOptions, free_port
stack = LocalStack(StackOptions(data_dir=Path(sys.argv[1]), dagster_port=free_port(), sim_port=free_port(),
                                api_port=free_port()))
try:
    stack.start()
    print(banner(stack.dagster_url, stack.sim_base_url, stack.env["RACING_EXPORT_DIR"], stack.api_url), flush=True)
    time.sleep(float(sys.argv[2]))
finally:
    stack.stop()
"""
# Long enough for every sensor's first evaluations and the automation sensor's 30 s interval to pass.
RUNNING_SECONDS = 40


@pytest.mark.unit
@pytest.mark.parametrize(("users", "expected"), [
    (None, ",".join(DAGSTER_DEV_WARNING_FILTERS)),
    ("", ",".join(DAGSTER_DEV_WARNING_FILTERS)),
    ("error::DeprecationWarning", "error::DeprecationWarning," + ",".join(DAGSTER_DEV_WARNING_FILTERS)),
])
def test_the_users_own_warning_filters_come_first(users: str | None, expected: str) -> None:
    environ = {} if users is None else {"PYTHONWARNINGS": users}
    assert dagster_dev_warnings(environ) == expected


@pytest.mark.unit
def test_the_filter_names_one_message_never_all_warnings() -> None:
    for entry in DAGSTER_DEV_WARNING_FILTERS:
        action, message, *rest = entry.split(":")
        assert action == "ignore" and len(message) > 20


@pytest.mark.integration
@pytest.mark.slow
def test_the_console_shows_the_stacks_messages_not_dagsters_chatter(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name not in {"XDG_RUNTIME_DIR", "PYTHONWARNINGS"}}
    console = tmp_path / "console.txt"
    with console.open("w") as out:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "stack"), str(RUNNING_SECONDS)],
                                  cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            driver.wait(timeout=600)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGINT)
                time.sleep(30)
                os.killpg(driver.pid, signal.SIGKILL)
    text = console.read_text()
    assert driver.returncode == 0, text[-3000:]
    assert "Local stack is up" in text and "simulated TAB feed at" in text, text[-3000:]
    shown = {marker: line for marker in CHATTER for line in text.splitlines() if marker in line}
    assert shown == {}, text[-3000:]
