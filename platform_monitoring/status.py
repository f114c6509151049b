"""`GET /stats` and `GET /health`: grouped counts over run storage plus daemon heartbeat freshness.

Counts are single grouped SQL queries over Dagster's run tables, not one `get_runs_count` per status: each of those
joins the tag table again and costs ~100 ms at 100k runs. Everything is read through `storage` (an engine on
Dagster's database; see run_storage.RunStorage) and the instance's dagster.yaml (instance_config.py), without
importing Dagster.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future

import sqlalchemy as sa
from pydantic import BaseModel, Field

from platform_monitoring import dagster_storage, schedulers
from platform_monitoring.catalog import Catalog, CatalogUnavailable
from platform_monitoring.liveness import (
    SCHEDULING_DAEMONS,
    CodeServer,
    code_server_states,
    daemon_liveness,
    sensor_tick_inputs,
)
from maintenance_jobs.execution_history.items import EXECUTION_STATUSES, execution_status
from maintenance_jobs.execution_history.run_storage import RunStorage, connect
from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.models import config_problem
from maintenance_jobs.registry import list_tasks
from maintenance_jobs.tags import TAG_STATUS
from orchestration_core.dagster_schema import run_tags, runs as runs_table
from orchestration_core.instance_config import InstanceConfig, instance_config
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND
from orchestration_core.run_status import RunStatus as S

log = logging.getLogger(__name__)
# The old scheduler's limit, used when the instance has no tag limit for maintenance runs.
DEFAULT_CONCURRENT_LIMIT = 5
ACTIVE = [S.STARTING, S.STARTED, S.CANCELING]


class Stats(BaseModel):
    scheduler_running: bool
    tasks_enabled: int
    tasks_currently_running: int
    tasks_queued: int
    concurrent_limit: int
    execution_stats_24h: dict[str, int]
    daemon_heartbeat_age_seconds: dict[str, float]


class RefusedTask(BaseModel):
    task_name: str
    problem: str = Field(description="the config field at fault, never its value (the authenticated /tasks says why)")


# A field path as the validators name it (`config.sources.0.path`). A config's own keys can appear in one (an unknown
# key), so a path that is not plain identifiers is shown as `config` alone.
_PUBLIC_FIELD = re.compile(r"[A-Za-z0-9_]{1,64}(?:\.[A-Za-z0-9_]{1,64}){0,7}")


def public_problem(problem: str) -> str:
    """What the public /health says of a refused task: the field at fault, not the message. The message quotes the
    config (a backup path, an upstream URL and its host, the roots and hosts the settings allow), which anonymous
    clients must not read."""
    field = problem.split(": ", 1)[0]
    if not _PUBLIC_FIELD.fullmatch(field):
        field = "config"
    return f"{field}: refused by the current settings (the authenticated task view says why)"


class Health(BaseModel):
    # ok | degraded (the daemon is down, a code server does not answer, or the webserver lists no schedules and
    # sensors) | unavailable (a database is unreachable)
    status: str
    registry_database: str
    # Enabled tasks whose stored config the current settings refuse: never run until fixed, disabled or deleted
    # (every other task runs as usual). Not part of `status`: the tasks' own overdue alerts page for them.
    refused_tasks: list[RefusedTask] = []
    dagster_storage: str
    # The daemon is up (platform_monitoring/liveness.py): every required daemon's heartbeat is fresh and its sensors tick.
    scheduler_running: bool
    daemon_heartbeat_age_seconds: dict[str, float]
    # Each schedule and sensor: running or stopped, and its last tick (the old racing scheduler's per-scheduler
    # state). `schedules_and_sensors_state` says whether that probe answered ("ok", "timed out ...", ...), or that the
    # webserver gave no catalog of them ("unavailable (…)" with no rows; "stale (…)" with the last known rows).
    schedules_and_sensors_state: str = "ok"
    schedules_and_sensors: list[schedulers.InstigatorHealth] = []
    # Why the daemon counts as down (empty when it is up), and the age of the newest tick of its running sensors,
    # which shows a stopped daemon within 30 s (its heartbeats alone take 90 s).
    daemon_problems: list[str] = []
    newest_sensor_tick_age_seconds: float | None = None
    # Each code server of the deployment (CODE_SERVER_ADDRESSES): "ok", "unreachable (…)" or "timed out …".
    code_servers: dict[str, str] = {}


def heartbeat_ages(heartbeats: Mapping[str, object], now: float) -> dict[str, float]:
    """Seconds since each daemon's last heartbeat."""
    return {kind: round(max(0.0, now - beat.timestamp), 3) for kind, beat in sorted(heartbeats.items())}


def scheduler_running(ages: Mapping[str, float], max_age: float, required: Iterable[str] = SCHEDULING_DAEMONS) -> bool:
    """True when every daemon that dispatches and launches tasks has a heartbeat younger than `max_age`."""
    return all(kind in ages and ages[kind] <= max_age for kind in required)


def maintenance_limit(tag_limits: Iterable[Mapping[str, object]]) -> int:
    """The run queue's limit for `orchestration/kind=maintenance`, else the old scheduler's 5."""
    for limit in tag_limits:
        if limit.get("key") == TAG_KIND and limit.get("value") == KIND_MAINTENANCE:
            return int(limit["limit"])
    return DEFAULT_CONCURRENT_LIMIT


def concurrent_limit(config: InstanceConfig) -> int:
    """The maintenance limit of the instance's run queue; without a queued run coordinator, the documented 5."""
    return maintenance_limit(config.tag_concurrency_limits) if config.queued else DEFAULT_CONCURRENT_LIMIT


def _maintenance_runs(*columns: sa.ColumnElement) -> sa.Select:
    """Maintenance runs (by their kind tag, indexed) left-joined with their recorded `maintenance/status`."""
    kind, recorded = run_tags.alias("kind"), run_tags.alias("recorded")
    runs = runs_table
    source = runs.join(kind, sa.and_(kind.c.run_id == runs.c.run_id, kind.c.key == TAG_KIND,
                                     kind.c.value == KIND_MAINTENANCE))
    source = source.outerjoin(recorded, sa.and_(recorded.c.run_id == runs.c.run_id, recorded.c.key == TAG_STATUS))
    return sa.select(runs.c.status, recorded.c.value, *columns).select_from(source)


def count_by_execution_status(rows: Iterable[tuple[str, str | None, int]]) -> dict[str, int]:
    """(Dagster status, recorded status, count) rows → counts by the /executions status (same mapping)."""
    counts = dict.fromkeys(EXECUTION_STATUSES, 0)
    for dagster_status, recorded, count in rows:
        tags = {TAG_STATUS: recorded} if recorded else {}
        counts[execution_status(dagster_status, tags)] += count
    return counts


def execution_counts(storage: RunStorage, since: dt.datetime) -> dict[str, int]:
    """Maintenance runs created since `since` by the old scheduler's statuses, in one grouped query."""
    runs = runs_table
    query = _maintenance_runs(sa.func.count()).where(runs.c.create_timestamp > since.astimezone(dt.UTC)
                                                     .replace(tzinfo=None))
    with connect(storage) as conn:
        rows = conn.execute(query.group_by(*query.selected_columns[:2])).all()
    return count_by_execution_status(rows)


def live_counts(storage: RunStorage) -> dict[str, int]:
    """Maintenance runs now running (STARTING/STARTED/CANCELING) and queued (the status index finds them)."""
    runs = runs_table
    query = _maintenance_runs(sa.func.count()).where(runs.c.status.in_([s.value for s in (*ACTIVE, S.QUEUED)]))
    with connect(storage) as conn:
        rows = conn.execute(query.group_by(*query.selected_columns[:2])).all()
    running = sum(count for status_, _, count in rows if status_ != S.QUEUED.value)
    return {"running": running, "queued": sum(count for status_, _, count in rows if status_ == S.QUEUED.value)}


def stats(storage: RunStorage, registry: sa.Engine, max_heartbeat_age: float,
          config: InstanceConfig | None = None) -> Stats:
    now = dt.datetime.now(dt.UTC)
    ages = heartbeat_ages(dagster_storage.daemon_heartbeats(storage), now.timestamp())
    with registry.connect() as conn:
        enabled = conn.execute(
            sa.select(sa.func.count()).select_from(scheduled_tasks).where(scheduled_tasks.c.enabled.is_(True))
        ).scalar_one()
    live = live_counts(storage)
    return Stats(
        scheduler_running=scheduler_running(ages, max_heartbeat_age),
        tasks_enabled=enabled,
        tasks_currently_running=live["running"],
        tasks_queued=live["queued"],
        concurrent_limit=concurrent_limit(config or instance_config(None)),
        execution_stats_24h=execution_counts(storage, now - dt.timedelta(hours=24)),
        daemon_heartbeat_age_seconds=ages,
    )


# /health answers within ~1 s whatever the databases do: each probe runs in its own thread and is reported
# "timed out" once this deadline passes (a host that accepts and never answers would otherwise hold the request for
# the connect timeout, and Dagster's storage retries a refused connection for seconds).
PROBE_DEADLINE_SECONDS = 0.8


class HealthProbes:
    """Single-flight probes on daemon threads: a probe still hanging from an earlier request is waited on again
    rather than started twice, so a dead database costs at most one thread per store, never one per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Future] = {}

    def start(self, name: str, probe: Callable[[], object]) -> Future:
        with self._lock:
            future = self._running.get(name)
            if future is None or future.done():
                future = Future()
                self._running[name] = future
                threading.Thread(target=self._run, args=(future, probe), name=f"health-{name}", daemon=True).start()
            return future

    @staticmethod
    def _run(future: Future, probe: Callable[[], object]) -> None:
        try:
            future.set_result(probe())
        except BaseException as exc:
            future.set_exception(exc)


def _outcome(future: Future, deadline: float, what: str, seconds: float) -> tuple[str, object]:
    """("ok", result), ("unreachable (Error)", None) or ("timed out after 0.8 s", None) for a deadline `seconds`
    long."""
    try:
        return "ok", future.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        log.warning("health: %s did not answer within %.1f s", what, seconds)
        return f"timed out after {seconds:.1f} s", None
    except Exception as exc:
        log.warning("health: %s unreachable: %s", what, exc)
        return f"unreachable ({type(exc).__name__})", None


def refused_tasks(registry: sa.Engine) -> list[RefusedTask]:
    """The enabled tasks this process's settings refuse, each with its public problem (one registry read; it doubles
    as the registry probe)."""
    try:
        tasks = list_tasks(registry, enabled=True)
    except sa.exc.ProgrammingError:  # reachable, not migrated yet (the API can start before `migrate`)
        return []
    refused = []
    for task in tasks:
        problem = config_problem(task)
        if problem is not None:
            refused.append(RefusedTask(task_name=task.task_name, problem=public_problem(problem)))
    return refused


def _instigator_probe(storage: RunStorage, catalog: Callable[[], Catalog],
                      instigators: Callable[..., list[schedulers.InstigatorHealth]]
                      ) -> tuple[list[schedulers.InstigatorHealth], dict[tuple[str, str], float], str | None]:
    """Run in the instigators probe, under its deadline: the schedules and sensors the webserver's catalog lists
    (kept in memory once fetched), their stored states and last ticks, the sensors' intervals, and why the catalog
    is an older one if it is."""
    known = catalog()
    return instigators(storage, known.instigators), schedulers.sensor_intervals(known.instigators), known.problem


def _sensor_ticks(rows: list[schedulers.InstigatorHealth], intervals: Mapping[tuple[str, str], float],
                  now: float) -> tuple[list[float], float | None]:
    return sensor_tick_inputs(((row.running, row.last_tick_at.timestamp() if row.last_tick_at else None,
                                intervals.get((row.location, row.name), schedulers.DEFAULT_SENSOR_INTERVAL_SECONDS))
                               for row in rows if row.type == "sensor"), now)


def health(storage: RunStorage | Callable[[], RunStorage], registry: sa.Engine,
           max_heartbeat_age: float, *, config: InstanceConfig | None = None, probes: HealthProbes | None = None,
           deadline_seconds: float = PROBE_DEADLINE_SECONDS,
           catalog: Callable[[], Catalog] | None = None,
           instigators: Callable[..., list[schedulers.InstigatorHealth]] = schedulers.instigator_health,
           code_servers: Sequence[CodeServer] = (),
           ping: Callable[[CodeServer], None] | None = None,
           ) -> Health:
    """Never raises and returns within `deadline_seconds` (plus scheduling): each store that does not answer in
    time or fails is reported (by error class only: messages may hold URLs). `storage` may be a factory (opening it
    may fail: the Dagster probe reports that); `config` is the instance's (which daemons must beat). The
    schedules-and-sensors probe and the code-server pings run beside the other two under the same deadline. A
    stopped sensor may be an operator's choice and does not change `status`; the daemon being down (stale heartbeats,
    or sensors that stopped ticking), a code server that does not answer, or a webserver that gave no catalog of
    schedules and sensors (`schedules_and_sensors_state` says why; an older catalog is still shown) makes it
    `degraded`."""
    probes = probes or HealthProbes()
    open_storage = storage if _is_factory(storage) else lambda: storage
    required_daemons = (config or instance_config(None)).required_daemons
    deadline = time.monotonic() + deadline_seconds
    registry_probe = probes.start("registry", lambda: refused_tasks(registry))
    dagster_probe = probes.start("dagster", lambda: (dagster_storage.daemon_heartbeats(open_storage()),
                                                     list(required_daemons)))
    known = catalog or _no_catalog
    instigator_probe = probes.start("instigators", lambda: _instigator_probe(open_storage(), known, instigators))
    code_server_probe = probes.start("code_servers", lambda: code_server_states(code_servers, ping))
    registry_state, refused = _outcome(registry_probe, deadline, "registry database", deadline_seconds)
    dagster_state, daemons = _outcome(dagster_probe, deadline, "Dagster storage", deadline_seconds)
    instigator_state, probed = _outcome(instigator_probe, deadline, "schedules and sensors", deadline_seconds)
    instigator_rows, sensor_intervals, stale = probed if probed else (None, {}, None)
    catalog_state = _catalog_state(instigator_probe, stale)
    instigator_state = catalog_state or instigator_state
    code_server_state, pinged = _outcome(code_server_probe, deadline, "code servers", deadline_seconds)
    now = time.time()
    heartbeats, required = daemons if dagster_state == "ok" else ({}, ())
    ages = heartbeat_ages(heartbeats, now)
    intervals, newest_tick_age = _sensor_ticks(instigator_rows or [], sensor_intervals, now)
    liveness = daemon_liveness(ages, required or SCHEDULING_DAEMONS, max_heartbeat_age, intervals, newest_tick_age)
    servers = pinged if code_server_state == "ok" else {s.location: code_server_state for s in code_servers}
    if registry_state != "ok" or dagster_state != "ok":
        status = "unavailable"
    else:
        healthy = liveness.up and all(state == "ok" for state in servers.values()) and catalog_state is None
        status = "ok" if healthy else "degraded"
    return Health(
        status=status,
        registry_database=registry_state,
        refused_tasks=refused or [],
        dagster_storage=dagster_state,
        scheduler_running=dagster_state == "ok" and liveness.up,
        daemon_heartbeat_age_seconds=ages,
        schedules_and_sensors_state=instigator_state,
        schedules_and_sensors=instigator_rows or [],
        daemon_problems=liveness.problems if dagster_state == "ok" else [],
        newest_sensor_tick_age_seconds=None if newest_tick_age is None else round(newest_tick_age, 3),
        code_servers=servers,
    )


def _no_catalog() -> Catalog:
    raise CatalogUnavailable("no Dagster webserver configured")


def _catalog_state(probe: Future, stale: str | None) -> str | None:
    """What /health says when the webserver gave no catalog (none yet: no rows; an older one: its rows, stale). Not
    the error's text: it names the webserver's address, and /health is public (the log has it)."""
    if stale is not None:
        return "stale (the Dagster webserver did not answer: the last schedules and sensors it listed)"
    if probe.done() and isinstance(probe.exception(), CatalogUnavailable):
        return "unavailable (the Dagster webserver has not listed the schedules and sensors)"
    return None


def _is_factory(storage: object) -> bool:
    """A callable that makes the storage, not a storage (an engine or a Dagster instance) itself."""
    return callable(storage) and not hasattr(storage, "connect") and not hasattr(storage, "run_storage")
