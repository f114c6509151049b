"""Postgres stopped for 30 s and then for 2 minutes in the middle of a dense window: nothing lost, nothing twice.

The incident this guards against (issue "Nothing lost"): with Postgres down ~30 s in a dense window, a T-15 run failed
while its code location could not reach the database, its automatic retry failed at dequeue, and the checkpoint was
never taken. Here the whole local stack (daemon, gRPC code servers started by `dagster dev`, the control API, the
simulated feed in dense mode) runs on a Postgres of the test's own, holding Dagster's storage and the race database as
in production; the test stops that Postgres (`pg_ctl stop -m fast`) twice and starts it again on the same data
directory and socket, and touches nothing else.

The dense window has a race every 2 minutes, so a race's T+5 and the T-15 of the race ten places later fall due at the
same moment: each outage is placed around such a moment (and, for the 2-minute one, around a whole one), and one more
falls due after the second outage. At the end every checkpoint due since the races were loaded must be `done`, taken
by exactly one successful run (the ledger's), with one odds snapshot per runner written by that run and the feed having
served each race's event no more often than runs asked for it; `/health` answered 503 during each outage and 200
after, and no process was restarted. The catch-up checkpoints (already past when the races were loaded) must be done
too, except where an outage held them until the jump (their run queued behind the burst while the queue stood
still, or a run that died in it): those end with the reason, and no pre-race odds anywhere were captured after their
race's jump.

The scenario runs once, in the module's `outage_run` fixture, and each of those claims is a test of its own on what it
observed (so a failure names the claim, and under xdist the worker holding this module has queued tests to run).
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import yaml
from dagster_graphql import DagsterGraphQLClient

from local_stack.embedded_postgres import start_embedded_postgres
from local_stack.stack import LocalStack, StackOptions, free_port
from racing_orchestration.checkpoints.jobs import POST_RACE_MAX_RUNTIME_SECONDS, PRE_RACE_MAX_RUNTIME_SECONDS
from racing_orchestration.checkpoints.windows import CHECKPOINTS, due_time
from tests.conftest import REPO_ROOT
from tests.e2e.live_stack import HTTP, graphql_runs, run_errors, run_events, tags_of, wait_for
from tests.restartable_postgres import RestartablePostgres

pytestmark = [pytest.mark.integration, pytest.mark.slow]

API_KEY = "outage-test-key"
ARTIFACTS = REPO_ROOT / "test-artifacts"
RACE_EVERY = dt.timedelta(minutes=2)
# A race every 2 minutes from 3 minutes before the feed starts; post-race results are Final well before T+5. A race's
# T+5 meets the T-15 of the race ten places later at its start + 5 min: the first such moments come 2, 4, 6, ...
# minutes after the feed starts, and the outages begin at the first one the loaded races leave room for (SETTLE). A
# later first race only makes the test wait, its stack idling: with the first race 1 minute before the feed, the first
# outage began 203 s after the races were loaded 22 s into the feed.
FIRST_RACE_LEAD = dt.timedelta(minutes=-3)  # --dense-lead below
DENSE_SIM_ARGS = ["--dense-every", "2", "--dense-races", "20", "--dense-lead", "-3",
                  "--interim-after", "20", "--final-after", "40"]
SHORT_OUTAGE = dt.timedelta(seconds=30)
LONG_OUTAGE = dt.timedelta(minutes=2)
# How long before its first moment an outage may start: the stack has to be up and the races loaded first.
SETTLE = dt.timedelta(seconds=45)
# Generous: the machine is shared; the product's own bound is the checkpoints' validity (T-15 before the jump).
SETTLE_TIMEOUT_SECONDS = 1500
UNFINISHED = ("requested", "requested_late", "running")
# Run monitoring as the stack's instance (dagster.yaml) configures it: how often it looks, how long a cancel may take.
RUN_MONITORING = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())["run_monitoring"]
# How long after an outage's end a checkpoint run alive across it may still not have ended. Its op may have committed
# (the ledger `done`, its odds written) just before Postgres stopped, and its worker then hang: the local launcher
# cannot see a dead worker, so the run stays STARTED until its max runtime, and run monitoring fails it (a poll, the
# cancel timeout, another poll; tests/orchestration_core/test_run_workers.py). Seen: a catch-up T-60 fetching as the
# 2-minute outage began, still STARTED 180 s after every checkpoint had ended.
RUN_HELD_BY_AN_OUTAGE = dt.timedelta(seconds=max(PRE_RACE_MAX_RUNTIME_SECONDS, POST_RACE_MAX_RUNTIME_SECONDS)
                                     + 2 * RUN_MONITORING["poll_interval_seconds"]
                                     + RUN_MONITORING["cancel_timeout_seconds"])
# How long after an outage ends a checkpoint may still be held by it on the local stack. The queue stands still while
# Postgres is down and then works off the burst of 25 catch-up runs a few a minute on a loaded host (seen: a T-60
# queued 4 min 21 s, started 7 s after its race jumped, 49 s after the 30 s outage). At worst a run is held as above
# (RUN_HELD_BY_AN_OUTAGE); the sensor then looks again within its 120 s launch gap and a 15 s tick, and the new run
# needs a minute or two to start on a loaded host. A catch-up checkpoint of a race starting within this of an outage's
# end may therefore miss the jump: it must then end with the reason (the run refuses odds fetched after the jump), and
# any later race's must be done.
HELD_BY_AN_OUTAGE = RUN_HELD_BY_AN_OUTAGE + dt.timedelta(seconds=120 + 15 + 145)
# Beyond any bound above, for a loaded host's slower polls and requests.
LOADED_HOST_SLACK = dt.timedelta(seconds=60)
# The least wait for the ledger's runs to end once every checkpoint has: a run ends a moment after its op wrote the
# ledger, that moment longer on a loaded host.
LEDGER_RUNS_END_WAIT_SECONDS = 180
ENDED = ("SUCCESS", "FAILURE", "CANCELED")
# The dense card races in only some combinations: no 30-minute retries of the empty ones.
DENSE_CARD_SCRAPE = {"ops": {"scrape_combination": {"config": {"retry_empty": False}}}}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Outage:
    name: str
    stopped_at: dt.datetime
    started_at: dt.datetime
    health: list[tuple[dt.datetime, str]] = field(default_factory=list)


@dataclass
class OutageRun:
    """What the scenario observed, for the tests below."""

    stack: LocalStack
    starts: dict[str, dt.datetime]  # race id -> start time, as loaded
    due: dict[tuple[str, str], dt.datetime]  # (race id, checkpoint) -> due time, for those due in the window
    late: set[tuple[str, str]]  # pre-race checkpoints already past when the races were loaded
    rows: dict[tuple[str, str], sa.Row]  # the ledger once every due checkpoint had ended
    outages: list[Outage]
    report: str
    runs: list[dict] = field(default_factory=list)  # every checkpoint run, once the ledger's had ended

    def runs_of_race(self, race_id: str) -> list[dict]:
        return [r for r in self.runs if tags_of(r).get("racing/race_id") == race_id]

    def held_by_an_outage(self, race_id: str) -> bool:
        """A run of the race was alive across an outage, and the race started within HELD_BY_AN_OUTAGE of its end."""
        for outage in self.outages:
            alive = any(r["creationTime"] <= outage.started_at.timestamp()
                        and (r["endTime"] or float("inf")) >= outage.stopped_at.timestamp()
                        for r in self.runs_of_race(race_id))
            if alive and self.starts[race_id] - outage.started_at <= HELD_BY_AN_OUTAGE:
                return True
        return False

    def queued_past_the_jump(self, race_id: str, checkpoint: str) -> bool:
        """No run of the checkpoint started before its race was within a minute of the jump (the time a run worker
        takes to load its location and fetch, at load 20): each was queued that long, by an outage or behind the
        catch-up burst on a loaded host (e.g. requested 2 min 13 s before the start, started as it jumped), so none
        had a pre-race market to take."""
        job = CHECKPOINTS[checkpoint].job_name
        too_late = (self.starts[race_id] - dt.timedelta(seconds=60)).timestamp()
        runs = [r for r in self.runs_of_race(race_id) if r["jobName"] == job]
        return all(r["startTime"] is None or r["startTime"] >= too_late for r in runs)

    def describe_runs(self, race_id: str) -> list[str]:
        def at(seconds: float | None) -> str:
            return "-" if seconds is None else f"{dt.datetime.fromtimestamp(seconds, dt.UTC):%H:%M:%S}"
        return [f"{r['jobName']} {r['status']} created {at(r['creationTime'])} started {at(r['startTime'])} "
                f"ended {at(r['endTime'])} key {tags_of(r).get('dagster/run_key')}" for r in self.runs_of_race(race_id)]


class HealthWatch(threading.Thread):
    """GET /health about every second for the whole test: (time, status code or error class)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.done = url, [], threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            at = utcnow()
            try:
                answer = str(HTTP.get(self.url, timeout=10).status_code)
            except httpx.HTTPError as exc:
                answer = type(exc).__name__
            self.samples.append((at, answer))
            self.done.wait(1.0)

    def between(self, lo: dt.datetime, hi: dt.datetime) -> list[tuple[dt.datetime, str]]:
        return [s for s in self.samples if lo <= s[0] <= hi]


def query(url: str, sql: str, **params) -> list[sa.Row]:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params))
    finally:
        engine.dispose()


def coincidences(starts: list[dt.datetime]) -> list[dt.datetime]:
    """Moments when one race's T+5 and another's T-15 fall due together."""
    posts = {due_time(s, CHECKPOINTS["post"]) for s in starts}
    return sorted(posts & {due_time(s, CHECKPOINTS["t15"]) for s in starts})


def runs_of(dagster_url: str, job: str) -> list[dict]:
    """Every run of `job`, asking again if the webserver answers 500 (it may while it reconnects or is loaded)."""
    def attempt():
        try:
            return graphql_runs(dagster_url, {"pipelineName": job}, limit=1000) or [None]
        except httpx.HTTPError:
            return None

    return [r for r in wait_for(f"the runs of {job}", attempt, 300, 5) if r is not None]


def sleep_until(moment: dt.datetime) -> None:
    while (left := (moment - utcnow()).total_seconds()) > 0:
        time.sleep(min(left, 5.0))


@pytest.fixture(scope="module")
def outage_stack():
    data_dir = Path(tempfile.mkdtemp(prefix="outage-stack-"))
    postgres = RestartablePostgres(start_embedded_postgres(data_dir / "pgdata", delete_on_exit=True))
    options = StackOptions(data_dir=data_dir, dagster_port=free_port(), sim_port=free_port(), api_port=free_port(),
                           sim_args=DENSE_SIM_ARGS, postgres_url=postgres.url, api_key=API_KEY)
    stack = LocalStack(options)
    try:
        stack.start()
        yield stack, postgres
    finally:
        stack.stop()
        postgres.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)  # its Dagster home and exports: one left in /tmp per run before


@pytest.fixture(scope="module")
def outage_run(outage_stack) -> OutageRun:
    """The scenario: load the dense card, stop Postgres twice around T+5/T-15 moments, wait until every due
    checkpoint has ended; prints the figures RELIABILITY.md quotes."""
    stack, postgres = outage_stack
    racing_url = stack.env["RACING_DATABASE_URL"]
    graphql = DagsterGraphQLClient("127.0.0.1", port_number=stack.options.dagster_port, timeout=60)
    scrape = graphql.submit_job_execution("morning_scrape", repository_location_name="racing_orchestration",
                                          repository_name="__repository__", run_config=DENSE_CARD_SCRAPE)
    wait_for("the morning scrape", lambda: graphql.get_run_status(scrape).value in ("SUCCESS", "FAILURE"), 600, 3)
    assert graphql.get_run_status(scrape).value == "SUCCESS", run_errors(stack.dagster_url, scrape)
    loaded_at = utcnow()
    starts = {r.race_id: r.start_time for r in query(racing_url, "SELECT race_id, start_time FROM races")}
    assert len(starts) == 20
    feed_started = min(starts.values()) - FIRST_RACE_LEAD

    # Place the outages on the schedule: each around a moment when a T+5 and a T-15 fall due together.
    moments = [m for m in coincidences(sorted(starts.values())) if m - SHORT_OUTAGE / 2 >= loaded_at + SETTLE]
    assert moments, f"the stack took too long to start: no T+5/T-15 moment left after {loaded_at:%H:%M:%S}"
    first = moments[0]
    second = next((m for m in moments if m >= first + 2 * RACE_EVERY), None)
    after = next((m for m in moments if second and m > second + LONG_OUTAGE / 2), None)
    assert second and after, f"the dense window is too short for both outages from {first:%H:%M:%S}: {moments}"
    plan = [("30 s", first - SHORT_OUTAGE / 2, SHORT_OUTAGE), ("2 min", second - LONG_OUTAGE / 2, LONG_OUTAGE)]

    health = HealthWatch(f"{stack.api_url}/health")
    health.start()
    outages: list[Outage] = []
    for name, begin, length in plan:
        sleep_until(begin)
        postgres.stop()
        stopped_at = utcnow()
        time.sleep(length.total_seconds())
        started_at = utcnow()
        postgres.start()
        outages.append(Outage(name, stopped_at, started_at))

    # Every checkpoint due since the races were loaded, up to the one after the second outage, must end `done`.
    cutoff = after + dt.timedelta(seconds=1)
    due = {(race_id, name): due_time(start, spec) for race_id, start in starts.items()
           for name, spec in CHECKPOINTS.items() if loaded_at <= due_time(start, spec) <= cutoff}
    # Checkpoints already past when the races were loaded (every T-60, the first T-15s) are taken late if their race
    # had not started yet; those of races starting before that may end `skipped` with the reason.
    late = {(race_id, name) for race_id, start in starts.items() for name, spec in CHECKPOINTS.items()
            if spec.pre_race and due_time(start, spec) < loaded_at and start > loaded_at + RACE_EVERY}
    sleep_until(cutoff)

    def ledger() -> dict[tuple[str, str], sa.Row]:
        rows = query(racing_url, "SELECT race_id, checkpoint, state, run_id, note, relaunches, run_key, updated_at, "
                                 "next_attempt_at FROM race_checkpoints")
        return {(r.race_id, r.checkpoint): r for r in rows}

    def settled():
        rows = ledger()
        open_rows = [k for k in [*due, *late]
                     if k not in rows or rows[k].state in UNFINISHED or rows[k].next_attempt_at]
        # A due pre-race checkpoint still open when its race has started is lost for good: stop waiting and say so.
        # A catch-up one may be held past the jump by an outage (HELD_BY_AN_OUTAGE): wait for it to end.
        lost = [k for k in open_rows if k in due and CHECKPOINTS[k[1]].pre_race and utcnow() > starts[k[0]]]
        return rows if not open_rows or lost else None

    settling = time.monotonic()
    rows = wait_for("every due checkpoint to end", settled, SETTLE_TIMEOUT_SECONDS, 5)
    settled_after = time.monotonic() - settling
    # The ledger says `done` as soon as the op has written; the run itself ends (SUCCESS) a moment later, or, when
    # Postgres stopped between the two, by RUN_HELD_BY_AN_OUTAGE after the outage. The exactly-once test reads the
    # runs, so wait for the ledger's runs to end first (seen once: a late T-60 whose run was not SUCCESS yet when they
    # were read).
    ledger_runs = sorted({rows[k].run_id for k in [*due, *late] if k in rows and rows[k].run_id})

    not_ended: dict[str, str] = {}  # the last answer's runs not yet ended, named in a timeout's message

    def ledger_runs_ended():
        try:
            listed = graphql_runs(stack.dagster_url, {"runIds": ledger_runs}, limit=1000)
        except httpx.HTTPError:
            return None
        not_ended.clear()
        not_ended.update({r["runId"]: f"{r['jobName']} {r['status']}" for r in listed if r["status"] not in ENDED})
        not_ended.update({run_id: "not listed" for run_id in set(ledger_runs) - {r["runId"] for r in listed}})
        return not not_ended or None

    ending = time.monotonic()
    try:
        runs_end_by = outages[-1].started_at + RUN_HELD_BY_AN_OUTAGE + LOADED_HOST_SLACK
        wait_for("the ledger's runs to end", ledger_runs_ended,
                 max(LEDGER_RUNS_END_WAIT_SECONDS, (runs_end_by - utcnow()).total_seconds()), 2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; not ended: {not_ended}") from None
    ended_after = time.monotonic() - ending
    runs = [r for job in ("pre_race_t60", "pre_race_t15", "post_race_t5") for r in runs_of(stack.dagster_url, job)]
    wait_for("/health 200 after the last outage",
             lambda: any(at > outages[-1].started_at and answer == "200" for at, answer in health.samples), 120, 2)
    health.done.set()
    health.join(15)

    # Report first (the figures RELIABILITY.md quotes), then assert.
    report = []
    for outage in outages:
        during = {k for k, at in due.items() if outage.stopped_at <= at <= outage.started_at}
        done_at = [rows[k].updated_at for k in during if rows[k].state == "done"]
        recovered = max(done_at) - outage.started_at if done_at else None
        answers = Counter(a for _, a in health.between(outage.stopped_at + dt.timedelta(seconds=2), outage.started_at))
        first_ok = next((at for at, a in health.samples if at > outage.started_at and a == "200"), None)
        report.append(f"outage {outage.name} ({outage.stopped_at:%H:%M:%S}-{outage.started_at:%H:%M:%S}): due during "
                      f"it {sorted(during)}; done {len(done_at)}/{len(during)}; /health during {dict(answers)}, 200 "
                      f"again after {(first_ok - outage.started_at).total_seconds() if first_ok else None} s; "
                      f"checkpoints due during it all done "
                      f"{recovered.total_seconds() if recovered else None} s after Postgres was back")
        outage.health = health.between(outage.stopped_at, outage.started_at)
    states = Counter(rows[k].state for k in due)
    report.append(f"due {len(due)} checkpoints, states {dict(states)}; relaunched "
                  f"{ {f'{k[0][:8]}:{k[1]}': rows[k].relaunches for k in due if rows[k].relaunches} }")
    report.insert(0, f"races loaded {(loaded_at - feed_started).total_seconds():.0f} s after the feed started; "
                     f"first outage {(outages[0].stopped_at - loaded_at).total_seconds():.0f} s after that")
    scenario = OutageRun(stack, starts, due, late, rows, outages, "", runs)
    late_states = Counter(rows[k].state for k in late if k in rows)
    report.append(f"catch-up checkpoints {len(late)}, states {dict(late_states)}")
    # Where the test's own time went after the cutoff (its length varies from 10 to 25 minutes between full runs).
    report.append(f"every due checkpoint ended {settled_after:.0f} s after the cutoff, their runs {ended_after:.0f} s "
                  f"after that; the last to end:")
    for k in sorted((k for k in [*due, *late] if k in rows), key=lambda k: rows[k].updated_at)[-3:]:
        report.append(f"  {k[0][:8]}:{k[1]} {rows[k].state} at {rows[k].updated_at:%H:%M:%S} (relaunches "
                      f"{rows[k].relaunches}); its runs: {scenario.describe_runs(k[0])}")
    for k in sorted(k for k in late if k in rows and rows[k].state != "done"):
        report.append(f"  {k[0][:8]}:{k[1]} {rows[k].state} ({rows[k].note}); race starts "
                      f"{starts[k[0]]:%H:%M:%S}; its runs: {scenario.describe_runs(k[0])}")
    # Why a checkpoint run failed without running a step (it ended the second it started; seen on a loaded host,
    # where the event logs went with the test's Postgres): its engine and failure events, while they can be read.
    for run in [r for r in runs if r["status"] == "FAILURE" and r["startTime"] and r["endTime"]
                and r["endTime"] - r["startTime"] < 1.5][:8]:
        try:
            events = [f"{e['__typename']}: {e.get('message', '')} {((e.get('error') or {}).get('message') or '')[:300]}"
                      for e in run_events(stack.dagster_url, run["runId"])
                      if e["__typename"] in ("EngineEvent", "RunFailureEvent", "ExecutionStepFailureEvent")]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            events = [f"(its events could not be read: {exc!r})"]
        report.append(f"  failed at start: {tags_of(run).get('dagster/run_key')} {run['jobName']}: {events[:4]}")
    scenario.report = "\n".join(report)
    print(scenario.report)
    ARTIFACTS.mkdir(exist_ok=True)  # the figures also when the output is captured (make test runs side by side)
    (ARTIFACTS / "postgres-outage-report.txt").write_text(scenario.report + "\n")
    return scenario


def test_every_checkpoint_due_in_the_window_ends_done(outage_run: OutageRun) -> None:
    rows, due, late, report = outage_run.rows, outage_run.due, outage_run.late, outage_run.report
    not_done = {f"{k[0]}:{k[1]}": (rows[k].state, rows[k].note) for k in due if rows[k].state != "done"}
    assert not not_done, f"checkpoints lost: {not_done}\n{report}"
    # A catch-up checkpoint is done, or, when an outage (HELD_BY_AN_OUTAGE) or the queue held its runs until its race
    # had jumped, ends with the reason; never left open, and never done with odds fetched after the jump.
    for k in late:
        if rows[k].state == "done":
            continue
        says = (k, rows[k].state, rows[k].note, outage_run.describe_runs(k[0]), report)
        assert rows[k].state in ("skipped", "failed") and rows[k].note, says
        assert outage_run.held_by_an_outage(k[0]) or outage_run.queued_past_the_jump(*k), says
    odds = query(outage_run.stack.env["RACING_DATABASE_URL"],
                 "SELECT o.race_id, o.checkpoint, max(o.captured_at) AS last, min(r.start_time) AS start "
                 "FROM odds_snapshots o JOIN races r USING (race_id) GROUP BY o.race_id, o.checkpoint")
    after_the_jump = [(o.race_id, o.checkpoint, o.last, o.start) for o in odds if o.last >= o.start]
    assert not after_the_jump, f"pre-race odds captured after the jump: {after_the_jump}"
    for outage in outage_run.outages:
        assert any(outage.stopped_at <= at <= outage.started_at for k, at in due.items() if k[1] == "t15"), outage
        assert any(outage.stopped_at <= at <= outage.started_at for k, at in due.items() if k[1] == "post"), outage


def test_each_checkpoint_is_taken_by_exactly_one_run_and_fetched_no_more_than_asked(outage_run: OutageRun) -> None:
    stack, rows, due, late = outage_run.stack, outage_run.rows, outage_run.due, outage_run.late
    racing_url = stack.env["RACING_DATABASE_URL"]
    # Exactly once: one successful run per (race, checkpoint), the ledger's; its odds written by that run alone.
    runs = outage_run.runs
    successes: dict[tuple[str, str], list[str]] = defaultdict(list)
    runs_per_race: Counter[str] = Counter()
    for run in runs:
        tags = tags_of(run)
        runs_per_race[tags["racing/race_id"]] += 1
        if run["status"] == "SUCCESS":
            successes[(tags["racing/race_id"], tags["racing/checkpoint"])].append(run["runId"])
    twice = {f"{k[0]}:{k[1]}": ids for k, ids in successes.items() if len(ids) > 1}
    assert not twice, f"checkpoints taken by more than one run: {twice}"
    by_id = {run["runId"]: run for run in runs}
    not_taken = {k for k in late if rows[k].state != "done"}  # ended with a reason (the test above says when)
    for key in [*due, *late]:
        ledger_run = by_id.get(rows[key].run_id)
        if successes.get(key) == [rows[key].run_id]:
            continue
        if key in not_taken:
            assert successes.get(key) is None, (key, rows[key].state, successes.get(key))
            continue
        # Else the run that took it (the ledger's: its odds are its own, below) failed after its op had committed:
        # Postgres went down before the run could record its success. It must have been running across an outage,
        # with no other run succeeding at the checkpoint (seen twice, each time a catch-up T-60).
        assert successes.get(key) is None and ledger_run is not None, (key, successes.get(key), rows[key].run_id)
        ran = (ledger_run["status"], ledger_run["startTime"], ledger_run["endTime"])
        assert ledger_run["status"] == "FAILURE" and any(
            ledger_run["startTime"] is not None and ledger_run["startTime"] <= o.started_at.timestamp()
            and (ledger_run["endTime"] or 0) >= o.stopped_at.timestamp() for o in outage_run.outages), (key, ran)
    odds = query(racing_url, "SELECT race_id, checkpoint, count(*) AS n, count(DISTINCT runner_number) AS runners, "
                             "array_agg(DISTINCT run_id) AS run_ids FROM odds_snapshots GROUP BY race_id, checkpoint")
    # Whose odds they are, for the checkpoints the scenario settled; a later one (due after the cutoff) may be taken
    # between the ledger's reading and this one (seen on a starved run: a T-15 still `requested` when the ledger was
    # read, its odds written by then).
    settled = {*due, *late}
    for row in odds:
        assert row.n == row.runners, f"duplicate odds rows for {row.race_id}:{row.checkpoint}"
        if (row.race_id, row.checkpoint) in settled:
            assert row.run_ids == [rows[(row.race_id, row.checkpoint)].run_id], row
    written = {(r.race_id, r.checkpoint) for r in odds}
    assert {k for k in [*due, *late] if k[1] != "post" and k not in not_taken} <= written
    assert not written & not_taken, written & not_taken
    duplicates = query(racing_url, "SELECT race_id, runner_number FROM results GROUP BY race_id, runner_number "
                                   "HAVING count(*) > 1")
    assert duplicates == []

    # The feed served each race's event at least once per checkpoint taken and never more often than runs asked.
    served = httpx.get(f"{stack.sim_base_url.split('/affiliates')[0]}/_sim/stats", timeout=30).json()["events_served"]
    for race_id in {k[0] for k in due}:
        taken = sum(1 for k in successes if k[0] == race_id)
        assert taken <= served.get(race_id, 0), (race_id, taken, served.get(race_id))
        # A failed attempt may have fetched before the database refused it; each run fetches at most once per step
        # attempt (the pre-race retry policy allows 3).
        assert served.get(race_id, 0) <= 3 * runs_per_race[race_id], (race_id, served.get(race_id), runs_per_race)


def test_health_answers_503_during_each_outage_and_200_after(outage_run: OutageRun) -> None:
    # /health said 503 (within its bound, not a hang) while Postgres was down, 200 after (the scenario waited for it).
    for outage in outage_run.outages:
        during = [a for at, a in outage.health if at >= outage.stopped_at + dt.timedelta(seconds=2)]
        assert during and set(during) == {"503"}, (outage.name, Counter(during))


def test_no_process_was_restarted_and_the_stack_is_healthy(outage_run: OutageRun) -> None:
    stack = outage_run.stack
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} exited with {process.returncode}"
    final = httpx.get(f"{stack.api_url}/health", timeout=30).json()
    assert final["status"] == "ok" and final["scheduler_running"], final
