"""`GET /metrics`: a custom Prometheus collector computing every value from storage at scrape time.

Names and labels are the published interface in docs/metrics.md (dashboards and alert
rules depend on them). Nothing is accumulated in memory, so values survive API restarts and several API replicas
agree. Dagster's facts come from its storage tables by SQL (one grouped query per family, not one query per run;
dagster_storage.py), without importing Dagster; TAB calls from the race database's `scrapes` table. A failing source
is logged and reported in `maintenance_api_metrics_errors{source}`; the other families are still served.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from orchestration_core.dagster_tags import RETRY_NUMBER_TAG
from platform_monitoring import alert_metrics, dagster_storage, overdue, schedulers
from platform_monitoring.catalog import Catalog, CatalogUnavailable
from platform_monitoring.job_policies import JobPolicy, load_policies
from platform_monitoring.liveness import (
    DEFAULT_HEARTBEAT_MAX_AGE_SECONDS,
    CodeServer,
    code_server_states,
    daemon_liveness,
    daemon_starting,
    sensor_tick_inputs,
)
from platform_monitoring.status import concurrent_limit, heartbeat_ages
from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.execution_history import tag_values
from maintenance_jobs.execution_history.run_storage import RunStorage, connect
from maintenance_jobs.executor_configs import POSTGRES_DATABASES
from orchestration_core.instance_config import InstanceConfig
from orchestration_core.dagster_schema import run_tags as run_tags_table, runs as runs_table
from orchestration_core.run_outcome import (
    TAG_ITEMS_FAILED,
    TAG_ITEMS_PROCESSED,
    TAG_KIND,
    TAG_MAINTENANCE_TASK,
    TAG_OUTCOME,
    outcome_of,
)

log = logging.getLogger(__name__)
WINDOWS = {"1h": dt.timedelta(hours=1), "24h": dt.timedelta(hours=24)}
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)
ACTIVE_STATUSES = ("STARTING", "STARTED", "CANCELING")
QUEUE_KINDS = ("racing", "maintenance")


@dataclass(frozen=True)
class RunRow:
    job: str
    status: str
    created: dt.datetime  # naive UTC, as stored
    start_time: float | None
    end_time: float | None
    tags: dict[str, str]


def _tag_join(key: str) -> sa.Alias:
    return run_tags_table.alias(key.replace("/", "_"))


def recent_runs(conn: sa.Connection, since: dt.datetime, ended_since: float) -> list[RunRow]:
    """Runs created after `since` or ended after `ended_since`, with the tags the metrics read."""
    keys = (TAG_OUTCOME, TAG_ITEMS_PROCESSED, TAG_ITEMS_FAILED, RETRY_NUMBER_TAG, TAG_MAINTENANCE_TASK)
    aliases = {key: _tag_join(key) for key in keys}
    runs = runs_table
    source = runs
    for key, alias in aliases.items():
        source = source.outerjoin(alias, sa.and_(alias.c.run_id == runs.c.run_id, alias.c.key == key))
    query = sa.select(
        runs.c.pipeline_name, runs.c.status, runs.c.create_timestamp, runs.c.start_time, runs.c.end_time,
        *(alias.c.value.label(f"tag{i}") for i, alias in enumerate(aliases.values())),
    ).select_from(source).where(sa.or_(runs.c.create_timestamp > since, runs.c.end_time > ended_since))
    rows = []
    for row in conn.execute(query):
        values = row._mapping
        tags = {key: values[f"tag{i}"] for i, key in enumerate(keys) if values[f"tag{i}"] is not None}
        rows.append(RunRow(row.pipeline_name, row.status, row.create_timestamp, row.start_time, row.end_time, tags))
    return rows


def histogram_buckets(durations: list[float]) -> list[tuple[str, float]]:
    """Cumulative Prometheus buckets (le) of `durations`, ending with +Inf."""
    buckets = [(str(float(le)), float(sum(1 for d in durations if d <= le))) for le in DURATION_BUCKETS]
    return [*buckets, ("+Inf", float(len(durations)))]


def run_families(rows: list[RunRow], now: dt.datetime) -> Iterator[Metric]:
    """Runs, run retries and items by job and window; durations of runs finished in the last 24 h. Numbers from tags
    are clamped (tag_values): one run's absurd tag must not make the page unrenderable for a day."""
    runs = GaugeMetricFamily("orchestration_runs", "Runs created in the window by job and outcome",
                             labels=["job", "outcome", "window"])
    retries = GaugeMetricFamily("orchestration_run_retries", "Run-level re-executions created in the window",
                                labels=["job", "retry_number", "window"])
    processed = GaugeMetricFamily("orchestration_items_processed", "Sum of racing/items_processed",
                                  labels=["job", "window"])
    failed = GaugeMetricFamily("orchestration_items_failed", "Sum of racing/items_failed", labels=["job", "window"])
    naive_now = now.replace(tzinfo=None)
    for window, span in WINDOWS.items():
        in_window = [r for r in rows if r.created > naive_now - span]
        outcomes = Counter((r.job, outcome_of(r.status, r.tags)) for r in in_window)
        for (job, outcome), count in sorted(outcomes.items()):
            runs.add_metric([job, outcome, window], count)
        numbers = Counter((r.job, tag_values.retry_number(r.tags.get(RETRY_NUMBER_TAG))) for r in in_window)
        for (job, number), count in sorted(numbers.items()):
            if number > 0:
                retries.add_metric([job, str(number), window], count)
        items: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r in in_window:
            items[r.job][0] += tag_values.item_count(r.tags.get(TAG_ITEMS_PROCESSED))
            items[r.job][1] += tag_values.item_count(r.tags.get(TAG_ITEMS_FAILED))
        for job, (done, bad) in sorted(items.items()):
            processed.add_metric([job, window], done)
            failed.add_metric([job, window], bad)
    # Compared with each job's and each maintenance task's own limit by RetriesAboveMaximum.
    retry_numbers = [(r, tag_values.retry_number(r.tags.get(RETRY_NUMBER_TAG))) for r in rows]
    highest = alert_metrics.highest_family(
        "orchestration_run_retry_highest", "Highest run retry number among runs created in the window",
        ["job", "task", "window"],
        (((r.job, tag_values.label(r.tags.get(TAG_MAINTENANCE_TASK)) or "", window), number)
         for window, span in WINDOWS.items() for r, number in retry_numbers
         if r.created > naive_now - span and number > 0))
    durations = HistogramMetricFamily("orchestration_run_duration_seconds",
                                      "Durations of runs finished in the last 24h", labels=["job"])
    cutoff = (now - WINDOWS["24h"]).timestamp()
    by_job: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.start_time and r.end_time and r.end_time > cutoff:
            by_job[r.job].append(r.end_time - r.start_time)
    for job, values in sorted(by_job.items()):
        durations.add_metric([job], histogram_buckets(values), sum_value=sum(values))
    yield from (runs, retries, highest, durations, processed, failed)


def live_families(conn: sa.Connection) -> Iterator[Metric]:
    """Active runs by job, queued runs by kind, last success per job."""
    r = runs_table
    active = GaugeMetricFamily("orchestration_active_runs", "Runs STARTING/STARTED/CANCELING", labels=["job"])
    for job, count in conn.execute(
        sa.select(r.c.pipeline_name, sa.func.count())
        .where(r.c.status.in_(ACTIVE_STATUSES))
        .group_by(r.c.pipeline_name)
    ):
        active.add_metric([job], count)
    kind = _tag_join(TAG_KIND)
    queued_counts = Counter({k: 0 for k in (*QUEUE_KINDS, "other")})
    for value, count in conn.execute(
        sa.select(kind.c.value, sa.func.count())
        .select_from(r.outerjoin(kind, sa.and_(kind.c.run_id == r.c.run_id, kind.c.key == TAG_KIND)))
        .where(r.c.status == "QUEUED")
        .group_by(kind.c.value)
    ):
        queued_counts[value if value in QUEUE_KINDS else "other"] += count
    queued = GaugeMetricFamily("orchestration_queued_runs", "Queued runs (the queue length)", labels=["kind"])
    for name, count in sorted(queued_counts.items()):
        queued.add_metric([name], count)
    last = GaugeMetricFamily("orchestration_last_success_timestamp_seconds", "Unix time of the latest successful run",
                             labels=["job"])
    for job, end in conn.execute(
        sa.select(r.c.pipeline_name, sa.func.max(r.c.end_time))
        .where(r.c.status == "SUCCESS")
        .group_by(r.c.pipeline_name)
    ):
        if end is not None:
            last.add_metric([job], end)
    yield from (active, queued, last)


def step_retry_families(storage: RunStorage, now: dt.datetime) -> Iterator[Metric]:
    """STEP_RESTARTED events of the window; the n-th restart of a step in a run is retry number n. Also the highest
    number per job, which RetriesAboveMaximum compares with the job's own retry policy."""
    family = GaugeMetricFamily("orchestration_step_retries", "Step retry events by retry number",
                               labels=["job", "retry_number", "window"])
    since = (now - WINDOWS["24h"]).timestamp()
    seen: Counter[tuple[str, str | None]] = Counter()
    counts: Counter[tuple[str, int, str]] = Counter()
    for entry in dagster_storage.step_restarts(storage, since):
        seen[(entry.run_id, entry.step_key)] += 1
        number = seen[(entry.run_id, entry.step_key)]
        for window, span in WINDOWS.items():
            if entry.timestamp > (now - span).timestamp():
                counts[(entry.job_name or "unknown", number, window)] += 1
    for (job, number, window), count in sorted(counts.items()):
        family.add_metric([job, str(number), window], count)
    yield family
    yield alert_metrics.highest_family("orchestration_step_retry_highest",
                                       "Highest step retry number in runs of the window", ["job", "window"],
                                       (((job, window), number) for job, number, window in counts))


def heartbeat_family(storage: RunStorage) -> Metric:
    family = GaugeMetricFamily("orchestration_daemon_heartbeat_age_seconds", "Seconds since each daemon's heartbeat",
                               labels=["daemon_type"])
    now = time.time()
    for daemon, beat in sorted(dagster_storage.daemon_heartbeats(storage).items()):
        family.add_metric([daemon], max(0.0, now - beat.timestamp))
    return family


def tab_request_family(racing: sa.Engine, now: dt.datetime) -> Metric:
    family = GaugeMetricFamily("orchestration_tab_api_requests", "TAB API calls recorded in the race database",
                               labels=["endpoint", "outcome", "window"])
    table = sa.table("scrapes", sa.column("endpoint"), sa.column("outcome"), sa.column("started_at"))
    recent = table.c.started_at > now - WINDOWS["1h"]
    query = (
        sa.select(table.c.endpoint, table.c.outcome, recent.label("recent"), sa.func.count())
        .where(table.c.started_at > now - WINDOWS["24h"])
        .group_by(table.c.endpoint, table.c.outcome, recent)
    )
    counts: Counter[tuple[str, str, str]] = Counter()
    with racing.connect() as conn:
        for endpoint, outcome, is_recent, count in conn.execute(query):
            counts[(endpoint, outcome, "24h")] += count
            if is_recent:
                counts[(endpoint, outcome, "1h")] += count
    for labels, count in sorted(counts.items()):
        family.add_metric(list(labels), count)
    return family


# The racing location's `racing_day` asset checks (racing_orchestration/checkpoints/racing_day.py), by name: the
# control API reads their stored evaluations from Dagster's storage, it does not import the racing code.
RACING_DAY_ASSET = "racing_day"
RACING_DAY_CHECKS = ("pre_race_snapshots_complete", "results_complete")
ITEM_CLASSES = ("captured", "explained", "pending", "missing")
CHECK_HISTORY_LOOKBACK = 5  # executions looked at per check to find the latest completed one (skipping PLANNED)


@dataclass(frozen=True)
class CheckFigures:
    """The figures of one stored racing_day check evaluation."""

    check: str
    day: str
    passed: bool
    evaluated_at: float
    ratio: float
    counts: dict[str, int]


def check_figures(check: str, passed: bool, evaluated_at: float, metadata: dict[str, object]) -> CheckFigures:
    """Pure: a check evaluation's metadata (plain values) as figures; absent counts are 0, an absent ratio 0."""
    counts = {c: int(metadata.get(c) or 0) for c in ITEM_CLASSES}
    return CheckFigures(check, str(metadata.get("day", "")), passed, evaluated_at,
                        float(metadata.get("completeness") or 0.0), counts)


def latest_check_figures(storage: RunStorage, check: str) -> CheckFigures | None:
    """The newest completed evaluation of `check` (any day), or None if it never ran."""
    for evaluation in dagster_storage.check_evaluations(storage, [RACING_DAY_ASSET], check, CHECK_HISTORY_LOOKBACK):
        if evaluation is None:
            continue  # planned, still running
        return check_figures(check, evaluation.passed, evaluation.timestamp, evaluation.metadata)
    return None


def racing_day_families(storage: RunStorage) -> Iterator[Metric]:
    """The latest racing_day completeness check of each kind: its day, ratio, counts by class and outcome."""
    ratio = GaugeMetricFamily("racing_day_completeness_ratio",
                              "Share of the racing day's expected items captured or explained (latest check)",
                              labels=["check", "day"])
    items = GaugeMetricFamily("racing_day_checkpoint_items", "The racing day's expected items by class (latest check)",
                              labels=["check", "day", "class"])
    passed = GaugeMetricFamily("racing_day_check_passed", "1 when the latest racing_day check passed",
                               labels=["check", "day"])
    evaluated = GaugeMetricFamily("racing_day_check_timestamp_seconds", "Unix time of the latest racing_day check",
                                  labels=["check", "day"])
    for check in RACING_DAY_CHECKS:
        figures = latest_check_figures(storage, check)
        if figures is None:
            continue
        ratio.add_metric([check, figures.day], figures.ratio)
        for item_class, count in figures.counts.items():
            items.add_metric([check, figures.day, item_class], count)
        passed.add_metric([check, figures.day], 1.0 if figures.passed else 0.0)
        evaluated.add_metric([check, figures.day], figures.evaluated_at)
    yield from (ratio, items, passed, evaluated)


def registry_families(registry: sa.Engine, config: InstanceConfig) -> Iterator[Metric]:
    with registry.connect() as conn:
        enabled = conn.execute(
            sa.select(sa.func.count()).select_from(scheduled_tasks).where(scheduled_tasks.c.enabled.is_(True))
        ).scalar_one()
    yield GaugeMetricFamily("maintenance_tasks_enabled", "Enabled tasks in the registry", value=enabled)
    yield GaugeMetricFamily("maintenance_concurrent_limit", "The maintenance run limit",
                            value=concurrent_limit(config))


def postgres_backup_successes(storage: RunStorage) -> dict[str, float]:
    """database -> unix time of its newest dump: the latest materialization of `postgres_backup/<database>`, which
    postgres_backup_executor records only once the dump and its checksum file are in place."""
    successes = {}
    for database in POSTGRES_DATABASES:
        timestamp = dagster_storage.latest_materialization_timestamp(
            storage, alert_metrics.postgres_backup_asset_key(database))
        if timestamp is not None:
            successes[database] = timestamp
    return successes


class StorageCollector(Collector):
    """Collects at scrape time; `dagster` (an engine on Dagster's storage database), `registry`, `racing`, `catalog`
    (the webserver's, catalog.py) and `config` (the instance's, instance_config.py) are callables so they open
    lazily. Without the catalog (the webserver never answered) the families that need it (instigators, job
    schedules, retry limits) are served without samples and the daemon's liveness from its heartbeats alone (as
    /health does); `maintenance_api_metrics_errors{source="catalog"}` is 1 then, and while an
    older catalog is served."""

    def __init__(self, dagster: Callable[[], RunStorage], registry: Callable[[], sa.Engine],
                 racing: Callable[[], sa.Engine | None], catalog: Callable[[], Catalog], *,
                 config: Callable[[], InstanceConfig],
                 heartbeat_max_age_seconds: float = DEFAULT_HEARTBEAT_MAX_AGE_SECONDS,
                 code_servers: Sequence[CodeServer] = (),
                 policies: Callable[[], Mapping[tuple[str, str], JobPolicy]] = load_policies) -> None:
        self._dagster = dagster
        self._config = config
        self._catalog = catalog
        self._policies = policies
        self._registry = registry
        self._racing = racing
        self._heartbeat_max_age = heartbeat_max_age_seconds
        self._code_servers = tuple(code_servers)
        self._watching_since = time.monotonic()  # this process's start: what daemon_starting counts from

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: nothing is queried when it is registered

    def collect(self) -> Iterator[Metric]:
        now = dt.datetime.now(dt.UTC)
        # Read once per render, by the first of the two sources that need it (a failure is retried by the second).
        task_schedules = functools.cache(lambda: overdue.enabled_task_schedules(self._registry()))
        # One catalog for the whole render: every family of a scrape describes the same schedules, sensors and jobs.
        known = functools.cache(self._known)
        errors = GaugeMetricFamily("maintenance_api_metrics_errors", "1 when a metrics source failed in this scrape",
                                   labels=["source"])
        sources: dict[str, Callable[[], Iterator[Metric]]] = {
            "runs": lambda: self._runs(now),
            "step_retries": lambda: step_retry_families(self._dagster(), now),
            "heartbeats": lambda: iter([heartbeat_family(self._dagster())]),
            "registry": lambda: registry_families(self._registry(), self._config()),
            "tab_requests": lambda: self._tab(now),
            "racing_day": lambda: racing_day_families(self._dagster()),
            # What the alert rules compare against (platform_monitoring/alert_metrics.py, docs/alerts.md).
            "instigators": lambda: self._instigators(now, known()),
            "code_servers": lambda: alert_metrics.code_server_families(
                code_server_states(self._code_servers)),
            "task_schedules": lambda: self._task_schedules(task_schedules()),
            "job_schedules": lambda: alert_metrics.job_schedule_families(
                overdue.scheduled_jobs(known().instigators, self._policies())),
            "catalog": self._catalog_problem,
            "retry_limits": lambda: self._retry_limits(task_schedules(), known()),
            "postgres_backups": lambda: alert_metrics.postgres_backup_families(
                postgres_backup_successes(self._dagster())),
        }
        for source, produce in sources.items():
            try:
                families = list(produce())
            except Exception:
                log.exception("metrics source %s failed", source)
                errors.add_metric([source], 1)
                continue
            errors.add_metric([source], 0)
            yield from families
        yield errors

    def _runs(self, now: dt.datetime) -> Iterator[Metric]:
        since = (now - WINDOWS["24h"]).replace(tzinfo=None)
        with connect(self._dagster()) as conn:
            rows = recent_runs(conn, since, since.replace(tzinfo=dt.UTC).timestamp())
            live = list(live_families(conn))
        yield from run_families(rows, now)
        yield from live

    def _instigators(self, now: dt.datetime, catalog: Catalog) -> Iterator[Metric]:
        """Each schedule's and sensor's tick state, and whether the daemon is up (the same rule as /health)."""
        storage = self._dagster()
        states = schedulers.tick_states(storage, catalog.instigators, now=now)
        yield from alert_metrics.instigator_families(states)
        intervals, newest = sensor_tick_inputs(((s.running, s.last_tick_at, s.interval_seconds)
                                                 for s in states if s.kind == "sensor"), now.timestamp())
        ages = heartbeat_ages(dagster_storage.daemon_heartbeats(storage), now.timestamp())
        liveness = daemon_liveness(ages, self._config().required_daemons, self._heartbeat_max_age, intervals,
                                   newest)
        yield GaugeMetricFamily("orchestration_daemon_up",
                                "1 when every required daemon's heartbeat is fresh and its running sensors tick",
                                value=1.0 if liveness.up else 0.0)
        starting = daemon_starting(ages, time.monotonic() - self._watching_since)
        yield GaugeMetricFamily("orchestration_daemon_starting",
                                "1 while no daemon has beaten since the control API started, for its first 5 minutes",
                                value=1.0 if starting else 0.0)

    def _known(self) -> Catalog:
        """The webserver's catalog; an empty one when it never answered (the "catalog" source reports that)."""
        try:
            return self._catalog()
        except CatalogUnavailable:
            return Catalog((), (), "unavailable")

    def _catalog_problem(self) -> Iterator[Metric]:
        problem = self._catalog().problem  # CatalogUnavailable: no catalog at all
        if problem is not None:
            raise CatalogUnavailable(problem)
        return iter(())

    def _task_schedules(self, tasks: list[overdue.TaskSchedule]) -> Iterator[Metric]:
        successes = overdue.task_last_successes(self._dagster(), (t.task for t in tasks))
        yield from alert_metrics.task_schedule_families(tasks, successes)

    def _retry_limits(self, tasks: list[overdue.TaskSchedule], catalog: Catalog) -> Iterator[Metric]:
        jobs = catalog.jobs
        default = self._config().run_retries_max
        yield from alert_metrics.retry_limit_families(alert_metrics.step_retry_limits(jobs, self._policies()),
                                                      alert_metrics.run_retry_limits(jobs, default, tasks))

    def _tab(self, now: dt.datetime) -> Iterator[Metric]:
        racing = self._racing()
        if racing is not None:
            yield tab_request_family(racing, now)
