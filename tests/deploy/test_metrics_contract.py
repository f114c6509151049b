"""The dashboard and alert rules against what the control API really exports: the app is served over HTTP on
Postgres, a run is made, `/metrics` is scraped and parsed with the Prometheus client's parser."""


import json
import uuid
from collections.abc import Iterator

import dagster as dg
import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from local_stack.embedded_postgres import drop_database, ensure_database
from local_stack.stack import free_port
from control_api.app import create_app
from control_api.config import ApiSettings
from maintenance_jobs.database.migrate import upgrade
from racing_orchestration.checkpoints.racing_day import racing_day
from racing_orchestration.race_db.migrations import upgrade as upgrade_race_database
from racing_orchestration.race_db.resource import RaceDatabase
from orchestration_core.run_outcome import Outcome, record_outcome
from tests.control_api.conftest import serve
from tests.deploy.compose_model import REPO_ROOT
from tests.deploy.exported_metrics import series_names
from tests.deploy.promql import metric_names
from tests.deploy.test_grafana import queries
from tests.deploy.test_prometheus import recorded_names

pytestmark = pytest.mark.integration

_SUFFIXES = {
    "histogram": ("_bucket", "_sum", "_count"),
    "counter": ("_total", "_created"),
    "summary": ("_sum", "_count"),
}


@dg.op
def scrape_probe(context: dg.OpExecutionContext) -> None:
    record_outcome(context, Outcome.SUCCESS, 3, 0, None)


@dg.job(tags={"orchestration/kind": "racing"})
def metrics_probe_job() -> None:
    scrape_probe()


@pytest.fixture
def racing_database_url(postgres_server_url: str) -> Iterator[str]:
    name = f"racing_{uuid.uuid4().hex[:12]}"
    url = ensure_database(postgres_server_url, name)
    upgrade_race_database(url)
    try:
        yield url
    finally:
        drop_database(postgres_server_url, name)


@pytest.fixture
def scraped_series(
    fresh_database_url: str, racing_database_url: str, pg_instance: dg.DagsterInstance, dagster_database_url: str
) -> Iterator[set[str]]:
    """Every metric family and series name one scrape of the running API contains."""
    upgrade(fresh_database_url)
    assert metrics_probe_job.execute_in_process(instance=pg_instance).success
    # One racing_day check on record, so its families carry samples (a day with no races: complete).
    race_db = RaceDatabase(url=racing_database_url)
    try:
        assert dg.materialize([racing_day], partition_key="2026-11-29", instance=pg_instance,
                              resources={"race_db": race_db}).success
    finally:
        race_db.dispose()
    settings = ApiSettings(registry_url=fresh_database_url, api_key="deploy-test-key-0123",
                           dagster_database_url=dagster_database_url, racing_database_url=racing_database_url)
    server, thread = serve(create_app(settings), free_port())
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)  # no key: Prometheus sends none
        assert response.status_code == 200
        names: set[str] = set()
        for family in text_string_to_metric_families(response.text):
            names.add(family.name)
            names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ()))
            names.update(sample.name for sample in family.samples)
        yield names
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_the_api_exports_every_metric_of_the_published_interface(scraped_series: set[str]) -> None:
    assert series_names() - scraped_series == set()


def test_dashboard_and_alerts_use_only_metrics_the_api_exports(scraped_series: set[str]) -> None:
    dashboard = json.loads((REPO_ROOT / "deploy" / "grafana" / "dashboards" / "orchestration.json").read_text())
    rules = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    exprs = queries(dashboard) + [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    used = set().union(*(metric_names(expr) for expr in exprs))
    assert used - scraped_series - recorded_names() == set()
    # The probe run shows up under the labels the queries filter on.
    assert "orchestration_last_success_timestamp_seconds" in scraped_series
