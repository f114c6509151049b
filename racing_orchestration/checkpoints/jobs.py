"""Checkpoint jobs `pre_race_t60`, `pre_race_t15` (odds snapshot) and `post_race_t5` (results until Final).

Each run is for one race, configured with (race_id, checkpoint, scheduled_for) and tagged `racing/race_id`,
`racing/meeting_id`, `racing/checkpoint`, `racing/scheduled_for` (dagster.yaml allows one run per race at a time).
Runs use the in-process executor: a single step needs no step subprocess, which halves a run's memory.

Launch ahead, fetch on time: a sensor-requested run starts up to RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS before its
target and waits for it (re-reading the race's start time) before calling TAB; one that starts after it fetches at
once and, beyond the sensors' grace, is tagged `racing/late=true`. Manual runs (`racing check`) fetch at once.

Besides its own asset's materialization, a run that stored the race's event (runners, status, start time) or ended
its ledger row records the day's `race_cards` checks again (race_data/card_checks.py), so they judge the data as it
is now, not as the morning scrape left it.
"""

import datetime as dt

import dagster as dg
import sqlalchemy as sa

from racing_orchestration.checkpoints.fetch import (
    TAG_ATTEMPT,
    TAG_AWAITING_FINAL,
    TAG_CHECKPOINT,
    TAG_LATE,
    TAG_MEETING_ID,
    TAG_PROVISIONAL,
    TAG_RESCHEDULED,
    TAG_SUPERSEDED,
    TAG_TRIGGERED_BY,
    WaitResult,
    fetch_event,
    StandDown,
    mark_ledger,
    mark_ledger_in,
    now_utc,
    take_checkpoint,
    wait_for_target,
)
from racing_orchestration.checkpoints.windows import (
    CHECKPOINTS,
    GRACE,
    CheckpointSpec,
    Wait,
    checkpoint_spec,
    fetch_target,
    no_longer_pre_race,
)
from racing_orchestration.race_data.card_checks import record_card_checks
from racing_orchestration.race_data.catalog import (
    ODDS_BY_CHECKPOINT,
    RACE_RESULTS,
    log_materialization,
    race_materialization,
    racing_day_key,
)
from racing_orchestration.race_db.checkpoints import await_next_attempt, reschedule_checkpoint
from racing_orchestration.race_db.queries import race_row
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.race_db.store import (
    UnknownRaceError,
    record_scrapes,
    store_dividends,
    store_odds_snapshot,
    store_results,
    upsert_event,
)
from orchestration_core.dagster_tags import RUN_KEY_TAG
from orchestration_core.run_config_rules import literal_config_schema
from orchestration_core.settings import racing_timezone
from orchestration_core.run_outcome import KIND_RACING, TAG_KIND, Outcome, record_outcome
from racing_orchestration.tab.client import TabApiError, TabClient, TabTransientError
from racing_orchestration.tab.models import TabPayloadError, status_is

# Transient API errors at a pre-race checkpoint: retry after 1 min, then 2 min, then fail.
PRE_RACE_MAX_RETRIES = 2
PRE_RACE_RETRY_POLICY = dg.RetryPolicy(max_retries=PRE_RACE_MAX_RETRIES, delay=60, backoff=dg.Backoff.LINEAR)
# While a race is not Final: check again after 5, 5 and 10 minutes (the old system's chain), then end partial. Each
# check is its own short run; the wait is a ledger row (`next_attempt_at`) the post-race sensor acts on.
POST_RACE_DELAYS_SECONDS = (300.0, 300.0, 600.0)
_TRANSIENT = (TabTransientError, TabPayloadError)
# Longest a checkpoint run may take (Dagster's `dagster/max_runtime`; run monitoring cancels it after that). A run whose
# worker died while Postgres was down could not record its own end: without a bound it stays STARTED for the project's
# 3 h default, its ledger row `running`, and the checkpoint is never requested again. Pre-race: three fetch attempts of
# at most ~60 s each (the client's 3 tries with 10 s timeouts and capped Retry-After waits) and the policy's 60 + 120 s
# waits are 6 min; 8 min leaves room for a loaded machine and still lets the sensor re-request a T-15 before the jump
# (8 min, + one monitoring poll, + the 3 min cancel timeout, + one sensor tick). Post-race: one attempt, no policy.
PRE_RACE_MAX_RUNTIME_SECONDS = 480
POST_RACE_MAX_RUNTIME_SECONDS = 300
MAX_RUNTIME_TAG = "dagster/max_runtime"
# Dagster's run queue launches higher `dagster/priority` first, and in arrival order within one priority. When runs
# queue up (the races loaded after their T-60s passed, a backlog after an outage, a loaded host launching a few runs a
# minute), the checkpoint whose window closes soonest goes first: a T-15 is the last look before the jump, a T-60
# still has 45 minutes, and results stay fetchable after the race. All three rank above the maintenance tasks' 0-99
# (maintenance_jobs/dispatch.py), which lose nothing by waiting a few minutes. Arrival order alone once held a T-15
# queued for 8 minutes behind twenty catch-up T-60s, until its race had started.
PRIORITY_TAG = "dagster/priority"
CHECKPOINT_RUN_PRIORITY = {"t15": 120, "t60": 110, "post": 100}


# A run requested with a target but no margin (e.g. from the launchpad) may wait this long for a moved start.
DEFAULT_MAX_WAIT_SECONDS = 180.0


class CheckpointConfig(dg.Config):
    race_id: str
    checkpoint: str
    scheduled_for: str = ""  # ISO time the checkpoint is due: the fetch waits for it (empty for manual runs: at once)
    # How long the run may wait for a target that moved later (the sensor's margin plus slack); beyond it, give way.
    max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS


class PostRaceConfig(CheckpointConfig):
    checkpoint: str = "post"
    attempt: int = 0  # 0 at T+5; the post-race sensor requests 1..len(retry_delays_seconds) while not Final
    retry_delays_seconds: list[float] = list(POST_RACE_DELAYS_SECONDS)


def _spec(config: CheckpointConfig, pre_race: bool) -> CheckpointSpec:
    try:
        spec = checkpoint_spec(config.checkpoint)
    except ValueError as exc:
        raise dg.Failure(f"checkpoint config is invalid: {exc}", allow_retries=False) from exc
    if spec.pre_race != pre_race:
        raise dg.Failure(f"checkpoint {spec.name!r} does not belong to this job", allow_retries=False)
    if not config.race_id.strip():
        raise dg.Failure("checkpoint config is invalid: race_id is empty", allow_retries=False)
    return spec


def _begin(context: dg.OpExecutionContext, race_db: RaceDatabase, config: CheckpointConfig,
           spec: CheckpointSpec) -> tuple[bool, StandDown | None]:
    """Check the schema, tag the meeting, take the checkpoint in the ledger (mark it running); returns whether the run
    is a manual one, and why it must leave the checkpoint alone when it must."""
    race_db.engine()
    manual = context.run.tags.get(TAG_TRIGGERED_BY) == "manual"
    with race_db.connect() as conn:
        row = race_row(conn, config.race_id)
    if row is not None and TAG_MEETING_ID not in context.run.tags:
        context.instance.add_run_tags(context.run_id, {TAG_MEETING_ID: row.meeting_id})
    if manual:  # a manual re-fetch leaves the sensor's ledger row alone
        return manual, None
    return manual, take_checkpoint(race_db, config.race_id, spec, context.run_id, context.run.tags.get(RUN_KEY_TAG))


def _stand_down(context: dg.OpExecutionContext, config: CheckpointConfig, spec: CheckpointSpec,
                why: StandDown) -> dict:
    """The checkpoint was requested again under another run key (this run's first attempt failed and the sensor
    re-requested it, or Dagster's run retry came late), or it is finished already (a retry of a run that finished it
    but could not record its success): this run calls nothing and stores nothing."""
    note = f"{spec.label} {why.reason}; this run stands down"
    context.log.warning(f"{spec.label} {config.race_id}: {note}")
    context.instance.add_run_tags(context.run_id, {TAG_SUPERSEDED: why.holder})
    record_outcome(context, Outcome.SUCCESS, 0, 0)
    summary = {"race_id": config.race_id, "checkpoint": spec.name, "outcome": "superseded", "holder": why.holder,
               "reason": why.reason}
    context.add_output_metadata(summary)
    return summary


def _wait_for_target(context: dg.OpExecutionContext, race_db: RaceDatabase, config: CheckpointConfig,
                     spec: CheckpointSpec, manual: bool, attempt: int = 0) -> WaitResult | None:
    """Wait until the checkpoint's target (README "Checkpoint timing"); None for runs with no target (manual)."""
    if manual or not config.scheduled_for:
        return None
    try:
        requested = dt.datetime.fromisoformat(config.scheduled_for)
    except ValueError:
        requested = None
    if requested is None or requested.tzinfo is None:
        raise _fail(context, race_db, config, manual, f"checkpoint config is invalid: scheduled_for "
                    f"{config.scheduled_for!r} is not an ISO time with a UTC offset")

    def read_target() -> dt.datetime:
        with race_db.connect() as conn:
            row = race_row(conn, config.race_id)
        return fetch_target(spec, requested, row.start_time if row is not None else None, attempt)

    waited = wait_for_target(read_target, requested, dt.timedelta(seconds=config.max_wait_seconds))
    if waited.action == Wait.FETCH:
        moved = f" (moved from {requested:%H:%M:%S})" if waited.target != requested else ""
        context.log.info(f"{spec.label} {config.race_id}: target {waited.target:%H:%M:%S} UTC{moved}; waited "
                         f"{waited.waited_seconds:.1f} s, fetching {waited.lateness_seconds:.1f} s after it")
        if waited.lateness_seconds > GRACE.total_seconds() and TAG_LATE not in context.run.tags:
            context.log.warning(f"{spec.label} {config.race_id}: the run started {waited.lateness_seconds:.0f} s after "
                                f"its target (grace {GRACE.total_seconds():.0f} s): fetching now, tagged late")
            context.instance.add_run_tags(context.run_id, {TAG_LATE: "true"})
    return waited


def _give_way(context: dg.OpExecutionContext, race_db: RaceDatabase, config: CheckpointConfig, spec: CheckpointSpec,
              waited: WaitResult) -> dict:
    """The race's start moved further than this run may wait: hand the checkpoint back to the sensor at the new time
    (ledger `rescheduled`), which requests it again `ahead` of it under a new run key; no TAB call here."""
    note = (f"start moved: {spec.label} now due {waited.target:%Y-%m-%d %H:%M:%S} UTC, "
            f"{(waited.target - waited.at).total_seconds():.0f} s away (this run may wait "
            f"{config.max_wait_seconds:.0f} s); requested again then")
    with race_db.begin() as conn:
        handed_back = reschedule_checkpoint(conn, config.race_id, spec.name, run_id=context.run_id,
                                            scheduled_for=waited.target, note=note)
    if not handed_back:  # the row is no longer this run's (taken over after a crash?): leave it to its holder
        record_outcome(context, Outcome.FAILED, 0, 1, f"{note}; but the ledger row is no longer this run's")
        raise dg.Failure(f"{note}; but the ledger row is no longer this run's", allow_retries=False)
    context.log.warning(f"{spec.label} {config.race_id}: {note}")
    context.instance.add_run_tags(context.run_id, {TAG_RESCHEDULED: waited.target.astimezone(dt.UTC).isoformat()})
    record_outcome(context, Outcome.SUCCESS, 0, 0)
    summary = {"race_id": config.race_id, "checkpoint": spec.name, "outcome": "rescheduled",
               "target": waited.target.isoformat()}
    context.add_output_metadata(summary)
    return summary


def _timing(waited: WaitResult | None) -> dict:
    if waited is None:
        return {}
    return {"target": waited.target.isoformat(), "waited_s": round(waited.waited_seconds, 3),
            "fetch_lateness_s": round(waited.lateness_seconds, 3)}


def _fail(context: dg.OpExecutionContext, race_db: RaceDatabase, config: CheckpointConfig, manual: bool,
          error: str, ledger_state: str = "failed") -> dg.Failure:
    record_outcome(context, Outcome.FAILED, 0, 1, error)
    mark_ledger(race_db, config.race_id, config.checkpoint, ledger_state, context.run_id, error[:500], manual=manual)
    _record_card_checks(context, race_db, config.race_id)  # an ended T-60 makes the race's runners due
    return dg.Failure(error, allow_retries=False)


@dg.op(description="Fetch the race and store one odds snapshot per runner, scratchings and any start-time change.",
       config_schema=literal_config_schema(CheckpointConfig))
def take_odds_snapshot(context: dg.OpExecutionContext, tab_client: TabClient, race_db: RaceDatabase) -> dict:
    config = CheckpointConfig(**context.op_config)
    spec = _spec(config, pre_race=True)
    manual, stand_down = _begin(context, race_db, config, spec)
    if stand_down is not None:
        return _stand_down(context, config, spec, stand_down)
    waited = _wait_for_target(context, race_db, config, spec, manual)
    if waited is not None and waited.action == Wait.RESCHEDULE:
        return _give_way(context, race_db, config, spec, waited)
    try:
        event, calls = fetch_event(tab_client, race_db, config.race_id, context.run_id)
    except _TRANSIENT as exc:
        if context.retry_number < PRE_RACE_MAX_RETRIES:
            context.log.warning(f"{spec.label} {config.race_id}: {exc}; the retry policy tries again")
            raise
        raise _fail(context, race_db, config, manual, f"{spec.label} fetch failed after "
                    f"{context.retry_number + 1} attempts: {exc}") from exc
    except TabApiError as exc:
        raise _fail(context, race_db, config, manual, f"{spec.label} fetch failed: {exc}") from exc
    if (too_late := no_longer_pre_race(spec, event.race.status)) is not None:
        # Keep what the event says about the race and the call in the audit, store no odds; the checkpoint ends
        # `skipped` with the reason (as the sensor's for one it finds past the jump), and the run fails so a person
        # hears of the lost snapshot.
        with race_db.begin() as conn:
            upsert_event(conn, event)
            record_scrapes(conn, calls, context.run_id)
        raise _fail(context, race_db, config, manual, f"{spec.label} {too_late}", ledger_state="skipped")
    with race_db.connect() as conn:
        before = race_row(conn, config.race_id)
    try:
        with race_db.begin() as conn:
            upsert_event(conn, event)
            stored = 0
            if not event.is_abandoned:
                stored = store_odds_snapshot(conn, config.race_id, spec.name, event.runners, now_utc(), context.run_id)
            record_scrapes(conn, calls, context.run_id)
            mark_ledger_in(conn, config.race_id, spec.name, "abandoned" if event.is_abandoned else "done",
                           context.run_id, manual=manual)
    except UnknownRaceError as exc:
        raise _fail(context, race_db, config, manual, str(exc)) from exc
    moved = before is not None and before.start_time != event.race.advertised_start
    scratched = sum(r.is_scratched for r in event.runners)
    record_outcome(context, Outcome.SUCCESS, len(event.runners), 0)
    summary = {
        "race_id": config.race_id, "checkpoint": spec.name, "status": event.race.status, "runners": len(event.runners),
        "scratched": scratched, "snapshot_rows_written": stored, "abandoned": event.is_abandoned,
        "start_time": event.race.advertised_start.isoformat(),
        "start_moved_from": before.start_time.isoformat() if moved else "",
        **_timing(waited),
    }
    context.add_output_metadata(summary)
    _record_stored(context, race_db, ODDS_BY_CHECKPOINT[spec.name], config.race_id,
                   f"{spec.label} odds snapshot" + (" (race abandoned: no odds)" if event.is_abandoned else ""),
                   {"status": event.race.status, "runners": len(event.runners), "scratched": scratched,
                    "snapshot_rows": 0 if event.is_abandoned else len({r.runner_number for r in event.runners}),
                    "snapshot_rows_written": stored, "abandoned": event.is_abandoned})
    return summary


@dg.op(description="Fetch the race's result: Final -> results and Final dividends; not Final -> provisional rows, "
                   "and the ledger asks the post-race sensor for the next attempt in 5/5/10 min.",
       config_schema=literal_config_schema(PostRaceConfig))
def check_race_result(context: dg.OpExecutionContext, tab_client: TabClient, race_db: RaceDatabase) -> dict:
    config = PostRaceConfig(**context.op_config)
    spec = _spec(config, pre_race=False)
    delays, attempt = config.retry_delays_seconds, config.attempt
    last = attempt >= len(delays)
    manual, stand_down = _begin(context, race_db, config, spec)
    if stand_down is not None:
        return _stand_down(context, config, spec, stand_down)
    if TAG_ATTEMPT not in context.run.tags:
        context.instance.add_run_tags(context.run_id, {TAG_ATTEMPT: str(attempt)})
    waited = _wait_for_target(context, race_db, config, spec, manual, attempt)
    if waited is not None and waited.action == Wait.RESCHEDULE:
        return _give_way(context, race_db, config, spec, waited)
    try:
        event, calls = fetch_event(tab_client, race_db, config.race_id, context.run_id)
    except _TRANSIENT as exc:
        if not last and not manual:  # an API hiccup uses the same chain: the next check is due anyway
            return _await_final(context, race_db, config, f"fetch failed ({exc})", {"race_id": config.race_id},
                                Outcome.PARTIAL, str(exc))
        raise _fail(context, race_db, config, manual, f"results fetch failed at attempt {attempt}: {exc}") from exc
    except TabApiError as exc:
        raise _fail(context, race_db, config, manual, f"results fetch failed: {exc}") from exc
    status = event.race.status
    try:
        with race_db.begin() as conn:
            upsert_event(conn, event)
            if event.is_final:
                results = store_results(conn, config.race_id, event.results, provisional=False)
                dividends = store_dividends(conn, config.race_id, event.final_dividends())
            elif not event.is_abandoned:
                # Provisional rows: results flagged provisional, Interim dividends kept as their own status rows.
                results = store_results(conn, config.race_id, event.results, provisional=True)
                dividends = store_dividends(conn, config.race_id,
                                            [d for d in event.dividends if not status_is(d.status, "Final")])
            else:
                results = dividends = 0
            record_scrapes(conn, calls, context.run_id)
            if event.is_final or event.is_abandoned:
                mark_ledger_in(conn, config.race_id, "post", "done" if event.is_final else "abandoned",
                               context.run_id, manual=manual)
    except UnknownRaceError as exc:
        raise _fail(context, race_db, config, manual, str(exc)) from exc
    summary = {"race_id": config.race_id, "status": status, "attempt": attempt, "results": len(event.results),
               "final_dividends": len(event.final_dividends()), "rows_written": results + dividends, **_timing(waited)}
    context.add_output_metadata(summary)
    stored = ("Final results and dividends" if event.is_final else "race abandoned: no results"
              if event.is_abandoned else f"provisional results ({status})")
    _record_stored(context, race_db, RACE_RESULTS, config.race_id, f"post-race attempt {attempt}: {stored}",
                   {"status": status, "final": event.is_final, "attempt": attempt, "results": len(event.results),
                    "dividends": len(event.dividends), "final_dividends": len(event.final_dividends()),
                    "rows_written": results + dividends})
    if event.is_abandoned:
        record_outcome(context, Outcome.SUCCESS, 1, 0)
        return {**summary, "outcome": "abandoned"}
    if event.is_final:
        record_outcome(context, Outcome.SUCCESS, 1, 0)
        return {**summary, "outcome": "final"}
    if not last and not manual:
        return _await_final(context, race_db, config, status, summary, Outcome.SUCCESS, "")
    checks = f"{attempt + 1} checks ({', '.join(f'{d:.0f}' for d in delays)} s apart)" if not manual else "a manual check"
    error = f"race still {status} after {checks}: {len(event.results)} results kept provisional"
    context.log.warning(error)
    context.instance.add_run_tags(context.run_id, {TAG_PROVISIONAL: "true"})
    record_outcome(context, Outcome.PARTIAL, 1 if event.results else 0, 1, error)
    mark_ledger(race_db, config.race_id, "post", "provisional", context.run_id, error[:500], manual=manual)
    return {**summary, "outcome": "provisional"}


def _record_stored(context: dg.OpExecutionContext, race_db: RaceDatabase, asset_key: dg.AssetKey, race_id: str,
                   what: str, metadata: dict) -> None:
    """A materialization of the race's racing day recording what this run stored (the catalog's view of it). The data
    and the ledger are stored by now: a race database that cannot be read back costs the catalog event, said in the
    run's log, never the run."""
    try:
        with race_db.connect() as conn:
            race = race_row(conn, race_id)
    except sa.exc.SQLAlchemyError as exc:
        context.log.warning(f"{asset_key.to_user_string()} of race {race_id}: stored, but no materialization "
                            f"recorded: the race database could not be read back ({exc.__class__.__name__})")
        return
    description = f"{what}: race {race.race_number} at {race.meeting_name}" if race is not None else what
    event = race_materialization(asset_key, race, description, metadata) if race is not None else None
    log_materialization(context, event, f"{asset_key.to_user_string()} of race {race_id}")
    _record_card_checks(context, race_db, race_id, race)


def _record_card_checks(context: dg.OpExecutionContext, race_db: RaceDatabase, race_id: str,
                        race: sa.Row | None = None) -> None:
    """The race's event (runners, status, start time) or its ledger row changed what the day's card checks judge:
    evaluate them again and record them under the day's partition, so a check does not stay red for runners now in
    the database. Like the materialization, a database that cannot be read costs the evaluation, said in the run's
    log, never the run."""
    try:
        if race is None:
            with race_db.connect() as conn:
                race = race_row(conn, race_id)
        if race is None or racing_day_key(race.meeting_date) is None:
            return
        checks = record_card_checks(context, race_db, race.meeting_date, now_utc(), racing_timezone())
    except sa.exc.SQLAlchemyError as exc:
        context.log.warning(f"race_cards checks of race {race_id}'s day: not recorded again: the race database "
                            f"could not be read ({exc.__class__.__name__})")
        return
    failed = [c.description for c in checks if not c.passed]
    context.log.info(f"race_cards checks of {race.meeting_date} recorded again: "
                     + ("; ".join(failed) if failed else "all pass"))


def _await_final(context: dg.OpExecutionContext, race_db: RaceDatabase, config: PostRaceConfig, why: str,
                 summary: dict, outcome: Outcome, error: str) -> dict:
    """End this attempt; the ledger row tells the post-race sensor when to request the next one."""
    attempt = config.attempt
    delay = config.retry_delays_seconds[attempt]
    next_at = now_utc() + dt.timedelta(seconds=delay)
    note = f"{why} at attempt {attempt}; attempt {attempt + 1} due {next_at:%H:%M:%S} UTC"
    context.log.info(f"race {config.race_id}: {note}")
    with race_db.begin() as conn:
        await_next_attempt(conn, config.race_id, "post", attempt=attempt, next_attempt_at=next_at,
                           run_id=context.run_id, note=note[:500])
    context.instance.add_run_tags(context.run_id, {TAG_AWAITING_FINAL: "true"})
    record_outcome(context, outcome, 1 if outcome == Outcome.SUCCESS else 0, 0 if outcome == Outcome.SUCCESS else 1,
                   error or None)
    return {**summary, "outcome": "awaiting_final", "next_attempt_at": next_at.isoformat()}


def _job_tags(spec: CheckpointSpec) -> dict[str, str]:
    max_runtime = PRE_RACE_MAX_RUNTIME_SECONDS if spec.pre_race else POST_RACE_MAX_RUNTIME_SECONDS
    return {TAG_KIND: KIND_RACING, TAG_CHECKPOINT: spec.name, MAX_RUNTIME_TAG: str(max_runtime),
            PRIORITY_TAG: str(CHECKPOINT_RUN_PRIORITY[spec.name])}


def build_checkpoint_jobs(pre_race_policy: dg.RetryPolicy = PRE_RACE_RETRY_POLICY) -> dict[str, dg.JobDefinition]:
    """The three checkpoint jobs; tests pass a pre-race policy with short delays (same retry count)."""
    jobs: dict[str, dg.JobDefinition] = {}
    for spec in CHECKPOINTS.values():
        op = take_odds_snapshot.with_retry_policy(pre_race_policy) if spec.pre_race else check_race_result

        @dg.job(name=spec.job_name, tags=_job_tags(spec), executor_def=dg.in_process_executor,
                description=f"{spec.label} checkpoint of one race ({'odds snapshot' if spec.pre_race else 'results until Final'}).")
        def checkpoint_job() -> None:
            op()

        jobs[spec.name] = checkpoint_job
    return jobs


def checkpoint_run_config(race_id: str, checkpoint: str, scheduled_for: str = "", attempt: int = 0,
                          max_wait_seconds: float | None = None) -> dict:
    pre_race = checkpoint_spec(checkpoint).pre_race
    op_name = "take_odds_snapshot" if pre_race else "check_race_result"
    config: dict = {"race_id": race_id, "checkpoint": checkpoint, "scheduled_for": scheduled_for}
    if max_wait_seconds is not None:
        config["max_wait_seconds"] = max_wait_seconds
    if not pre_race:
        config["attempt"] = attempt
    return {"ops": {op_name: {"config": config}}}


CHECKPOINT_JOBS = build_checkpoint_jobs()
pre_race_t60 = CHECKPOINT_JOBS["t60"]
pre_race_t15 = CHECKPOINT_JOBS["t15"]
post_race_t5 = CHECKPOINT_JOBS["post"]
