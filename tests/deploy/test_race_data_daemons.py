"""Both instance configs run the daemons the race data needs: the asset daemon (it evaluates race_data_automation),
the backfill daemon (the UI's backfill dialog) and the freshness daemon (the assets' freshness policies), beside the
sensor daemon. `make run` (`dagster dev`) and the compose `daemon` service (`dagster-daemon run`) start exactly the
required daemons of their instance."""

from __future__ import annotations

import shutil

import dagster as dg
import pytest

from tests.conftest import REPO_ROOT

NEEDED = {"SENSOR", "BACKFILL", "ASSET", "FRESHNESS_DAEMON", "SCHEDULER", "QUEUED_RUN_COORDINATOR"}


@pytest.mark.integration
@pytest.mark.parametrize("config", ["dagster.yaml", "deploy/dagster.yaml"])
def test_the_instance_runs_the_asset_backfill_and_freshness_daemons(config, tmp_path, fresh_database_url,
                                                                    monkeypatch) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / config, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", fresh_database_url)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert NEEDED <= set(instance.get_required_daemon_types())
        assert instance.auto_materialize_use_sensors  # declarative automation through sensors
