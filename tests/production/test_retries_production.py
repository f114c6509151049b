"""Retries proven through the production form: the compose deployment on a real Docker engine, every run a container
of its own (DockerRunLauncher), two plug-in tasks created and watched through the control API only.

The test plug-ins (tests/maintenance_jobs/retry_plugins) are installed into the user-code image as a distribution
whose entry points (group `maintenance_jobs.executors`) name them, the way an operator adds plug-ins to the image;
they count their attempts under /backups (BACKUPS_DIR), which every run container mounts. The assertions are those
of the local-launcher test (tests/maintenance_jobs/test_retries_daemon.py), read through the REST API.

Wrap runs in `flock /tmp/docker-live.lock` on a shared host: the stack has fixed ports and names.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.e2e.live_stack import graphql_runs, tags_of, wait_for
from tests.production.compose_stack import DAGSTER_URL, REPO_ROOT, ComposeStack
from tests.production.docker_engine import engine_for_test

pytestmark = [pytest.mark.production, pytest.mark.slow, pytest.mark.integration]

IMAGE_TAG = "history-retries"
# One race two hours out, so no racing run shares the host with the retries. With the sample day's full card (the
# default), a card refresh (every 30 min from 07:00 racing time) that fell inside the test stored a day whose earlier
# races the checkpoint sensors then caught up: ~40 run containers at once, depending on the time of day.
SIM_ARGS = ("--dense-every", "1", "--dense-races", "1", "--dense-lead", "120")
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
    image = f"racing-orchestration/user-code:{IMAGE_TAG}"
    stack._run(["docker", "build", "-q", "--build-arg", f"BASE={image}", "-t", image, str(context)],  # noqa: SLF001
               env={"DOCKER_BUILDKIT": "0"}, timeout=600)


@pytest.fixture(scope="module")
def stack():
    work_dir = Path(tempfile.mkdtemp(prefix="live-retries-"))
    engine = engine_for_test(work_dir / "engine")
    live = ComposeStack(work_dir=work_dir, image_tag=IMAGE_TAG, sim_args=SIM_ARGS)
    try:
        live.write_env()
        live.remove_leftovers()
        live.build_images()
        install_test_plugins(live)
        live.up()
        live.wait_healthy()
        yield live
    finally:
        live.down()
        engine.stop()
        print(f"\nlive retries test timings (s): {live.timings}")
        shutil.rmtree(work_dir, ignore_errors=True)


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


def test_retries_with_the_docker_launcher(stack: ComposeStack) -> None:
    with stack.api() as client:
        for task in client.get("/tasks").json():  # only the two test tasks run
            if task["enabled"]:
                assert client.put(f"/tasks/{task['task_name']}", json={"enabled": False}).status_code == 200
        due = dt.datetime.now(ZONE).replace(second=0, microsecond=0) + dt.timedelta(minutes=3)
        when = {"minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month}
        for name, executor, config in (
            ("flaky_once", "fails_then_succeeds", {"state_dir": "/backups/retry-state/flaky_once", "failures": 1}),
            ("always_broken", "always_fails", {"state_dir": "/backups/retry-state/always_broken"}),
        ):
            created = client.post("/tasks", json={"task_name": name, "service": "test", "executor": executor,
                                                  "max_retries": 2, "config": config, **when})
            assert created.status_code == 201, created.text  # the API found the plug-in by its entry point
        since = due - dt.timedelta(minutes=1)
        flaky = wait_settled(client, stack, "flaky_once", since, 2)  # failed once, then succeeded
        broken = wait_settled(client, stack, "always_broken", since, 3)  # three failed attempts
        time.sleep(30)  # a further retry would be created within seconds of the last failure
        # Each attempt's status and error in the message: a failed second attempt of flaky_once (seen once, in a
        # full run at load average ~20) says there why it failed.
        assert flaky["status"] == "success" and broken["status"] == "failed", (flaky, broken)
        for name, expected, count in (("flaky_once", flaky, 2), ("always_broken", broken, 3)):
            items = client.get("/executions", params={"task_name": name, "limit": 100}).json()
            assert len(items) == count, items  # no attempt beyond max_retries
            attempts = expected["executions"]
            assert [e["run_id"] for e in attempts] == [i["run_id"] for i in reversed(items)]
            assert [(e["triggered_by"], e["retry_count"]) for e in attempts] == (
                [("scheduler", 0)] + [("retry", n) for n in range(1, count)])
            assert [e["parent_run_id"] for e in attempts[1:]] == [e["run_id"] for e in attempts[:-1]]
            assert all(dt.datetime.fromisoformat(e["scheduled_for"]) == due for e in attempts)
            assert all(e["dagster_url"] and not e["run_pruned"] for e in attempts)
            task = client.get(f"/tasks/{name}").json()
            assert (task["last_status"], task["retry_count"]) == (expected["status"], count - 1)
        assert [e["status"] for e in flaky["executions"]] == ["failed", "success"]
        assert "attempt 1 fails on purpose" in flaky["executions"][0]["error"]
        assert flaky["executions"][1]["output"] == "attempt 2 succeeded after 1 failed"
        assert flaky["executions"][1]["metadata"] == {"message": flaky["executions"][1]["output"],
                                                      "executor": "fails_then_succeeds"}
        assert [e["status"] for e in broken["executions"]] == ["failed"] * 3
        # The report a timed-out wait prints works and names every attempt.
        report = chain_report(client, stack, "always_broken", since)
        assert all(e["run_id"] in report for e in broken["executions"]), report
    # Each attempt ran in a container of its own and counted itself in the shared backups folder.
    for attempt in flaky["executions"] + broken["executions"]:
        [run] = graphql_runs(DAGSTER_URL, {"runIds": [attempt["run_id"]]})
        assert tags_of(run).get("docker/container_id"), attempt["run_id"]
    assert (stack.backups / "retry-state" / "flaky_once" / "attempts").read_text() == "2"
    assert (stack.backups / "retry-state" / "always_broken" / "attempts").read_text() == "3"

