"""Each code location loads, and names every job, schedule, sensor and asset operators rely on."""

import dagster as dg
import pytest


@pytest.mark.unit
def test_racing_orchestration_definitions_load(monkeypatch) -> None:
    from racing_orchestration.definitions import defs

    for job in ("morning_scrape",):
        assert defs.resolve_job_def(job).name == job
    schedule = defs.resolve_schedule_def("morning_scrape_schedule")
    assert schedule.cron_schedule == "0 6 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert defs.resolve_assets_def("race_cards").partitions_def is not None
    assert dg.Definitions.validate_loadable(defs) is None


@pytest.mark.unit
def test_maintenance_jobs_definitions_load() -> None:
    from maintenance_jobs.definitions import defs

    assert dg.Definitions.validate_loadable(defs) is None


@pytest.mark.unit
def test_racing_module_exposes_definitions_for_the_cli() -> None:
    # `dagster asset materialize -m racing_orchestration --select race_cards --partition D` loads this module.
    import racing_orchestration

    assert isinstance(racing_orchestration.defs, dg.Definitions)
