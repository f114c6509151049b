"""`racing cleanup` against the instance DAGSTER_HOME configures (Postgres): dry run, real run, bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from racing_orchestration.cli import main
from tests.orchestration_core.audit.run_factory import RunFactory

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus


def test_cleanup_cli_dry_run_then_real_run(pg_instance, dagster_home, capsys) -> None:
    factory = RunFactory(pg_instance)
    old = [factory.recorded(S.SUCCESS, age_days=20).run_id for _ in range(2)]
    old_failed = factory.recorded(S.FAILURE, age_days=20).run_id
    recent = factory.recorded(S.SUCCESS, age_days=2).run_id
    factory.recorded(S.SUCCESS)  # the job's latest success, kept whatever its age: `recent` may go below

    assert main(["cleanup", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 2 successful runs" in out and "failed=1" in out
    assert all(pg_instance.get_run_by_id(r) for r in [*old, old_failed, recent])

    assert main(["cleanup", "--older-than-days", "14", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == 2 and report["dry_run"] is False
    assert [pg_instance.get_run_by_id(r) is None for r in [*old, old_failed, recent]] == [True, True, False, False]
    # Both invocations are themselves in the audit trail, as runs of cleanup_job_runs.
    cli_runs = pg_instance.get_runs(dg.RunsFilter(job_name="cleanup_job_runs", tags={"racing/trigger": "cli"}))
    assert len(cli_runs) == 2 and all(r.status == S.SUCCESS for r in cli_runs)
    assert report["run_id"] in {r.run_id for r in cli_runs}

    assert main(["cleanup", "--older-than-days", "1"]) == 0
    assert "deleted 1 successful runs" in capsys.readouterr().out  # the 2-day-old run


def test_cleanup_cli_keeps_14_days_by_default(pg_instance, dagster_home, capsys) -> None:
    """The CLI's default age is the nightly job's 14 days: a run just over it goes, one just under it stays."""
    factory = RunFactory(pg_instance)
    over = factory.recorded(S.SUCCESS, age_days=14.05).run_id  # 72 min past the 14 days
    under = factory.recorded(S.SUCCESS, age_days=13.95).run_id
    factory.recorded(S.SUCCESS)  # the job's latest success: neither row above is kept for being the newest

    before = datetime.now(UTC)
    assert main(["cleanup", "--json"]) == 0
    after = datetime.now(UTC)
    report = json.loads(capsys.readouterr().out)
    assert before - timedelta(days=14) <= datetime.fromisoformat(report["cutoff"]) <= after - timedelta(days=14)
    assert report["deleted"] == 1
    assert pg_instance.get_run_by_id(over) is None
    assert pg_instance.get_run_by_id(under) is not None


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_cleanup_cli_rejects_bad_days(dagster_home, capsys, bad) -> None:
    with pytest.raises(SystemExit):
        main(["cleanup", "--older-than-days", bad])
    assert f"expected a positive integer, got '{bad}'" in capsys.readouterr().err
