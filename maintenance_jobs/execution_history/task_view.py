"""The per-task history: for each run the task's cron expected in a time range, whether it ran and how it ended.

Expected runs are the dispatcher's own rule (maintenance_jobs.schedule, the task's timezone, daylight saving
included) applied to the task's *current* schedule, from the later of `since` and the task's creation (for a
disabled task, up to its last change, when it was disabled at the latest). A scheduled
run carries the minute it was due (`maintenance/scheduled_minute`, copied to its retries and re-launches), which is
how each attempt finds its expected run; runs that are not for an expected minute (manual triggers, a schedule
changed since) are listed apart.

An expected run with no run is `missed`, with the reason the dispatcher recorded when it skipped that minute (its
catch-up bound after downtime, `dispatch_skips`); without one, what the registry can still say (the task changed
since, or nothing was recorded: the daemon or the dispatcher sensor was likely stopped). A minute less than
DUE_GRACE ago is `due`, not missed: the dispatcher ticks once a minute.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from pydantic import BaseModel, Field

from maintenance_jobs.execution_history import store, tag_values
from maintenance_jobs.execution_history.items import ExecutionItem, item_from_history, item_from_run
from maintenance_jobs.execution_history.run_storage import RunSelection, RunStorage, existing_run_ids, live_rows
from maintenance_jobs.models import Task
from maintenance_jobs.schedule import ANY, ONE_MINUTE, cron_expression, due_minutes, wall_clock_slots, walls_matching

MAX_RANGE = dt.timedelta(days=100)
MAX_EXPECTED_RUNS = 10_000
DUE_GRACE = dt.timedelta(minutes=3)
_LIVE_PAGE = 500
_FINISHED = ("success", "failed", "timeout", "canceled")


class InvalidRange(ValueError):
    """A time range that cannot be answered (reversed, out of bounds, or more than one answer holds); `field` names
    the parameter at fault."""

    def __init__(self, message: str, field: str = "since") -> None:
        super().__init__(message)
        self.field = field


EARLIEST = tag_values.EARLIEST_MINUTE
LATEST = tag_values.LATEST_MINUTE


def bounded(moment: dt.datetime, field: str) -> dt.datetime:
    """`moment` in UTC, or InvalidRange outside 1970..9000 (dates near year 1 or 9999 overflow once offsets apply)."""
    try:
        utc_moment = moment.astimezone(dt.UTC)
    except OverflowError:
        raise InvalidRange(f"{field}: out of range", field) from None
    if not EARLIEST <= utc_moment < LATEST:
        raise InvalidRange(f"{field}: must lie between {EARLIEST.year} and {LATEST.year}", field)
    return utc_moment


class ExpectedRun(BaseModel):
    scheduled_for: dt.datetime = Field(description="the minute the cron expected a run, in the task's timezone")
    outcome: str = Field(description="ran, running, missed, or due (less than 3 minutes ago)")
    status: str | None = Field(description="how the last attempt ended (or pending/running); null when missed")
    attempts: int
    reason: str | None = Field(description="why no run was launched (missed only)")
    executions: list[ExecutionItem] = Field(description="every attempt for this minute, oldest first")


class TaskHistory(BaseModel):
    task_name: str
    task_id: int
    schedule: str = Field(description="the task's cron fields as a cron expression (day_of_week 0 = Sunday here)")
    timezone: str
    enabled: bool
    since: dt.datetime
    until: dt.datetime
    expected_from: dt.datetime = Field(description="the later of `since` and the task's creation")
    counts: dict[str, int] = Field(description="expected runs by outcome, and ran ones by final status")
    expected_runs: list[ExpectedRun]
    other_runs: list[ExecutionItem] = Field(description="runs in the range not for an expected minute (manual, ...)")
    live_runs_included: bool = Field(description="runs not recorded yet were read from Dagster's run storage")


def _ceil_minute(moment: dt.datetime) -> dt.datetime:
    floor = moment.astimezone(dt.UTC).replace(second=0, microsecond=0)
    return floor if floor == moment else floor + ONE_MINUTE


# Wall times this far outside the range are looked at too: a due minute's wall time can lie outside the range's own
# wall times by a daylight-saving shift (an hour; a whole day where a zone skipped one, e.g. Pacific/Apia in 2011).
_WALL_MARGIN = dt.timedelta(days=2)
_WALL_BATCH = 256


def _matching_walls(expression: str, low: dt.datetime, high: dt.datetime) -> Iterator[list[dt.datetime]]:
    """The naive wall times in [low, high] that `expression` matches (schedule.walls_matching), in batches."""
    batch: list[dt.datetime] = []
    for moment in walls_matching(expression, low, high):
        batch.append(moment)
        if len(batch) == _WALL_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _offset_change(before: dt.datetime, after: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """The first real minute in (before, after] whose UTC offset differs from `before`'s (one transition between)."""
    offset = before.astimezone(zone).utcoffset()
    low, high = 0, (after - before) // ONE_MINUTE  # offset(before + low) == offset; (before + high) differs
    while high - low > 1:
        middle = (low + high) // 2
        if (before + ONE_MINUTE * middle).astimezone(zone).utcoffset() == offset:
            low = middle
        else:
            high = middle
    return before + ONE_MINUTE * high


def candidate_minutes(wall: dt.datetime, zone: ZoneInfo) -> set[dt.datetime]:
    """The real minutes (UTC) at which the dispatcher may launch a task due at wall time `wall`: the wall time's
    occurrences (two in a fall-back hour), or, for a wall time a spring-forward gap skips, the first minute after the
    gap. Which of them are due is the dispatcher's own rule (schedule.due_minutes) to say."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(dt.UTC)
    found = {first, second}
    if first != second and first.astimezone(zone).replace(tzinfo=None) != wall:  # skipped by a gap
        found.add(_offset_change(min(first, second), max(first, second), zone))
    return found


def expected_minutes(task: Task, start: dt.datetime, end: dt.datetime, timezone: str,
                     limit: int | None = None) -> list[dt.datetime]:
    """Real minutes (UTC) in [start, end) at which the dispatcher launches `task` (its current schedule); with
    `limit`, at most limit + 1 of them (enough to tell that there are more).

    The work follows the runs expected, not the minutes of the range: croniter steps from one matching wall time to
    the next (a weekly task over 99 days: about 15 steps), and the dispatcher's rule (schedule.due_minutes, with its
    daylight-saving handling) is applied to those wall times' real minutes only. Each minute's verdict depends on that
    minute alone, so this equals applying the rule to every minute of the range."""
    first = _ceil_minute(start)
    if end <= first:
        return []
    fields = task.cron_fields
    if all(value == ANY for value in vars(fields).values()):  # every real minute (any-hour tasks follow the real clock)
        count = -((first - end) // ONE_MINUTE)  # minutes m = first + i with m < end
        if limit is not None:
            count = min(count, limit + 1)
        return [first + ONE_MINUTE * i for i in range(count)]
    zone = ZoneInfo(timezone)
    low = (first - _WALL_MARGIN).astimezone(zone).replace(tzinfo=None)
    high = (end + _WALL_MARGIN).astimezone(zone).replace(tzinfo=None)
    due: set[dt.datetime] = set()
    for walls in _matching_walls(cron_expression(fields), low, high):
        minutes = sorted({m for wall in walls for m in candidate_minutes(wall, zone) if first <= m < end})
        due.update(due_minutes(fields, wall_clock_slots(minutes, timezone)))
        if limit is not None and len(due) > limit:
            break
    found = sorted(due)
    return found if limit is None else found[:limit + 1]


def _missed_reason(minute: dt.datetime, skips: list[store.Skip], task: Task) -> str:
    for skip in skips:
        if skip.skipped_from <= minute < skip.skipped_until:
            return f"skipped by the dispatcher: {skip.reason}"
    if minute < task.updated_at:
        return (f"no run was launched; the task was changed at {task.updated_at.isoformat()} "
                "(its schedule or enabled flag may have differed then)")
    return ("no run was launched and the dispatcher recorded no skip for this minute "
            "(the daemon or the maintenance_dispatcher sensor was probably stopped)")


def _runs(storage: RunStorage | None, conn: sa.Connection, task: Task, since: dt.datetime,
          until: dt.datetime, ui_url: str) -> list[ExecutionItem]:
    """The task's executions in the range: recorded ones, and (with Dagster's run storage) the runs not recorded
    yet."""
    rows = store.task_rows(conn, task.task_name, since, until)
    items: dict[str, ExecutionItem] = {}
    live_ids: set[str] = set()
    if storage is not None:
        mark = store.recorded_through(conn)
        # Runs for a minute in the range are created at or after it; retries may come after `until`.
        selection = RunSelection(task_name=task.task_name, since=since)
        before = None
        while True:
            page = live_rows(storage, selection, mark, before, _LIVE_PAGE)
            recorded = store.rows_for_runs(conn, [r.run_id for r in page])
            for run in page:
                live_ids.add(run.run_id)
                history = recorded.get(run.run_id)
                items[run.run_id] = (item_from_history(history, ui_url, True) if history else
                                     item_from_run(run, ui_url).model_copy(update={"task_id": task.id}))
            if len(page) < _LIVE_PAGE:
                break
            before = page[-1].key
        live_ids |= existing_run_ids(storage, [r.run_id for r in rows if r.run_id not in live_ids])
    for row in rows:
        if row.run_id not in items or not items[row.run_id].recorded:
            items[row.run_id] = item_from_history(row, ui_url, storage is None or row.run_id in live_ids)
    return sorted(items.values(), key=lambda item: item.key)


def task_history(registry: sa.Engine, storage: RunStorage | None, task: Task, since: dt.datetime,
                 until: dt.datetime, now: dt.datetime, timezone: str, ui_url: str) -> TaskHistory:
    """The task's expected runs in [since, until) (until at most now) with their attempts; see the module doc.
    `storage`: Dagster's run storage (run_storage.RunStorage), None for the recorded history alone."""
    if since > until:
        raise InvalidRange("since must not be after until")
    if until - since > MAX_RANGE:
        raise InvalidRange(f"the range is over {MAX_RANGE.days} days: ask for a shorter one")
    until = max(since, min(until, now))  # nothing is expected after now (a range in the future is empty)
    start = max(since, task.created_at)
    # A disabled task expects nothing after its last change (when it was disabled at the latest).
    end = until if task.enabled else min(until, task.updated_at)
    minutes = expected_minutes(task, start, end, timezone, MAX_EXPECTED_RUNS) if start < end else []
    if len(minutes) > MAX_EXPECTED_RUNS:
        raise InvalidRange(f"the range holds more than {MAX_EXPECTED_RUNS} expected runs, too many for one answer: "
                           "ask for a shorter range")
    zone = ZoneInfo(timezone)
    with registry.connect() as conn:
        executions = _runs(storage, conn, task, since, until, ui_url)
        skips = store.skips_between(conn, start, until)
    by_minute: dict[dt.datetime, list[ExecutionItem]] = {minute: [] for minute in minutes}
    other: list[ExecutionItem] = []
    for item in executions:
        if item.scheduled_for in by_minute:
            by_minute[item.scheduled_for].append(item)
        elif since <= item.triggered_at < until:
            other.append(item)
    counts: dict[str, int] = {"expected": len(minutes), "ran": 0, "running": 0, "missed": 0, "due": 0}
    expected: list[ExpectedRun] = []
    for minute, attempts in by_minute.items():
        last = attempts[-1] if attempts else None
        reason = None
        if last is None:
            outcome = "due" if now - minute < DUE_GRACE else "missed"
            reason = _missed_reason(minute, skips, task) if outcome == "missed" else None
        else:
            outcome = "ran" if last.status in _FINISHED else "running"
            if outcome == "ran":
                counts[last.status] = counts.get(last.status, 0) + 1
        counts[outcome] += 1
        expected.append(ExpectedRun(scheduled_for=minute.astimezone(zone), outcome=outcome,
                                    status=last.status if last else None, attempts=len(attempts), reason=reason,
                                    executions=attempts))
    return TaskHistory(task_name=task.task_name, task_id=task.id, schedule=cron_expression(task.cron_fields),
                       timezone=timezone, enabled=task.enabled, since=since, until=until, expected_from=start,
                       counts=counts, expected_runs=expected, other_runs=other,
                       live_runs_included=storage is not None)
