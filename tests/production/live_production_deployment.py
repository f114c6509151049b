"""The live production test's deployment (tests/production/test_live_production.py), and bringing it up ahead.

The two compose deployments run one after the other on the engine worker (tests/conftest.py), and that worker is the
suite's wall time. The alert test's faults are mostly waiting on Prometheus and Alertmanager (~450 s at a load of
~1), so while they run, the alert test starts this deployment's preparation in a thread (`start_ahead`): images,
`up` of everything but the simulated feed, healthy, then the tasks the module creates first (the retry chains and a
task due the coming minute), whose minutes then pass during the faults too. The live production module takes it over
(`take_ahead`) or, run without the alert test, prepares it itself the same way. The feed starts with the module
either way: its dense card is timed from its own start, and the module's steps from the card.

Started only when the session will run the live production module (so `pytest tests/production/test_live_alerts.py`
alone never brings it up), and removed at the session's end if the module never took it (an interrupted session).
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.production.compose_stack import LONG_RUNNING, SERVICES, ComposeStack
from tests.production.docker_engine import DockerEngine, engine_for_test
from tests.production.retry_chains import create_retry_tasks, install_test_plugins

MODULE = "tests/production/test_live_production.py"
# Dense mode: three races a minute apart, the first 15.5 minutes after the feed starts (with the module), so their
# T-15s fall due 30, 90 and 150 s in. /events answers after 7 s, so a checkpoint run is mid-request long enough to
# be killed there.
SIM_ARGS = ("--dense-every", "1", "--dense-races", "3", "--dense-lead", "15.5", "--events-latency-ms", "7000")
FEED = "tab-sim"
MAINTENANCE_TZ = ZoneInfo("Pacific/Auckland")
DUE_TASK = "live_due"


def example_task(name: str, message: str, **fields) -> dict:
    return {"task_name": name, "service": "live", "executor": "example_executor", "priority": 10,
            "config": {"message": message, "delay_seconds": 1}, **fields}


def next_minute_cron() -> dict:
    """Cron fields of the coming minute in the tasks' timezone: a task the dispatcher runs once, soon."""
    due = (dt.datetime.now(MAINTENANCE_TZ) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    return {"minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month, "day_of_week": -1}


@dataclass
class Deployment:
    """The deployment, the engine it runs on, and what its preparation created."""

    stack: ComposeStack
    engine: DockerEngine
    retry_due: dt.datetime | None = None  # the retry tasks' due time
    due_task: str | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    taken: bool = False

    def wait_prepared(self) -> None:
        """Until the preparation has ended; its error, if it failed."""
        if self.thread is not None:
            waited = time.monotonic()
            self.thread.join()
            self.stack.timings["waited for the preparation ahead"] = round(time.monotonic() - waited, 1)
        if self.error is not None:
            raise self.error


def new_deployment() -> Deployment:
    # An image tag of its own: the retry test's plug-ins go on top of this user-code image, not the alert test's.
    work_dir = Path(tempfile.mkdtemp(prefix="live-production-"))
    engine = engine_for_test()
    return Deployment(ComposeStack(work_dir=work_dir, image_tag="live-production", sim_args=SIM_ARGS), engine)


def prepare(deployment: Deployment) -> None:
    """Everything but the feed up and healthy, then the module's first tasks created (in this order: the retry tasks
    disable what is enabled before them)."""
    live = deployment.stack
    live.write_env()
    live.remove_leftovers()  # a deployment an interrupted run left behind
    live.build_images()
    install_test_plugins(live)  # the retry test's plug-ins, on top of the user-code image
    (live.backup_sources / "compose").mkdir()
    (live.backup_sources / "compose" / "app.yml").write_text("services: {app: {image: example}}\n")
    (live.backup_sources / "cache").mkdir()
    (live.backup_sources / "cache" / "blob.bin").write_bytes(b"\0" * 1024)
    up_started = time.monotonic()
    live.up(tuple(s for s in SERVICES if s != FEED))
    live.wait_healthy(tuple(s for s in LONG_RUNNING if s != FEED))
    live.timings["up"] = round(time.monotonic() - up_started, 1)
    with live.api() as client:
        deployment.retry_due = create_retry_tasks(client)
        created = client.post("/tasks", json=example_task(DUE_TASK, "due", **next_minute_cron()))
        assert created.status_code == 201, created.text
    deployment.due_task = DUE_TASK


def start_feed(deployment: Deployment) -> None:
    started = time.monotonic()
    deployment.stack.up((FEED,))
    deployment.stack.wait_healthy((FEED,))
    deployment.stack.timings["feed up"] = round(time.monotonic() - started, 1)


def remove(deployment: Deployment) -> None:
    """Down (unless the module proved the removal itself), the engine released, the work folder removed."""
    try:
        if not deployment.stack.removal_verified:
            deployment.stack.down()
    finally:
        deployment.engine.stop()
        shutil.rmtree(deployment.stack.work_dir, ignore_errors=True)


def runs_module(nodeids: list[str], module: str = MODULE) -> bool:
    """Whether a session whose tests have these node ids runs `module` (a path from the repository root)."""
    return any(nodeid.split("::", 1)[0] == module for nodeid in nodeids)


_AHEAD: list[Deployment] = []  # at most one per session (process)


def start_ahead(session: pytest.Session) -> bool:
    """Start preparing the deployment in a thread, if this session will run the live production module and has not
    started it yet. Whether it was started."""
    if _AHEAD or not runs_module([item.nodeid for item in session.items]):
        return False
    deployment = new_deployment()  # the engine taken here, in the test's thread (it may skip or fail the test)
    deployment.stack.timings["prepared ahead"] = 1.0

    def run() -> None:
        try:
            prepare(deployment)
        except BaseException as exc:  # raised again in the module that takes it
            deployment.error = exc

    deployment.thread = threading.Thread(target=run, name="live-production-ahead", daemon=True)
    deployment.thread.start()
    _AHEAD.append(deployment)
    session.config.add_cleanup(_remove_untaken)
    return True


def take_ahead() -> Deployment | None:
    """The deployment started ahead (still preparing, perhaps), now the caller's to remove; None if none was."""
    if not _AHEAD or _AHEAD[0].taken:
        return None
    _AHEAD[0].taken = True
    return _AHEAD[0]


def _remove_untaken() -> None:
    for deployment in _AHEAD:
        if not deployment.taken:
            if deployment.thread is not None:
                deployment.thread.join(timeout=900)
            remove(deployment)
