"""A real launch of each code location's run as a Kubernetes Job: the real K8sRunLauncher, configured by the rendered
instance ConfigMap, and the real kubernetes client, against kmock's in-memory Kubernetes API on loopback (no cluster
can run here). The launch goes through a real webserver's GraphQL API, whose code server names its image as the
manifests' code server does (DAGSTER_CURRENT_IMAGE). Then the test plays the kubelet (the pod OOMKilled, the Job
failed) and Dagster's run monitoring fails the run with the reason.

Differences from the cluster, all from the test's platform: the launcher reaches the API through a kubeconfig
instead of the in-cluster token (kmock serves plain HTTP), the instance's storage is the test's Postgres, and the
webserver launches directly (DefaultRunCoordinator) instead of queueing for a daemon."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import kmock
import kubernetes
import kubernetes_validate
import pytest
import yaml
from dagster_graphql import DagsterGraphQLClient

from tests.conftest import pooled_postgres_storage
from tests.deploy.kubernetes.manifests import KUBERNETES_DIR, NAMESPACE, find, instance_config, render
from tests.deploy.kubernetes.test_manifests import NEWEST, OLDEST

pytestmark = pytest.mark.integration

OBJECTS = render(KUBERNETES_DIR)
# (Deployment of the code server, module, location, job, run config)
LOCATIONS = [
    ("code-racing", "racing_orchestration.definitions", "racing_orchestration", "cleanup_job_runs", {}),
    ("code-maintenance", "maintenance_jobs.definitions", "maintenance_jobs", "example_executor",
     {"ops": {"run_example_executor": {"config": {"message": "x", "delay_seconds": 0}}}}),
]


@contextmanager
def emulated_kubernetes_api() -> Iterator[tuple[kmock.KubernetesEmulator, str]]:
    """kmock's emulator on a free loopback port, served by a thread with its own event loop; yields (emulator, URL)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Future | None = None
    state: dict = {}

    async def serve() -> None:
        nonlocal stop
        stop = loop.create_future()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            state.update(emulator=emulator, url=str(server.url).rstrip("/"))
            started.set()
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(30), "kmock did not start"
    try:
        yield state["emulator"], state["url"]
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(timeout=30)
        loop.close()


def kubeconfig(url: str, path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": url}}],
        "users": [{"name": "test", "user": {"token": "test"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": NAMESPACE}}],
    }))
    return path


def platform_instance(database_url: str, kubeconfig_file: Path) -> dict:
    """The rendered instance, with the test platform's three differences (module docstring)."""
    instance = instance_config(OBJECTS)
    launcher = instance["run_launcher"]["config"]
    launcher["load_incluster_config"] = False
    launcher["kubeconfig_file"] = str(kubeconfig_file)
    instance["storage"] = pooled_postgres_storage(database_url)
    instance["run_coordinator"] = {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}
    for key in ("telemetry", "python_logs"):
        instance.pop(key)
    return instance


@contextmanager
def webserver(instance_overrides: dict, module: str, location: str) -> Iterator[tuple[dg.DagsterInstance, int, object]]:
    from dagster_webserver.app import create_app_from_workspace_process_context

    from local_stack.stack import free_port
    from tests.code_server import module_workspace
    from tests.control_api.conftest import serve

    with dg.instance_for_test(overrides=instance_overrides) as instance:
        instance.wipe()
        with module_workspace(instance, module, location) as context:
            server, thread = serve(create_app_from_workspace_process_context(context), free_port())
            try:
                yield instance, server.servers[0].sockets[0].getsockname()[1], context
            finally:
                server.should_exit = True
                thread.join(timeout=10)


def run_pod(job: dict, reason: str) -> dict:
    """The pod the Job controller would create and the kubelet would report: its container killed with `reason`."""
    labels = job["spec"]["template"]["metadata"]["labels"]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": job["metadata"]["name"] + "-x7k2p", "namespace": NAMESPACE,
                     "labels": {**labels, "job-name": job["metadata"]["name"]}},
        "spec": job["spec"]["template"]["spec"],
        "status": {"phase": "Failed", "containerStatuses": [{
            "name": job["spec"]["template"]["spec"]["containers"][0]["name"], "ready": False, "restartCount": 0,
            "image": job["spec"]["template"]["spec"]["containers"][0]["image"], "imageID": "",
            "state": {"terminated": {"exitCode": 137, "reason": reason}},
        }]},
    }


@pytest.mark.parametrize(("deployment", "module", "location", "job_name", "run_config"), LOCATIONS,
                         ids=[row[2] for row in LOCATIONS])
def test_a_run_launches_as_the_manifests_job_and_an_oom_kill_fails_it(
        deployment: str, module: str, location: str, job_name: str, run_config: dict, dagster_database_url: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run  # Dagster's run monitoring, as is

    code_server = find(OBJECTS, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]
    image = {e["name"]: e.get("value") for e in code_server["env"]}["DAGSTER_CURRENT_IMAGE"]
    # The code server reports the image its runs start from, as in its Deployment.
    monkeypatch.setenv("DAGSTER_CURRENT_IMAGE", image)
    with emulated_kubernetes_api() as (emulator, url):
        overrides = platform_instance(dagster_database_url, kubeconfig(url, tmp_path / "kubeconfig"))
        with webserver(overrides, module, location) as (instance, port, context):
            client = DagsterGraphQLClient("127.0.0.1", port_number=port)
            run_id = client.submit_job_execution(job_name, repository_location_name=location, run_config=run_config)

            api = kubernetes.client.ApiClient(kubernetes.config.new_client_from_config(str(tmp_path / "kubeconfig"))
                                              .configuration)
            batch = kubernetes.client.BatchV1Api(api)
            jobs = batch.list_namespaced_job(NAMESPACE).items
            assert len(jobs) == 1
            job = api.sanitize_for_serialization(jobs[0])
            assert_job_is_the_manifests(job, image, run_id, location)
            for version in (OLDEST, NEWEST):
                kubernetes_validate.validate(job, version, strict=True)

            # The run worker started, then the kubelet killed its container; the Job controller failed the Job.
            instance.handle_new_event(_run_start_event(instance, run_id))
            kubernetes.client.CoreV1Api(api).create_namespaced_pod(NAMESPACE, run_pod(job, "OOMKilled"))
            batch.patch_namespaced_job_status(job["metadata"]["name"], NAMESPACE, {"status": {
                "failed": 1, "active": 0,
                "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}})

            record = instance.get_run_record_by_id(run_id)
            assert record.dagster_run.status == dg.DagsterRunStatus.STARTED
            with context.create_request_context() as workspace:
                monitor_started_run(instance, workspace, record, logging.getLogger(__name__))
            run = instance.get_run_by_id(run_id)
            assert run.status == dg.DagsterRunStatus.FAILURE
            message = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)[-1].message
            assert "K8s job has no active pods" in message
            assert "OOMKilled" in message
            assert_the_failure_alert_reaches_the_webhook(instance, run)


def assert_the_failure_alert_reaches_the_webhook(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """The project's failure alert path on this run: `run_failure_alert`, evaluated on its RUN_FAILURE event as the
    daemon's sensor loop evaluates it, posts to a real webhook receiver over HTTP."""
    from orchestration_core.audit.alert_webhook import AlertWebhook
    from orchestration_core.audit.alerts import run_failure_alert
    from tests.deploy.webhook_receiver import serve as serve_receiver

    receiver, thread = serve_receiver()
    try:
        failure = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)[-1]
        context = dg.build_run_status_sensor_context(
            sensor_name="run_failure_alert", dagster_event=failure.dagster_event, dagster_instance=instance,
            dagster_run=run).for_run_failure()
        url = f"http://127.0.0.1:{receiver.server_address[1]}/alerts"
        assert run_failure_alert(context, alert_webhook=AlertWebhook(url=url, attempts=1)) is None
        with receiver.lock:
            [posted] = list(receiver.messages)
        assert f"Run failed: {run.job_name}" in str(posted["body"]) and run.run_id in str(posted["body"])
    finally:
        receiver.shutdown()
        thread.join(timeout=10)


def _run_start_event(instance: dg.DagsterInstance, run_id: str):
    """The RUN_START event the run worker writes first: the run is STARTED, so monitoring checks its worker."""
    event = dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_START.value,
                            job_name=instance.get_run_by_id(run_id).job_name, message="Started.")
    return dg.EventLogEntry(error_info=None, level=logging.DEBUG, user_message="", run_id=run_id,
                            timestamp=time.time(), dagster_event=event)


def assert_job_is_the_manifests(job: dict, image: str, run_id: str, location: str) -> None:
    launcher = instance_config(OBJECTS)["run_launcher"]["config"]
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == image
    assert container["args"][:3] == ["dagster", "api", "execute_run"]
    assert pod["serviceAccountName"] == "racing-orchestration-run"
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600 and job["spec"]["backoffLimit"] == 0
    assert container["resources"] == launcher["resources"]
    env_from = container["envFrom"]
    assert {"configMapRef": {"name": "racing-orchestration-settings"}} in env_from
    assert {"secretRef": {"name": "racing-orchestration-runtime"}} in env_from
    # The names it reads exist: the ConfigMap in the manifests, the Secret in README "Kubernetes".
    find(OBJECTS, "ConfigMap", "racing-orchestration-settings")
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["racing-orchestration/postgres-client"] == "true"  # the NetworkPolicy admits it
    assert labels["dagster/run-id"] == run_id and labels["dagster/code-location"] == location
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["compute-logs"] == "/opt/dagster/compute_logs"
    assert pod["securityContext"]["fsGroup"] == 10001
