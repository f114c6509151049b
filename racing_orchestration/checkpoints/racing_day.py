"""`racing_day`: one racing day's completeness, as a daily-partitioned asset with two asset checks.

The project's other assets (race_cards, market_movers) are data sets; completeness is a property of the whole day, so
it gets its own small asset, partitioned like them (meeting-local date), whose materialization records the day's
figures and whose checks pass only when nothing is missing or still pending:

- `pre_race_snapshots_complete`: every started race has its T-60 and T-15 snapshot or a recorded reason;
- `results_complete`: every finished race has Final results or is flagged provisional.

The checks are evaluated with the materialization (one read of the day): materializing a partition from the UI runs
them for that day. (Standalone partitioned asset checks are still a preview feature in Dagster 1.13.) `racing_day_completeness_sensor` runs both once the day's last race
has had time to settle (the post-race chain takes up to 25 minutes), and again if a later race is added to the day.
Their latest results are what `/metrics` exports and `RacingDayIncomplete` alerts on.
"""


import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.settings import racing_timezone
from racing_orchestration.checkpoints import sensors
from racing_orchestration.race_data.catalog import ODDS_T15, ODDS_T60, RACE_CARDS, RACE_RESULTS, racing_days
from racing_orchestration.race_db.completeness import (
    PRE_RACE_CHECKPOINTS,
    RESULTS,
    Figure,
    ItemClass,
    day_completeness,
    last_start_of_day,
    race_facts_for_day,
)
from racing_orchestration.race_db.resource import RaceDatabase

PRE_RACE_CHECK = "pre_race_snapshots_complete"
RESULTS_CHECK = "results_complete"
# The day's last race settles by start + 5 min (T+5) + 5 + 5 + 10 min (the post-race chain); 20 min more of slack
# for a late or re-requested run.
SETTLE_AFTER_LAST_START = dt.timedelta(minutes=45)
# The days the sensor looks at: today and yesterday in RACING_TIMEZONE (a late meeting ends after midnight).
SENSOR_DAYS_BACK = 1
SENSOR_INTERVAL_SECONDS = 300
MAX_GAPS_LISTED = 50


def figure_metadata(figure: Figure, day: str) -> dict[str, object]:
    """The check's metadata: the counts by class, the ratio, and the gaps (first MAX_GAPS_LISTED) as a table."""
    meta: dict[str, object] = {
        "day": day,
        "expected": figure.expected,
        **{item_class.value: figure.counts[item_class] for item_class in ItemClass},
        "completeness": dg.MetadataValue.float(round(figure.ratio, 6)),
    }
    if figure.gaps:
        rows = [f"| {g.race_id} | {g.figure} | {g.item_class.value} | {g.reason.replace('|', '/')} |"
                for g in figure.gaps[:MAX_GAPS_LISTED]]
        more = f"\n\n(+{len(figure.gaps) - MAX_GAPS_LISTED} more)" if len(figure.gaps) > MAX_GAPS_LISTED else ""
        meta["gaps"] = dg.MetadataValue.md("| race | figure | class | reason |\n|---|---|---|---|\n" + "\n".join(rows) + more)
    return meta


def figure_passed(figure: Figure) -> bool:
    """A racing_day check passes when nothing of its figure is missing or pending."""
    return figure.counts[ItemClass.MISSING] == 0 and figure.counts[ItemClass.PENDING] == 0


def check_result(name: str, figure: Figure, day: str, what: str) -> dg.AssetCheckResult:
    """Passed when nothing is missing or pending; ERROR when data is missing, WARN when only not settled yet."""
    missing, pending = figure.counts[ItemClass.MISSING], figure.counts[ItemClass.PENDING]
    passed = figure_passed(figure)
    if passed:
        description = f"{day}: all {figure.expected} {what} captured or explained"
    else:
        description = f"{day}: {missing} {what} missing, {pending} pending, of {figure.expected}"
    return dg.AssetCheckResult(
        check_name=name,
        passed=passed,
        severity=dg.AssetCheckSeverity.ERROR if missing else dg.AssetCheckSeverity.WARN,
        description=description,
        metadata=figure_metadata(figure, day),
    )


@dg.asset(
    partitions_def=racing_days,
    deps=[RACE_CARDS, ODDS_T60, ODDS_T15, RACE_RESULTS],
    group_name="racing",
    kinds={"postgres"},
    check_specs=[
        dg.AssetCheckSpec(PRE_RACE_CHECK, asset="racing_day",
                          description="Every race that started has its T-60 and T-15 odds snapshot, or a recorded "
                          "reason why not (skipped / failed / abandoned in the checkpoint ledger)."),
        dg.AssetCheckSpec(RESULTS_CHECK, asset="racing_day",
                          description="Every finished race has its Final results, or is flagged provisional by the "
                          "post-race chain."),
    ],
    description="One racing day's completeness: races started and finished, and per checkpoint how many were "
    "captured, explained (a recorded reason), pending or missing. Its checks pass only when nothing is missing.",
)
def racing_day(context: dg.AssetExecutionContext, race_db: RaceDatabase) -> dg.MaterializeResult:
    day = context.partition_key
    with race_db.connect() as conn:
        facts = race_facts_for_day(conn, dt.date.fromisoformat(day))
    figures = day_completeness(facts, sensors.sensor_now())
    metadata: dict[str, object] = {
        "races": figures.races, "started": figures.started, "finished": figures.finished,
        "abandoned": figures.abandoned,
    }
    for name, figure in figures.figures.items():
        metadata[f"{name}_completeness"] = dg.MetadataValue.float(round(figure.ratio, 6))
        metadata[f"{name}_missing"] = figure.counts[ItemClass.MISSING]
        metadata[f"{name}_pending"] = figure.counts[ItemClass.PENDING]
    checks = [
        check_result(PRE_RACE_CHECK, figures.figure_group(PRE_RACE_CHECKPOINTS), day, "pre-race snapshots"),
        check_result(RESULTS_CHECK, figures.figures[RESULTS], day, "race results"),
    ]
    return dg.MaterializeResult(metadata=metadata, check_results=checks)


racing_day_completeness = dg.define_asset_job(
    "racing_day_completeness",
    selection=dg.AssetSelection.assets(racing_day),  # its checks run in the same step
    partitions_def=racing_days,
    description="Records one racing day's completeness and runs its checks.",
)


def days_to_check(now: dt.datetime, tz: str, days_back: int = SENSOR_DAYS_BACK) -> list[dt.date]:
    """Today and the `days_back` days before it, in `tz`, oldest first."""
    today = now.astimezone(ZoneInfo(tz)).date()
    return [today - dt.timedelta(days=n) for n in range(days_back, -1, -1)]


def completeness_run_key(day: dt.date, last_start: dt.datetime | None) -> str:
    """Once per day and last start time: a race added (or moved) later in the day gets the day checked again."""
    when = f"{last_start.astimezone(dt.UTC):%Y%m%dT%H%M}" if last_start is not None else "no-races"
    return f"racing_day:{day.isoformat()}:{when}"


def plan_completeness_runs(last_starts: dict[dt.date, dt.datetime | None], now: dt.datetime, tz: str,
                           settle: dt.timedelta = SETTLE_AFTER_LAST_START) -> tuple[list[dg.RunRequest], list[str]]:
    """Pure: a run request for each day whose last race has settled, and the reason for every day not requested.

    A day without races is checked once it is over (in `tz`), so every day has a check on record and the
    `RacingDayNotChecked` alert means the sensor or its runs stopped, not a quiet day."""
    requests: list[dg.RunRequest] = []
    reasons: list[str] = []
    for day, last_start in sorted(last_starts.items()):
        if last_start is None:
            day_over = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=ZoneInfo(tz))
            if now < day_over:
                reasons.append(f"{day}: no races stored")
                continue
        elif now < last_start + settle:
            reasons.append(f"{day}: waiting until {(last_start + settle).astimezone(dt.UTC):%H:%M} UTC "
                           f"(last race starts {last_start.astimezone(dt.UTC):%H:%M} UTC)")
            continue
        requests.append(dg.RunRequest(run_key=completeness_run_key(day, last_start), partition_key=day.isoformat()))
    return requests, reasons


@dg.sensor(
    job=racing_day_completeness,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs the racing_day completeness checks once the day's last race has settled "
    f"({SETTLE_AFTER_LAST_START.total_seconds() / 60:.0f} min after its start); again if a later race is added.",
)
def racing_day_completeness_sensor(context: dg.SensorEvaluationContext, race_db: RaceDatabase):
    now, tz = sensors.sensor_now(), racing_timezone()
    with sensors.sensor_engine(race_db).connect() as conn:
        last_starts = {day: last_start_of_day(conn, day) for day in days_to_check(now, tz)}
    requests, reasons = plan_completeness_runs(last_starts, now, tz)
    if not requests:
        return dg.SkipReason("; ".join(reasons))
    for reason in reasons:
        context.log.info(f"not checked yet: {reason}")
    # Days already checked under the same key are dropped by Dagster's run-key dedupe.
    return dg.SensorResult(run_requests=requests)
