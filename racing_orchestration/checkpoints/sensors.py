"""Checkpoint sensors: each tick reads the race database's due window (never the TAB API) and claims what it requests.

Launch ahead, fetch on time: a checkpoint is requested RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS before its target, so
its run is through the queue and started by then; the run waits for the target before calling TAB (jobs.py).

The post-race sensor also requests the next attempt of each race whose post-race run found it not yet Final, once the
ledger's `next_attempt_at` has passed (run key `race:post:n`): the 5/5/10-minute chain waits in the ledger, not in a
live run worker.

Exactly once per race and checkpoint, across daemon restarts and run deletion: a checkpoint is claimed in the
`race_checkpoints` ledger (INSERT ... ON CONFLICT DO NOTHING) in the same transaction that decides it, and only a won
claim becomes a RunRequest; the run_key `race:checkpoint` is a second guard while the run still exists.

Never stuck `requested` or `running`: a claimed row no run has taken (or whose run died) after LAUNCH_GAP is requested again under the same key if no
run carries it, or under `race:checkpoint:retry<n>` if its run failed or was canceled (Dagster's run-key dedupe blocks
a key once any run has it, failed ones included), at most MAX_RELAUNCHES times and only while the checkpoint is still
worth taking; otherwise the ledger row ends `failed` (or `skipped`) with the reason.
"""

import datetime as dt
import threading

import dagster as dg
import sqlalchemy as sa

from orchestration_core.dagster_tags import AUTO_RETRY_RUN_ID_TAG, RUN_KEY_TAG, WILL_RETRY_TAG
from orchestration_core.postgres import create_engine
from racing_orchestration.checkpoints.due import DueCheckpoint, TickPlan, plan_tick
from racing_orchestration.checkpoints.fetch import (
    TAG_ATTEMPT,
    TAG_LATE,
    TAG_MEETING_ID,
    TAG_PREVIOUS_RUN_ID,
    TAG_RACE_ID,
    TAG_SCHEDULED_FOR,
)
from racing_orchestration.checkpoints.jobs import CHECKPOINT_JOBS, checkpoint_run_config
from racing_orchestration.checkpoints.windows import (
    CHECKPOINTS,
    SENSOR_INTERVAL_SECONDS,
    WAIT_SLACK,
    Action,
    CheckpointSpec,
    run_key,
)
from racing_orchestration.race_db.migrations import assert_schema_current, normalise_url
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.settings import launch_ahead

_engines: dict[str, sa.Engine] = {}
_engines_lock = threading.Lock()


def sensor_now() -> dt.datetime:
    """The sensors' clock (tests replace it)."""
    return dt.datetime.now(dt.UTC)


def sensor_engine(race_db: RaceDatabase) -> sa.Engine:
    """One small pooled engine per database URL for the life of the code server: a tick then costs one query, not
    a new connection and a schema check (the resource object is rebuilt for every tick)."""
    with _engines_lock:
        engine = _engines.get(race_db.url)
        if engine is None:
            engine = create_engine(normalise_url(race_db.url), "sensor")
            try:
                assert_schema_current(engine)
            except Exception:
                engine.dispose()
                raise
            _engines[race_db.url] = engine
        return engine


def run_request(spec: CheckpointSpec, due: DueCheckpoint, ahead: dt.timedelta = dt.timedelta(0)) -> dg.RunRequest:
    """The run of one claimed checkpoint; it may wait up to the margin (plus slack) for its target."""
    scheduled = due.scheduled_for.astimezone(dt.UTC).isoformat()
    tags = {TAG_RACE_ID: due.race_id, TAG_MEETING_ID: due.meeting_id, TAG_SCHEDULED_FOR: scheduled}
    if due.decision.action == Action.REQUEST_LATE:
        tags[TAG_LATE] = "true"
    if not spec.pre_race:
        tags[TAG_ATTEMPT] = str(due.attempt)
    if due.previous_run_id:
        tags[TAG_PREVIOUS_RUN_ID] = due.previous_run_id
    return dg.RunRequest(run_key=due.run_key or run_key(due.race_id, spec, due.attempt),
                         run_config=checkpoint_run_config(due.race_id, spec.name, scheduled, due.attempt,
                                                          max_wait_seconds=(ahead + WAIT_SLACK).total_seconds()),
                         tags=tags)


# How long after a run failed Dagster's run retries (dagster.yaml `run_retries`) may take to create the retry it
# promised (tag dagster/will_retry) before the sensor stops waiting for it and requests the checkpoint itself.
RUN_RETRY_GRACE = dt.timedelta(minutes=2)
# A retry of a retry of ...: run_retries allows 1 (dagster.yaml); the bound only guards against a tag cycle.
MAX_RETRY_CHAIN = 5


def status_counting_run_retries(status: str, will_retry: str | None, ended_ago: dt.timedelta | None,
                                grace: dt.timedelta = RUN_RETRY_GRACE) -> str:
    """A failed run that Dagster's run retries will re-execute counts as QUEUED until the retry exists (at most
    `grace` after it ended): the retry carries the same run key and will take the checkpoint, so requesting it again
    under a new key now would take it twice."""
    if status == "FAILURE" and will_retry == "true" and ended_ago is not None and ended_ago < grace:
        return "QUEUED"
    return status


def newest_run_status(instance: dg.DagsterInstance, key: str, run_id: str | None = None) -> str | None:
    """The status name of run `run_id` if given (the ledger's), else of the newest run carrying `key`; followed to
    the automatic retry Dagster made of it (a retry copies the run key and tags); None when there is none."""
    if run_id is not None:
        run = instance.get_run_by_id(run_id)
    else:
        run = next(iter(instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: key}), limit=1)), None)
    for _ in range(MAX_RETRY_CHAIN):
        retry = instance.get_run_by_id(run.tags[AUTO_RETRY_RUN_ID_TAG]) if run and AUTO_RETRY_RUN_ID_TAG in run.tags else None
        if retry is None:
            break
        run = retry
    if run is None:
        return None
    ended_ago = None
    if run.status == dg.DagsterRunStatus.FAILURE and run.tags.get(WILL_RETRY_TAG) == "true":
        record = instance.get_run_record_by_id(run.run_id)
        if record is not None:
            ended = (dt.datetime.fromtimestamp(record.end_time, dt.UTC) if record.end_time is not None
                     else record.update_timestamp.replace(tzinfo=record.update_timestamp.tzinfo or dt.UTC))
            ended_ago = sensor_now() - ended
    return status_counting_run_retries(run.status.value, run.tags.get(WILL_RETRY_TAG), ended_ago, RUN_RETRY_GRACE)


def skip_message(spec: CheckpointSpec, plan: TickPlan, now: dt.datetime, ahead: dt.timedelta = dt.timedelta(0)) -> str:
    parts = [f"No {spec.label} checkpoint due at {now:%H:%M:%S} UTC"]
    if plan.skipped:
        reasons = "; ".join(f"{d.race_id}: {d.decision.reason}" for d in plan.skipped[:5])
        more = f" (+{len(plan.skipped) - 5} more)" if len(plan.skipped) > 5 else ""
        parts.append(f"recorded {len(plan.skipped)} as skipped in the ledger: {reasons}{more}")
    if plan.failed:
        reasons = "; ".join(f"{d.race_id}: {d.decision.reason}" for d in plan.failed[:5])
        more = f" (+{len(plan.failed) - 5} more)" if len(plan.failed) > 5 else ""
        parts.append(f"recorded {len(plan.failed)} as failed in the ledger: {reasons}{more}")
    if plan.next_due is not None:
        parts.append(f"next due at {plan.next_due.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC "
                     f"(requested {ahead.total_seconds():.0f} s ahead)")
    else:
        parts.append("no later race in the race database")
    return "; ".join(parts)


def evaluate(spec: CheckpointSpec, context: dg.SensorEvaluationContext, race_db: RaceDatabase) -> dg.SensorResult | dg.SkipReason:
    now, ahead = sensor_now(), launch_ahead()
    with sensor_engine(race_db).begin() as conn:
        plan = plan_tick(conn, spec, now, run_status=lambda key, run_id: newest_run_status(context.instance, key, run_id),
                         ahead=ahead)
    for due in plan.skipped:
        context.log.warning(f"{spec.label} of race {due.race_id} skipped: {due.decision.reason}")
    for due in plan.failed:
        context.log.error(f"{spec.label} of race {due.race_id} failed: {due.decision.reason}")
    requests = []
    for due in plan.requests:
        if due.relaunch:
            context.log.warning(f"{spec.label} of race {due.race_id}: {due.decision.reason}")
        elif due.decision.action == Action.REQUEST_LATE:
            context.log.warning(f"{spec.label} of race {due.race_id} taken late: {due.decision.reason}")
        elif due.attempt:
            context.log.info(f"{spec.label} of race {due.race_id}: attempt {due.attempt} (not Final yet)")
        requests.append(run_request(spec, due, ahead))
    if not requests:
        return dg.SkipReason(skip_message(spec, plan, now, ahead))
    return dg.SensorResult(run_requests=requests)


def build_checkpoint_sensor(spec: CheckpointSpec) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{spec.job_name}_sensor",
        job=CHECKPOINT_JOBS[spec.name],
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Requests {spec.job_name} for each race whose {spec.label} time is within the launch-ahead margin "
        "(start time from the race database; the run waits for the time itself); each race once, recorded in the "
        "race_checkpoints ledger.",
    )
    def checkpoint_sensor(context: dg.SensorEvaluationContext, race_db: RaceDatabase):
        return evaluate(spec, context, race_db)

    return checkpoint_sensor


CHECKPOINT_SENSORS = {name: build_checkpoint_sensor(spec) for name, spec in CHECKPOINTS.items()}
pre_race_t60_sensor = CHECKPOINT_SENSORS["t60"]
pre_race_t15_sensor = CHECKPOINT_SENSORS["t15"]
post_race_t5_sensor = CHECKPOINT_SENSORS["post"]
