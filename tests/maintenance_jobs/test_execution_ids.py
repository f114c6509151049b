"""Execution ids are the same in every process: clients keep them (GET /executions, the CLI) and the recorder, the API
workers and the CLI compute them in different processes. The expected ids are literals, computed once from the inputs
beside them, so a derivation that varies per process (Python's salted `hash`, a random or per-process key) or one that
changes between releases fails here; one check computes them in fresh interpreters with other hash seeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.test_utils import create_run_for_test

from maintenance_jobs.execution_history.items import item_from_run
from maintenance_jobs.execution_history.recorder import record_run
from maintenance_jobs.execution_history.run_storage import RunRow
from maintenance_jobs.execution_history.store import task_executions
from maintenance_jobs.execution_history.summary import execution_id, utc
from tests.conftest import REPO_ROOT

RUN_ID = "0b283ee7-26e1-4603-8669-1b334d19d2c4"  # a Dagster run id (a UUID4)
# (run id, attempt) -> id, written down once; never recompute these with execution_id in a test.
PINNED = [
    (("abc", 0), 6560798095827001),
    (("abc", 1), 6990747861672688),
    (("abc", 2), 986839400438314),
    ((RUN_ID, 0), 4592520217857657),
    ((RUN_ID, 1), 6491880545889408),
    (("run-0", 0), 5089223559518488),
    (("x" * 255, 0), 7393946108386418),
]


@pytest.mark.unit
@pytest.mark.parametrize(("inputs", "expected"), PINNED, ids=[f"{r[:8]}#{a}" for (r, a), _ in PINNED])
def test_the_id_of_fixed_inputs_is_the_pinned_literal(inputs: tuple[str, int], expected: int) -> None:
    assert execution_id(*inputs) == expected


@pytest.mark.unit
@pytest.mark.parametrize("seed", ["random", "0", "12345"])
def test_another_interpreter_with_another_hash_seed_computes_the_same_ids(seed: str) -> None:
    code = ("import json, sys\nfrom maintenance_jobs.execution_history.summary import execution_id\n"
            "print(json.dumps([execution_id(r, a) for r, a in json.loads(sys.argv[1])]))")
    inputs = [list(pair) for pair, _ in PINNED]
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run([sys.executable, "-c", code, json.dumps(inputs)], capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [expected for _, expected in PINNED]


@pytest.mark.integration
def test_a_run_keeps_its_pinned_id_live_and_recorded(pg_instance: dg.DagsterInstance, registry_url: str) -> None:
    tags = {"orchestration/kind": "maintenance", "maintenance/task": "nightly", "maintenance/service": "scheduler",
            "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
            "maintenance/priority": "50"}
    run = create_run_for_test(pg_instance, job_name="example_executor", status=dg.DagsterRunStatus.SUCCESS,
                              tags=tags, run_id=RUN_ID)
    record = pg_instance.get_run_record_by_id(run.run_id)
    live = item_from_run(RunRow(RUN_ID, run.job_name, run.status, utc(record.create_timestamp), record.start_time,
                                record.end_time, run.tags), "http://ui")
    assert live.id == 4592520217857657
    engine = sa.create_engine(registry_url)
    try:
        record_run(pg_instance, record, engine)
        with engine.connect() as conn:
            assert conn.execute(sa.select(task_executions.c.id).where(task_executions.c.run_id == RUN_ID)).scalar_one(
            ) == 4592520217857657
    finally:
        engine.dispose()
