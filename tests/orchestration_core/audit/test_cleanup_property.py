"""Property-style check over seeded random mixes of age x status x partial x re-execution, on Postgres.

Each mix is built with cheap recorded runs (no execution), pruned with a random batch size, and compared with an
independent oracle written from the issue's rules rather than from `keep_reason`.
"""

from __future__ import annotations

import random

import dagster as dg
import pytest

from orchestration_core.audit.cleanup import prune_successful_runs
from tests.orchestration_core.audit.run_factory import RunFactory, event_count, partial_tags

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus
STATUSES = [S.SUCCESS, S.SUCCESS, S.SUCCESS, S.FAILURE, S.CANCELED, S.QUEUED, S.STARTED]


def _oracle_deleted(run_id: str, specs: dict[str, dict]) -> bool:
    """Deleted iff: SUCCESS, older than 14 days, not partial, not a re-execution of a failed/canceled/partial run, and
    not the job's latest SUCCESS run (all runs here are of one job; `specs` is in creation order)."""
    spec = specs[run_id]
    if spec["status"] != S.SUCCESS or spec["age"] <= 14 or spec["partial"]:
        return False
    if run_id == [rid for rid, s in specs.items() if s["status"] == S.SUCCESS][-1]:
        return False
    parent = specs.get(spec["parent"]) if spec["parent"] else None
    if parent and (parent["status"] in (S.FAILURE, S.CANCELED) or (parent["status"] == S.SUCCESS and parent["partial"])):
        return False
    return True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_mix_prunes_exactly_what_the_rules_say(pg_instance: dg.DagsterInstance, seed: int) -> None:
    rng = random.Random(seed)
    factory = RunFactory(pg_instance)
    specs: dict[str, dict] = {}
    for _ in range(20):
        status = rng.choice(STATUSES)
        partial = status == S.SUCCESS and rng.random() < 0.25
        age = rng.choice([1, 5, 13.5, 14.5, 20, 40])
        # Re-executions point at an earlier run (older or same age as the child would be in reality).
        parent_id = rng.choice(list(specs)) if specs and rng.random() < 0.35 else None
        if parent_id:
            age = min(age, specs[parent_id]["age"])
        run = factory.recorded(
            status,
            tags=partial_tags() if partial else None,
            age_days=age,
            parent=pg_instance.get_run_by_id(parent_id) if parent_id else None,
        )
        specs[run.run_id] = {"status": status, "partial": partial, "age": age, "parent": parent_id}

    report = prune_successful_runs(pg_instance, 14, batch_size=rng.choice([1, 3, 7, 500]))

    expected_gone = {rid for rid in specs if _oracle_deleted(rid, specs)}
    remaining = {r.run_id for r in pg_instance.get_runs()}
    assert remaining == set(specs) - expected_gone
    assert report.deleted == len(expected_gone)
    assert sum(report.kept.values()) == len(specs) - len(expected_gone)
    assert all(event_count(pg_instance, rid) == 0 for rid in expected_gone)
