"""Audit queries and `racing audit` against Postgres: the numbers match the runs created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import dagster as dg
import pytest

from orchestration_core.audit.queries import outcome_counts, recent_runs, retry_chains
from racing_orchestration.cli import main
from orchestration_core.run_outcome import Outcome, outcome_tags
from tests.orchestration_core.audit.run_factory import RunFactory, audit_flaky_job, audit_sample_job, audit_step_retry_job, partial_tags
from tests.conftest import wiped_instance

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus
DAY = timedelta(hours=24)


@pytest.fixture(scope="module")
def audit_instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """One instance for the module: the tests only read, so the runs are created once."""
    yield from wiped_instance(dagster_database_url)


@pytest.fixture(scope="module")
def audit_runs(audit_instance: dg.DagsterInstance) -> dict[str, dg.DagsterRun]:
    pg_instance = audit_instance
    f = RunFactory(pg_instance)
    runs = {
        "s1": f.recorded(S.SUCCESS, tags=outcome_tags(Outcome.SUCCESS, 12, 0)),
        "s2": f.recorded(S.SUCCESS),
        "p1": f.recorded(S.SUCCESS, tags=partial_tags(9, 3)),
        "f1": f.recorded(S.FAILURE, job=audit_flaky_job),
        "c1": f.recorded(S.CANCELED, job=audit_flaky_job),
        "old_success": f.recorded(S.SUCCESS, age_days=2),
        "old_failure": f.recorded(S.FAILURE, job=audit_flaky_job, age_days=3),
    }
    runs["r1"] = f.recorded(S.FAILURE, job=audit_flaky_job, parent=runs["f1"], retry_number=1)
    runs["r2"] = f.recorded(S.SUCCESS, job=audit_flaky_job, parent=runs["r1"], retry_number=2)
    # A re-execution without the group tags (as execute_job writes it): the number comes from the parent chain.
    r3 = pg_instance.create_run_for_job(audit_flaky_job, parent_run_id=runs["r2"].run_id, root_run_id=runs["f1"].run_id)
    runs["r3"] = pg_instance.get_run_by_id(r3.run_id)
    f.report_event(runs["r3"], dg.DagsterEventType.RUN_START)
    f.report_event(runs["r3"], dg.DagsterEventType.RUN_SUCCESS)
    runs["step_retry"] = pg_instance.get_run_by_id(audit_step_retry_job.execute_in_process(instance=pg_instance).run_id)
    return runs


def test_outcome_counts_over_window(audit_instance: dg.DagsterInstance, audit_runs) -> None:
    pg_instance = audit_instance
    counts = {c.job_name: (c.total, c.counts) for c in outcome_counts(pg_instance, DAY)}
    assert counts == {
        audit_sample_job.name: (3, {"partial": 1, "success": 2}),
        audit_flaky_job.name: (5, {"canceled": 1, "failed": 2, "success": 2}),
        audit_step_retry_job.name: (1, {"success": 1}),
    }
    week = {c.job_name: c.total for c in outcome_counts(pg_instance, timedelta(days=7))}
    assert week[audit_sample_job.name] == 4 and week[audit_flaky_job.name] == 6


def test_recent_runs_show_outcome_items_retry_and_duration(audit_instance: dg.DagsterInstance, audit_runs) -> None:
    pg_instance = audit_instance
    recent = {r.run_id: r for r in recent_runs(pg_instance, limit=50)}
    assert len(recent) == len(audit_runs)
    p1 = recent[audit_runs["p1"].run_id]
    assert (p1.outcome, p1.items_processed, p1.items_failed, p1.error) == ("partial", 9, 3, "2 races failed")
    assert recent[audit_runs["s1"].run_id].items_processed == 12
    assert [recent[audit_runs[k].run_id].retry_number for k in ("f1", "r1", "r2", "r3")] == [0, 1, 2, 3]
    assert recent[audit_runs["r3"].run_id].parent_run_id == audit_runs["r2"].run_id
    assert recent[audit_runs["step_retry"].run_id].duration_seconds > 0
    assert len(recent_runs(pg_instance, limit=3)) == 3
    newest = recent_runs(pg_instance, limit=1)[0]
    assert newest.run_id == audit_runs["step_retry"].run_id


def test_retry_chains_group_by_job_and_number(audit_instance: dg.DagsterInstance, audit_runs) -> None:
    pg_instance = audit_instance
    report = retry_chains(pg_instance, DAY)
    groups = {(g.job_name, g.retry_number): (g.runs, g.outcomes) for g in report.groups}
    assert groups == {
        (audit_flaky_job.name, 1): (1, {"failed": 1}),
        (audit_flaky_job.name, 2): (1, {"success": 1}),
        (audit_flaky_job.name, 3): (1, {"success": 1}),
    }
    assert report.step_retries_by_job == {audit_step_retry_job.name: 1}


def test_cli_json_and_tables_match_runs(audit_runs, dagster_home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--by-outcome", "--since", "24h", "--json"]) == 0
    data = {row["job_name"]: row for row in json.loads(capsys.readouterr().out)}
    assert data[audit_sample_job.name]["counts"] == {"partial": 1, "success": 2}
    assert data[audit_flaky_job.name]["total"] == 5

    assert main(["audit", "--retries", "--json"]) == 0
    retries = json.loads(capsys.readouterr().out)
    assert [g["retry_number"] for g in retries["groups"]] == [1, 2, 3]

    assert main(["audit", "--limit", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2

    # Plain tables by default.
    assert main(["audit"]) == 0
    out = capsys.readouterr().out
    assert "partial" in out and audit_runs["p1"].run_id[:8] in out
    assert main(["audit", "--by-outcome", "--since", "7d"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(audit_sample_job.name))
    assert line.split()[1:5] == ["4", "3", "1", "0"]  # total, success, partial, failed


def test_cli_rejects_bad_window(dagster_home, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["audit", "--by-outcome", "--since", "yesterday"])
    assert "invalid window 'yesterday'" in capsys.readouterr().err
