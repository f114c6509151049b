"""Every schedule and sensor of every code location, with state, ticks and last run outcome (`GET /schedulers`,
`/health`, and the tick state the alert rules read in `/metrics`).

What each one is (its cron, interval, default status) comes from the webserver's catalog (catalog.py); its stored
state and ticks are read from Dagster's schedule storage by SQL (dagster_storage.py) by its selector id (location,
repository, name), which is what the daemon writes. Stored statuses are compared by their values (Dagster's
InstigatorStatus and TickStatus), and a stored state's data by the attributes read, so no Dagster type is imported.
A schedule's next tick is its cron's next time in its timezone; a running sensor's is its last tick plus its
interval.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import BaseModel

from maintenance_jobs.executors.scrub import scrub
from maintenance_jobs.execution_history.run_storage import RunStorage
from orchestration_core.dagster_schema import instigator_selector_id
from orchestration_core.run_outcome import TAG_OUTCOME, outcome_of
from platform_monitoring import dagster_storage
from platform_monitoring.catalog import Definition

DEFAULT_SENSOR_INTERVAL_SECONDS = 30


class Instigator(BaseModel):
    name: str
    type: str  # schedule | sensor
    location: str
    state: str  # running | stopped
    cron_schedule: str | None
    timezone: str | None
    minimum_interval_seconds: int | None
    last_tick_at: dt.datetime | None
    last_tick_status: str | None
    next_tick_at: dt.datetime | None
    last_run_id: str | None
    last_run_outcome: str | None
    last_run_at: dt.datetime | None


def next_cron_time(cron: str | list[str], timezone: str | None, after: dt.datetime) -> dt.datetime:
    """The earliest next time of one or several cron strings, in UTC."""
    local = after.astimezone(ZoneInfo(timezone or "UTC"))
    crons = [cron] if isinstance(cron, str) else list(cron)
    return min(croniter(c, local).get_next(dt.datetime) for c in crons).astimezone(dt.UTC)


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _state(stored, default_running: bool) -> str:
    """A stored InstigatorStatus (by value): RUNNING, STOPPED, or DECLARED_IN_CODE (the code's default applies)."""
    if stored is None or stored.status.value == "DECLARED_IN_CODE":
        return "running" if default_running else "stopped"
    return "running" if stored.status.value == "RUNNING" else "stopped"


def describe(storage: RunStorage, item: Definition, now: dt.datetime,
             stored: dict[str, dagster_storage.StoredInstigator] | None = None) -> Instigator:
    """One schedule or sensor with its stored state (from `stored`, all states read once; else read now), its last
    tick and its last run."""
    key = selector_id(item)
    states = stored if stored is not None else dagster_storage.instigator_states(storage)
    state = _state(states.get(key), item.default_running)
    ticks = dagster_storage.newest_ticks(storage, [key], limit=1).get(key, [])
    last_tick = ticks[0] if ticks else None
    last_tick_at = dt.datetime.fromtimestamp(last_tick.timestamp, dt.UTC) if last_tick else None
    cron = timezone = interval = None
    next_tick = None
    if item.kind == "schedule":
        cron, timezone = item.cron_schedule, item.timezone
        if state == "running":
            next_tick = next_cron_time(cron, timezone, now)
        cron = cron if isinstance(cron, str) else ", ".join(cron)
    else:
        interval = item.minimum_interval_seconds or DEFAULT_SENSOR_INTERVAL_SECONDS
        if state == "running":
            next_tick = max(now, last_tick_at + dt.timedelta(seconds=interval)) if last_tick_at else now
    run_tag = "dagster/schedule_name" if item.kind == "schedule" else "dagster/sensor_name"
    last_run = dagster_storage.last_run_tagged(storage, run_tag, item.name, (TAG_OUTCOME,))
    return Instigator(
        name=item.name,
        type=item.kind,
        location=item.location,
        state=state,
        cron_schedule=cron,
        timezone=timezone,
        minimum_interval_seconds=interval,
        last_tick_at=last_tick_at,
        last_tick_status=last_tick.status.value.lower() if last_tick else None,
        next_tick_at=next_tick,
        last_run_id=last_run.run_id if last_run else None,
        last_run_outcome=outcome_of(last_run.status, last_run.tags) if last_run else None,
        last_run_at=_utc(last_run.created) if last_run else None,
    )


def list_instigators(storage: RunStorage, items: tuple[Definition, ...],
                     now: dt.datetime | None = None) -> Iterator[Instigator]:
    moment = now or dt.datetime.now(dt.UTC)
    stored = dagster_storage.instigator_states(storage) if items else {}
    for item in items:
        yield describe(storage, item, moment, stored)


def sensor_intervals(items: tuple[Definition, ...]) -> dict[tuple[str, str], float]:
    """(location, sensor name) -> its minimum interval in seconds."""
    return {(item.location, item.name): float(item.minimum_interval_seconds or DEFAULT_SENSOR_INTERVAL_SECONDS)
            for item in items if item.kind == "sensor"}


class InstigatorHealth(BaseModel):
    """One schedule or sensor as `/health` shows it: no task data, nothing but its state and its last tick."""

    name: str
    type: str  # schedule | sensor
    location: str
    running: bool
    last_tick_at: dt.datetime | None
    last_tick_status: str | None  # success | skipped | failure | started


def selector_id(item: Definition) -> str:
    return instigator_selector_id(item.location, item.repository, item.name)


def instigator_health_rows(items: tuple[Definition, ...], stored: dict[str, object],
                           last_ticks: dict[str, tuple[float, str]]) -> list[InstigatorHealth]:
    """Pure: each definition with its stored state (by selector id; absent = its default) and its last tick
    (timestamp, status) if it ever ticked."""
    rows = []
    for item in items:
        key = selector_id(item)
        state = _state(stored.get(key), item.default_running)
        tick = last_ticks.get(key)
        rows.append(InstigatorHealth(
            name=item.name, type=item.kind, location=item.location, running=state == "running",
            last_tick_at=dt.datetime.fromtimestamp(tick[0], dt.UTC) if tick else None,
            last_tick_status=tick[1] if tick else None,
        ))
    return rows


def instigator_health(storage: RunStorage, items: tuple[Definition, ...]) -> list[InstigatorHealth]:
    """Every schedule and sensor of every location in two queries: all stored states, and the last tick of each."""
    stored = dagster_storage.instigator_states(storage)
    batches = dagster_storage.newest_ticks(storage, [selector_id(item) for item in items], limit=1)
    last_ticks = {key: (ticks[0].timestamp, ticks[0].status.value.lower()) for key, ticks in batches.items() if ticks}
    return instigator_health_rows(items, stored, last_ticks)


# ---- tick state for the alert rules (`/metrics`): failed ticks in a row, the last error, lateness ----------------

# The latest tick and the one before it: a tick still STARTED has no outcome yet, its predecessor has.
TICK_HISTORY = 2
MAX_ERROR_CHARS = 200


@dataclass(frozen=True)
class TickState:
    """What the alert rules need of one schedule or sensor, from Dagster's schedule storage only (never the code
    servers, so it tells the truth when they are down)."""

    location: str
    kind: str  # schedule | sensor
    name: str
    running: bool
    default_running: bool  # its default status in code: a stopped one that defaults to running alerts
    interval_seconds: float  # a sensor's minimum interval; a schedule's gap between its next two cron times
    last_tick_at: float | None
    failed_in_a_row: int  # consecutive FAILURE ticks up to the latest finished one (Dagster's own count)
    last_error: str | None  # the innermost error of the latest failed tick, first line, scrubbed, truncated
    late_seconds: float | None  # how far behind its next expected tick it is; None: the daemon never recorded it


def tick_error_text(error) -> str | None:
    """The cause a person acts on: Dagster wraps the user's exception (SensorExecutionError: Error occurred …)."""
    if error is None:
        return None
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = [line.strip() for line in (error.message or "").splitlines() if line.strip()]
    text = scrub(lines[0] if lines else error.cls_name or "unknown error")
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def nominal_interval(item: Definition, now: dt.datetime) -> float:
    if item.kind == "sensor":
        return float(item.minimum_interval_seconds or DEFAULT_SENSOR_INTERVAL_SECONDS)
    first = next_cron_time(item.cron_schedule, item.timezone, now)
    return (next_cron_time(item.cron_schedule, item.timezone, first) - first).total_seconds()


def previous_cron_time(cron: str | list[str], timezone: str | None, before: dt.datetime) -> dt.datetime:
    """The latest time at or before `before` of one or several cron strings, in UTC."""
    local = before.astimezone(ZoneInfo(timezone or "UTC"))
    crons = [cron] if isinstance(cron, str) else list(cron)
    return max(croniter(c, local + dt.timedelta(seconds=1)).get_prev(dt.datetime) for c in crons).astimezone(dt.UTC)


def lateness(item: Definition, stored, last_tick_at: float | None, interval: float, now: dt.datetime) -> float | None:
    """Seconds since a tick this instigator should have made (0 when on time). A sensor is due `interval` after its
    last tick (or its start); a schedule at each cron time after its start. None when there is nothing to measure
    from: the daemon has not recorded it yet."""
    data = getattr(stored, "instigator_data", None)
    if item.kind == "sensor":
        # SensorInstigatorData's start; a schedule's data (ScheduleInstigatorData) has none.
        started = getattr(data, "last_sensor_start_timestamp", None)
        references = [t for t in (last_tick_at, started) if t]
        return max(0.0, now.timestamp() - max(references) - interval) if references else None
    started = getattr(data, "start_timestamp", None)  # ScheduleInstigatorData's; a sensor's data has none
    references = [t for t in (last_tick_at, started) if t]
    if not references:
        return None
    due = previous_cron_time(item.cron_schedule, item.timezone, now).timestamp()
    return now.timestamp() - due if due > max(references) + 1 else 0.0


def tick_state(item: Definition, stored, ticks: list, now: dt.datetime) -> TickState:
    """Pure: one definition with its stored state (None: never recorded) and its newest ticks, newest first."""
    default_running = item.default_running
    running = _state(stored, default_running) == "running"
    finished = [t for t in ticks if t.status.value != "STARTED"]  # TickStatus values
    latest = finished[0] if finished else None
    failed = latest is not None and latest.status.value == "FAILURE"
    failed_in_a_row = max(1, latest.consecutive_failure_count or latest.failure_count or 1) if failed else 0
    last_tick_at = ticks[0].timestamp if ticks else None
    interval = nominal_interval(item, now)
    return TickState(
        location=item.location, kind=item.kind, name=item.name, running=running,
        default_running=default_running, interval_seconds=interval, last_tick_at=last_tick_at,
        failed_in_a_row=failed_in_a_row, last_error=tick_error_text(latest.error) if failed else None,
        late_seconds=lateness(item, stored, last_tick_at, interval, now) if running else None,
    )


def tick_states(storage: RunStorage, items: tuple[Definition, ...],
                now: dt.datetime | None = None) -> list[TickState]:
    """Every schedule and sensor of every location, in two queries (all stored states; the newest ticks of each)."""
    moment = now or dt.datetime.now(dt.UTC)
    stored = dagster_storage.instigator_states(storage)
    batches = dagster_storage.newest_ticks(storage, [selector_id(item) for item in items], limit=TICK_HISTORY)
    return [tick_state(item, stored.get(selector_id(item)), list(batches.get(selector_id(item), [])), moment)
            for item in items]
