"""The dagster CLI commands the README promises, run as a user runs them (subprocess, Postgres instance)."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import REPO_ROOT

DAGSTER = str(Path(sys.executable).parent / "dagster")


@pytest.fixture
def cli_env(tmp_path, monkeypatch, dagster_database_url, racing_db_url, sim_feed) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    env = {
        "DAGSTER_HOME": str(home),
        "DAGSTER_POSTGRES_URL": dagster_database_url,
        "RACING_DATABASE_URL": racing_db_url,
        "TAB_API_BASE_URL": sim_feed.base_url,
    }
    for name, value in env.items():  # the test reads the same instance back
        monkeypatch.setenv(name, value)
    return {**os.environ, **env}


def _dagster(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([DAGSTER, *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.integration
def test_asset_materialize_one_race_card_partition(cli_env) -> None:
    done = _dagster(cli_env, "asset", "materialize", "-m", "racing_orchestration", "--select", "race_cards",
                    "--partition", "2026-11-29")
    assert done.returncode == 0, done.stderr[-2000:]
    with dg.DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("race_cards"))
        assert event is not None and event.dagster_event.partition == "2026-11-29"
        assert event.asset_materialization.metadata["races"].value > 0


@pytest.mark.integration
def test_job_execute_morning_scrape(cli_env) -> None:
    done = _dagster(cli_env, "job", "execute", "-m", "racing_orchestration", "-j", "morning_scrape")
    assert done.returncode == 0, done.stderr[-2000:]
    with dg.DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        run = instance.get_runs(dg.RunsFilter(job_name="morning_scrape"), limit=1)[0]
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags["racing/outcome"] == "success"
