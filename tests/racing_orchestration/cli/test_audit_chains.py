"""`racing audit --retries`: every chain of runs that are attempts of one piece of work, from real runs in Postgres
run storage: the morning scrape's step retries and its re-execution, the post-race attempts linked by
`racing/previous_run_id`, and the checkpoint ledger's `<key>:retry<n>` re-requests."""

import datetime as dt
import json

import dagster as dg
import pytest

from orchestration_core.audit.chains import (
    NEXT_ATTEMPT,
    RE_EXECUTION,
    RE_REQUEST,
    RunNode,
    build_chains,
)
from orchestration_core.dagster_tags import RUN_KEY_TAG
from orchestration_core.run_outcome import Outcome, outcome_tags
from racing_orchestration.checkpoints.jobs import (
    checkpoint_run_config,
    post_race_t5,
    pre_race_t15,
)
from racing_orchestration.checkpoints.windows import retry_key
from racing_orchestration.cli import main
from racing_orchestration.cli.audit import previous_request_key
from tests.orchestration_core.audit.run_factory import RunFactory, remote_origin_for
from tests.racing_orchestration.ingestion import scrape_faults
from tests.racing_orchestration.ingestion.scrape_faults import FEED

S = dg.DagsterRunStatus
DAY = dt.date(2026, 11, 29)
T0 = dt.datetime(2026, 11, 29, 1, 0, tzinfo=dt.UTC)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key", "previous"),
    [("r1:t15", None), ("r1:t15:retry1", "r1:t15"), ("r1:t15:retry3", retry_key("r1:t15", 2)),
     ("r1:post:2:retry1", "r1:post:2"), ("r1:post:retry0", None), ("card_refresh:20261129T0700", None)],
)
def test_previous_request_key_inverts_the_ledger_retry_key(key, previous) -> None:
    assert previous_request_key(key) == previous


@pytest.mark.unit
def test_build_chains_follows_each_kind_of_link_and_leaves_single_runs_out() -> None:
    def node(run_id, minutes, **kw):
        return RunNode(run_id, kw.pop("job", "j"), kw.pop("outcome", "failed"), T0 + dt.timedelta(minutes=minutes), **kw)

    nodes = [
        node("a0", 0, run_key="r1:post", outcome="partial"),
        node("a1", 5, run_key="r1:post:1", previous_run_id="a0"),  # next attempt, whose run failed
        node("a1r", 7, run_key="r1:post:1:retry1", previous_run_id="a0", outcome="success"),  # ledger re-request
        node("m0", 1, job="scrape"),
        node("m1", 2, job="scrape", parent_run_id="m0", outcome="success"),  # re-execution
        node("alone", 3, run_key="r9:t60", outcome="success"),
        node("orphan", 4, previous_run_id="gone"),  # its predecessor was deleted: no chain
        node("x0", 10, job="scrape"),
        node("x2", 12, job="scrape", parent_run_id="x1-deleted", root_run_id="x0", outcome="success"),
    ]
    chains = build_chains(nodes, previous_request_key)
    assert [[(l.run_id, l.linked_by, l.previous_run_id) for l in c.links] for c in chains] == [
        [("a0", None, None), ("a1", NEXT_ATTEMPT, "a0"), ("a1r", RE_REQUEST, "a1")],
        [("m0", None, None), ("m1", RE_EXECUTION, "m0")],
        [("x0", None, None), ("x2", RE_EXECUTION, "x0")],  # its parent is gone: linked to the root
    ]
    assert chains[0].final_outcome == "success" and chains[0].linked_by == [NEXT_ATTEMPT, RE_REQUEST]


def checkpoint_run(f: RunFactory, status: dg.DagsterRunStatus, checkpoint: str, race_id: str, key: str,
                   attempt: int = 0, tags: dict | None = None) -> dg.DagsterRun:
    """A checkpoint run as the sensor requests it (its job, run config, run key), driven to `status` by the events a
    launcher reports (what the run did is not under test here, only how runs are linked)."""
    job = post_race_t5 if checkpoint == "post" else pre_race_t15
    run = f.instance.create_run_for_job(
        job, run_config=checkpoint_run_config(race_id, checkpoint, T0.isoformat(), attempt),
        remote_job_origin=remote_origin_for(job.name), tags={RUN_KEY_TAG: key, "racing/attempt": str(attempt), **(tags or {})})
    f.report_event(run, dg.DagsterEventType.RUN_START)
    if status == S.SUCCESS:
        f.report_event(run, dg.DagsterEventType.RUN_SUCCESS)
    elif status == S.FAILURE:
        f.instance.report_run_failed(run, "step failed")
    else:
        f.instance.report_run_canceled(run)
    return f.instance.get_run_by_id(run.run_id)


@pytest.mark.integration
def test_audit_retries_shows_every_chain(pg_instance, racing_db_url, sim_feed, postgres_dagster_home, capsys) -> None:
    # 1. The morning scrape: its only combination fails, is retried inside the run, and the run fails; re-executed
    #    (all steps: from failure would only repeat the summary) once TAB is back, the re-execution succeeds.
    FEED.configure(base_url=sim_feed.base_url, database_url=racing_db_url, failing={("T", "NZ")})
    job = dg.build_reconstructable_job(scrape_faults.__name__, "morning_scrape_with_faults")
    config = {"ops": {"plan_scrape_combinations": {"config": {"dates": [DAY.isoformat()], "categories": ["T"],
                                                              "countries": ["NZ"]}},
                      "scrape_combination": {"config": {"max_retries": 2, "retry_delay_seconds": 0.01}}}}
    with dg.execute_job(job, instance=pg_instance, run_config=config) as first:
        assert not first.success
    FEED.failing = set()
    options = dg.ReexecutionOptions(parent_run_id=first.run_id)
    with dg.execute_job(job, instance=pg_instance, reexecution_options=options) as again:
        assert again.success
    # 2. A post-race chain: attempt 0 sees Interim, attempt 1's run fails, the ledger re-requests it, and it succeeds.
    f = RunFactory(pg_instance)
    post0 = checkpoint_run(f, S.SUCCESS, "post", "r1", "r1:post",
                           tags=outcome_tags(Outcome.PARTIAL, 0, 1, "not Final yet"))
    post1 = checkpoint_run(f, S.FAILURE, "post", "r1", "r1:post:1", 1, {"racing/previous_run_id": post0.run_id})
    post1r = checkpoint_run(f, S.SUCCESS, "post", "r1", "r1:post:1:retry1", 1, {"racing/previous_run_id": post0.run_id})
    # 3. A T-15 whose run failed twice: the ledger's re-requests under new keys, the second taking it.
    t15 = [checkpoint_run(f, status, "t15", "r2", key)
           for status, key in ((S.FAILURE, "r2:t15"), (S.CANCELED, "r2:t15:retry1"), (S.SUCCESS, "r2:t15:retry2"))]
    checkpoint_run(f, S.SUCCESS, "t15", "r3", "r3:t15")  # one run, no chain
    # The first run of a chain created before the window (7 days) is still shown as its start.
    f.backdate(t15[0].run_id, 10)

    assert main(["audit", "--retries", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    chains = {chain["root_run_id"]: [(l["run_id"], l["linked_by"], l["outcome"]) for l in chain["links"]]
              for chain in data["chains"]}
    assert chains == {
        first.run_id: [(first.run_id, None, "failed"), (again.run_id, RE_EXECUTION, "success")],
        post0.run_id: [(post0.run_id, None, "partial"), (post1.run_id, NEXT_ATTEMPT, "failed"),
                       (post1r.run_id, RE_REQUEST, "success")],
        t15[0].run_id: [(t15[0].run_id, None, "failed"), (t15[1].run_id, RE_REQUEST, "canceled"),
                        (t15[2].run_id, RE_REQUEST, "success")],
    }
    steps = [(s["run_id"], s["step_key"], s["retries"], s["waits_seconds"], s["ended"], s["status"])
             for s in data["step_retries"]]
    assert steps == [(first.run_id, "scrape_combination[T_NZ_20261129]", 2, [0.01, 0.01], "success", "failed")]
    assert [g["retry_number"] for g in data["groups"]] == [1]  # the re-execution, as before

    assert main(["audit", "--retries"]) == 0
    out = capsys.readouterr().out
    for run in (first.run_id, again.run_id, post0.run_id, post1r.run_id, t15[2].run_id):
        assert run[:8] in out
    assert "re-request" in out and "next attempt" in out and "re-execution" in out
    assert "scrape_combination[T_NZ_20261129]" in out and "0.01 s, 0.01 s" in out
