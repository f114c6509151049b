"""deploy/dagster.yaml as a real Dagster instance on the test Postgres (environment substituted the way compose does),
the migrate service's `dagster instance migrate`, and the shape of deploy/workspace.yaml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
import yaml
from dagster._core.utils import parse_env_var
from dagster._daemon.types import DaemonHeartbeat
from dagster._core.workspace.config_schema import process_workspace_config
from dagster_docker import DockerRunLauncher

from tests.deploy.compose_model import REPO_ROOT, env_example, interpolate, load_compose

DEPLOY_DIR = REPO_ROOT / "deploy"
PROBE = str(REPO_ROOT / "orchestration_core" / "daemon_probe.py")
LOCAL_INSTANCE = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
DEPLOY_INSTANCE = yaml.safe_load((DEPLOY_DIR / "dagster.yaml").read_text())


def _dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY_DIR / "dagster.yaml", home / "dagster.yaml")
    return home


@pytest.fixture
def compose_instance(
    tmp_path: Path, fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.DagsterInstance]:
    """The compose instance config, as the webserver/daemon load it from $DAGSTER_HOME, on a fresh database."""
    monkeypatch.setenv("DAGSTER_HOME", str(_dagster_home(tmp_path)))
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", fresh_database_url)
    with dg.DagsterInstance.get() as instance:
        yield instance


@dg.op
def say_ok() -> str:
    return "ok"


@dg.job
def deploy_smoke_job() -> None:
    say_ok()


@pytest.mark.unit
@pytest.mark.parametrize(
    "block", ["run_coordinator", "concurrency", "run_monitoring", "run_retries", "retention", "sensors", "schedules"]
)
def test_compose_instance_keeps_the_project_policies(block: str) -> None:
    assert DEPLOY_INSTANCE[block] == LOCAL_INSTANCE[block]


@pytest.mark.integration
def test_compose_instance_loads_with_the_docker_run_launcher(compose_instance: dg.DagsterInstance) -> None:
    launcher = compose_instance.run_launcher
    assert isinstance(launcher, DockerRunLauncher)
    assert launcher.networks == ["racing-orchestration"]
    assert launcher.container_kwargs["auto_remove"] is True
    # Run monitoring needs worker health checks, which the Docker launcher implements (the default one does not).
    assert launcher.supports_check_run_worker_health and launcher.supports_resume_run
    assert compose_instance.run_monitoring_enabled
    assert compose_instance.run_retries_enabled and compose_instance.run_retries_max_retries == 1
    assert type(compose_instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    queue = compose_instance.get_concurrency_config().run_queue_config
    limits = {limit["key"]: limit["limit"] for limit in queue.tag_concurrency_limits}
    assert limits == {"orchestration/kind": 5, "racing/race_id": 1}


@pytest.mark.integration
def test_compose_instance_stores_runs_in_postgres(compose_instance: dg.DagsterInstance) -> None:
    result = deploy_smoke_job.execute_in_process(instance=compose_instance)
    assert result.success
    stored = compose_instance.get_run_by_id(result.run_id)
    assert stored is not None and stored.status == dg.DagsterRunStatus.SUCCESS
    assert type(compose_instance.run_storage).__name__ == "PostgresRunStorage"


@pytest.mark.integration
def test_launcher_env_passthrough_resolves_from_the_daemon_environment(
    compose_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The daemon's environment exactly as compose builds it from a filled-in .env.
    filled = {name: value or f"test-{name.lower()}" for name, value in env_example().items()}
    daemon_env = load_compose()["services"]["daemon"]["environment"]
    for name in list(os.environ):
        if name in DEPLOY_INSTANCE["run_launcher"]["config"]["env_vars"]:
            monkeypatch.delenv(name)
    for name, value in daemon_env.items():
        monkeypatch.setenv(name, interpolate(str(value), filled))
    run = compose_instance.get_run_by_id(deploy_smoke_job.execute_in_process(instance=compose_instance).run_id)
    context = compose_instance.run_launcher.get_container_context(run)
    run_env = dict(parse_env_var(name) for name in context.env_vars)
    password = filled["DAGSTER_DB_PASSWORD"]
    assert run_env["DAGSTER_POSTGRES_URL"] == f"postgresql+psycopg2://dagster:{password}@postgres:5432/dagster"
    assert run_env["GITEA_TOKEN"] == filled["GITEA_TOKEN"]
    # A name the daemon lacks fails the launch naming it, rather than starting a run without its settings.
    monkeypatch.delenv("GITEA_TOKEN")
    with pytest.raises(Exception, match="GITEA_TOKEN"):
        [parse_env_var(name) for name in context.env_vars]


@pytest.mark.integration
def test_migrate_service_first_step_migrates_a_fresh_database(tmp_path: Path, fresh_database_url: str) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(_dagster_home(tmp_path)), "DAGSTER_POSTGRES_URL": fresh_database_url}
    dagster_cli = Path(sys.executable).with_name("dagster")
    result = subprocess.run([str(dagster_cli), "instance", "migrate"], env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    engine = sa.create_engine(fresh_database_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"runs", "event_logs", "job_ticks", "daemon_heartbeats", "alembic_version"} <= tables


@pytest.mark.unit
def test_deploy_workspace_matches_dagsters_workspace_schema() -> None:
    config = yaml.safe_load((DEPLOY_DIR / "workspace.yaml").read_text())
    assert process_workspace_config(config).success
    assert not process_workspace_config({"load_from": [{"grpc_server": {"hots": "code-racing"}}]}).success
    assert all(set(entry) == {"grpc_server"} for entry in config["load_from"])


@pytest.mark.integration
def test_the_daemon_healthcheck_asks_for_every_daemon_the_instance_runs(
    compose_instance: dg.DagsterInstance, fresh_database_url: str
) -> None:
    """docker-compose.yml's daemon healthcheck (orchestration_core/daemon_probe.py) names exactly the daemon types this
    instance requires, and run as written against the instance's storage it passes on fresh heartbeats, fails on one
    stale daemon and on one missing."""
    test = load_compose()["services"]["daemon"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "/opt/dagster/daemon_probe.py"]  # deploy/Dockerfile.dagster's copy
    max_age, listed = float(test[3]), test[4:]
    assert sorted(listed) == sorted(compose_instance.get_required_daemon_types())
    assert 90 <= max_age <= 300, "heartbeats come every 30 s; the limit must outlast a loaded host's late ones"

    def probe() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, PROBE, *test[3:]], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "DAGSTER_POSTGRES_URL": fresh_database_url})

    now = time.time()
    for daemon in listed:
        compose_instance.add_daemon_heartbeat(DaemonHeartbeat(now - 20, daemon, None, None))
    assert probe().returncode == 0, probe().stderr
    compose_instance.add_daemon_heartbeat(DaemonHeartbeat(now - max_age - 30, "SENSOR", None, None))
    stale = probe()
    assert stale.returncode == 1 and "SENSOR: last heartbeat" in stale.stderr, stale.stderr
    compose_instance.wipe_daemon_heartbeats()
    missing = probe()
    assert missing.returncode == 1 and "ASSET: no heartbeat" in missing.stderr, missing.stderr
