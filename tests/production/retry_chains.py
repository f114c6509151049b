"""Retries proven through the production form, in the live production test's deployment
(tests/production/test_live_production.py): every attempt a container of its own (DockerRunLauncher), two plug-in
tasks created and watched through the control API only.

The test plug-ins (tests/maintenance_jobs/retry_plugins) are installed into the user-code image as a distribution
whose entry points (group `maintenance_jobs.executors`) name them, the way an operator adds plug-ins to the image;
they count their attempts under /backups (BACKUPS_DIR), which every run container mounts. The assertions are those
of the local-launcher test (tests/maintenance_jobs/test_retries_daemon.py), read through the REST API.
"""

from __future__ import annotations

import datetime as dt
import shutil
from zoneinfo import ZoneInfo

import httpx

from tests.e2e.live_stack import graphql_runs, wait_for
from tests.production.compose_stack import DAGSTER_URL, REPO_ROOT, ComposeStack

PLUGINS = REPO_ROOT / "tests" / "maintenance_jobs" / "retry_plugins"
ZONE = ZoneInfo("Pacific/Auckland")  # the compose default maintenance timezone (RACING_TIMEZONE)
ENTRY_POINTS = """[maintenance_jobs.executors]
fails_then_succeeds = retry_plugins.fails_then_succeeds
always_fails = retry_plugins.always_fails
"""
PLUGIN_DOCKERFILE = """ARG BASE
FROM ${BASE}
USER root
COPY retry_plugins /opt/test-plugins/retry_plugins
COPY maintenance_retry_plugins-0.1.dist-info /opt/test-plugins/maintenance_retry_plugins-0.1.dist-info
RUN python -c "import site; print(site.getsitepackages()[0])" | xargs -I{} sh -c 'echo /opt/test-plugins > {}/test-plugins.pth'
USER dagster
"""


def install_test_plugins(stack: ComposeStack) -> None:
    """Rebuild the user-code image with the test plug-in distribution on top (same tag: compose uses it)."""
    context = stack.work_dir / "plugin-image"
    shutil.rmtree(context, ignore_errors=True)
    shutil.copytree(PLUGINS, context / "retry_plugins", ignore=shutil.ignore_patterns("__pycache__"))
    dist_info = context / "maintenance_retry_plugins-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: maintenance-retry-plugins\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(ENTRY_POINTS)
    (context / "Dockerfile").write_text(PLUGIN_DOCKERFILE)
    image = f"racing-orchestration/user-code:{stack.image_tag}"
    stack._run(["docker", "build", "-q", "--build-arg", f"BASE={image}", "-t", image, str(context)],  # noqa: SLF001
               env={"DOCKER_BUILDKIT": "0"}, timeout=600)


def history(client: httpx.Client, task: str, since: dt.datetime) -> dict:
    response = client.get(f"/tasks/{task}/history", params={"since": since.isoformat()})
    assert response.status_code == 200, response.text
    return response.json()


def settled(client: httpx.Client, task: str, since: dt.datetime, attempts: int) -> dict | None:
    """The task's one expected run once it ran with `attempts` recorded attempts, else None."""
    view = history(client, task, since)
    runs = view["expected_runs"]
    if len(runs) == 1 and runs[0]["outcome"] == "ran" and runs[0]["attempts"] == attempts \
            and all(e["recorded"] for e in runs[0]["executions"]):
        return runs[0]
    return None


def chain_report(client: httpx.Client, stack: ComposeStack, task: str, since: dt.datetime) -> str:
    """What a timed-out wait saw, for its message: the task's expected runs with each attempt, its executions, the
    Dagster runs of its attempts and the daemon's log lines about them (a wait for always_broken's third attempt
    timed out once in a full run, load average ~20, and said only "last: None")."""
    view = history(client, task, since)
    lines = [f"expected runs of {task}: " + repr([
        {k: r.get(k) for k in ("outcome", "status", "attempts", "reason")} for r in view["expected_runs"]])]
    run_ids = []
    for run in view["expected_runs"]:
        for e in run["executions"]:
            run_ids.append(e["run_id"])
            lines.append(f"  attempt {e['run_id']}: {e['status']} triggered_by={e['triggered_by']} "
                         f"retry_count={e['retry_count']} recorded={e['recorded']} "
                         f"error={(e.get('error') or '').splitlines()[:1]}")
    items = client.get("/executions", params={"task_name": task, "limit": 100}).json()
    lines.append(f"/executions: {[(i['run_id'], i['status']) for i in items]}")
    for i in items:
        run_ids.append(i["run_id"])
    runs = graphql_runs(DAGSTER_URL, {"tags": [{"key": "maintenance/task", "value": task}]})
    chain_tags = ("retry", "parent", "relaunch", "guard")
    lines.append("dagster runs: " + repr([
        (r["runId"], r["status"], {t["key"]: t["value"] for t in r["tags"] if any(k in t["key"] for k in chain_tags)})
        for r in runs]))
    log = stack.logs("daemon", tail=400)
    lines += [line for line in log.splitlines() if any(run_id[:8] in line for run_id in set(run_ids))][-30:]
    return "\n".join(lines)


def wait_settled(client: httpx.Client, stack: ComposeStack, task: str, since: dt.datetime, attempts: int) -> dict:
    try:
        return wait_for(f"{task}: {attempts} recorded attempts", lambda: settled(client, task, since, attempts),
                        600, interval=5)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{chain_report(client, stack, task, since)}") from None


def create_retry_tasks(client: httpx.Client) -> dt.datetime:
    """The two plug-in tasks, due in the minute two minutes from now (one to two minutes away: the dispatcher launches
    every task due since its last evaluated minute, so none is missed; three minutes only made the retry test wait
    for them); every task already enabled is disabled first, so only these two and what the test creates later run.
    Returns their due time."""
    for task in client.get("/tasks").json():
        if task["enabled"]:
            assert client.put(f"/tasks/{task['task_name']}", json={"enabled": False}).status_code == 200
    due = dt.datetime.now(ZONE).replace(second=0, microsecond=0) + dt.timedelta(minutes=2)
    when = {"minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month}
    for name, executor, config in (
        ("flaky_once", "fails_then_succeeds", {"state_dir": "/backups/retry-state/flaky_once", "failures": 1}),
        ("always_broken", "always_fails", {"state_dir": "/backups/retry-state/always_broken"}),
    ):
        created = client.post("/tasks", json={"task_name": name, "service": "test", "executor": executor,
                                              "max_retries": 2, "config": config, **when})
        assert created.status_code == 201, created.text  # the API found the plug-in by its entry point
    return due
