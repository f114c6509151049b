"""Shared fixtures: a real Postgres (TEST_DATABASE_URL, else an embedded server this run starts and stops)."""

from __future__ import annotations

import os
import resource
from contextlib import contextmanager
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from local_stack.embedded_postgres import (
    database_url,
    drop_database,
    ensure_database,
    psycopg2_url,
    temporary_embedded_postgres,
)
from orchestration_core.pooled_storage import KEEP_CONNECTIONS_VARIABLE, close_kept_connections
from tests.http_tls import share_default_tls_context
from tests.suite_cgroup import enter_own_cpu_cgroup, leave_own_cpu_cgroup, record_own_cgroup

share_default_tls_context()  # ~48 ms of CPU per httpx client otherwise (tests/http_tls.py)

REPO_ROOT = Path(__file__).resolve().parent.parent
TAB_SAMPLES_DIR = REPO_ROOT / "tests" / "racing_orchestration" / "tab" / "samples"  # real API responses, in the repo
TEST_SERVER_PREFIX = "racing-test-pg-"  # the session's embedded Postgres: <temp dir>/racing-test-pg-…/pgdata

# --- Side by side (`make test` runs the suite on several pytest-xdist workers) --------------------------------------
# Each test file is a unit one worker runs whole, in file order, so module-scoped fixtures (a webserver, a migrated
# database, a whole stack) start once. The two compose deployments share the one Docker engine but each is a unit of
# its own: the alert path's file (its own compose project and ports: tests/production/compose_stack.py), and the rest
# of tests/production (the live production deployment and the engine's own tests). One after the other on one worker
# they were the suite's critical path: that worker took 1,131 s while the other three ended at ~800 s, the
# cores 631 s idle (BENCHMARKS.md, "Test suite"). Side by side they once overloaded the 2 cores (two `up`s at once
# beside the outage stack, 275-306 s each instead of 75-107), when the suite used ~40% more CPU than since
# run workers are forked (1,737 CPU-s a suite); their image builds and `up`s still take turns (machine locks in
# tests/production). The long units are queued first, longest first, so each starts at once on a worker of its own
# while the other workers share the rest. xdist's own `--dist loadgroup` would read `xdist_group`
# marks, but with pytest 9.2's structured node ids it silently stops grouping (pytest-dev/pytest-xdist#1386): the
# units are therefore cut from the node ids' paths by the scheduler below. What a new long test must do to keep
# `make test` within 20 minutes: BENCHMARKS.md ("Test suite").
DOCKER_ENGINE_GROUP = "docker-engine"
ALERT_PATH_GROUP = "tests/production/test_live_alerts.py"
LONG_GROUPS = (
    ALERT_PATH_GROUP,  # the alert path's compose deployment and its faults (~700 s, mostly Prometheus' timings)
    "tests/reliability/test_postgres_outage.py",  # a whole stack through two Postgres outages (the window is fixed)
    DOCKER_ENGINE_GROUP,  # the live production deployment (image builds, upgrade, retries) and the engine's tests
    "tests/e2e/test_live_stack.py",  # the `make run` stack driven through GraphQL, REST and Chromium
)


def xdist_group_of(path: str) -> str:
    """The unit (xdist scope) of a test file given by its path from the repository root (posix separators)."""
    if path == ALERT_PATH_GROUP:
        return path
    return DOCKER_ENGINE_GROUP if path.startswith("tests/production/") else path


def group_of_node(nodeid: str) -> str:
    return xdist_group_of(nodeid.split("::", 1)[0])


def long_first(groups: list[str]) -> list[str]:
    """`groups` in the order xdist should start them: LONG_GROUPS in their order, then the others as collected."""
    rank = {group: index for index, group in enumerate(LONG_GROUPS)}
    return sorted(dict.fromkeys(groups), key=lambda group: rank.get(group, len(LONG_GROUPS)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker (each sorts the same way); a plain run keeps file order
        order = {group: index for index, group in enumerate(long_first([group_of_node(i.nodeid) for i in items]))}
        items.sort(key=lambda item: order[group_of_node(item.nodeid)])  # stable: file order within a unit


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (the test extra installs it)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Whatever `--dist` load mode is asked for, the units above: one compose deployment at a time on the engine."""
    if config.getvalue("dist") == "each":  # every test on every worker: nothing to split
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of_node(nodeid)

    config.option.loadscopereorder = False  # queue the units in the workers' collection order: long ones first
    return SuiteScheduling(config, log)


# --- Who gets the CPU first -----------------------------------------------------------------------------------------
# The kernel's autogroup scheduling shares the CPU between sessions, each weighted by its autogroup's nice value. The
# long units wait on stacks whose every process runs in a session of its own (and on the engine's containers,
# tests/production/docker_engine.py); the short files are CPU-bound. Each worker runs in a session of its own, and
# while it runs a short file its session is niced: on 2 cores the short files then fill the time the stacks leave
# idle instead of starving them (with four workers at equal weight the outage stack's runs queued past a race's
# jump and the test took 1,312 s instead of 650-742: BENCHMARKS.md "Test suite"). Autogroups apply only in
# the root cpu cgroup, and the suite runs in a child one: its own (tests/suite_cgroup.py), or a CI runner's. There
# processes are weighed one by one, so the worker's own nice value is set too (its threads and the processes it starts
# inherit it), and the session's only where the suite is left in the root cgroup.
SHORT_UNIT_NICE = 5
AUTOGROUP = Path("/proc/self/autogroup")


def autogroup_nice_for(group: str) -> int:
    return 0 if group in LONG_GROUPS else SHORT_UNIT_NICE


def set_autogroup_nice(nice: int, path: Path = AUTOGROUP) -> bool:
    """The nice value of this process's autogroup (every process of its session); False where the kernel has no
    autogroups or refuses (lowering it again needs CAP_SYS_NICE: a worker not run as root stays at the higher)."""
    try:
        path.write_text(f"{nice}\n")
    except OSError:
        return False
    return True


def set_worker_nice(nice: int, autogroup: Path = AUTOGROUP) -> bool:
    """`nice` for this worker's session (its autogroup) and for the worker process itself; False if neither took."""
    in_session = set_autogroup_nice(nice, autogroup)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:  # lowering it again needs CAP_SYS_NICE
        return in_session
    return True


WORKER_NICE = pytest.StashKey[int]()


OWN_CPU_CGROUP = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: a session (so an autogroup) of its own
        try:
            os.setsid()
        except OSError:  # already a session leader
            pass
    else:  # the controller, before its workers start: they inherit its cgroup
        if (own := enter_own_cpu_cgroup(os.getpid())) is not None:
            record_own_cgroup(own, REPO_ROOT / "test-artifacts")
            config.stash[OWN_CPU_CGROUP] = own


def pytest_unconfigure(config: pytest.Config) -> None:
    if OWN_CPU_CGROUP in config.stash:
        leave_own_cpu_cgroup(os.getpid(), config.stash[OWN_CPU_CGROUP])


# --- What each test costs the CPU ------------------------------------------------------------------------------------
# The 2-core machine runs `make test` CPU-bound (bench/suite_cpu.py): a file's wall time says little about what it
# costs the others beside it. When a JUnit report is asked for (`make test-measured`), each test's CPU seconds (its
# worker's own, plus the subprocesses it ran and reaped: CLIs, servers it stopped) go into it as the property
# `cpu_seconds`; bench/suite_times.py sums them per file. Containers and processes a test leaves to others (a compose
# stack's run containers) are not in it. `make test` asks for no report and counts nothing.


def cpu_seconds_used() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


CPU_AT_START = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if hasattr(item.config, "workerinput"):
        nice = autogroup_nice_for(group_of_node(item.nodeid))
        if item.config.stash.get(WORKER_NICE, 0) != nice and set_worker_nice(nice):
            item.config.stash[WORKER_NICE] = nice
    if item.config.option.xmlpath:
        item.stash[CPU_AT_START] = cpu_seconds_used()  # before the fixtures: a module's set-up goes to its first test
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    if call.when == "teardown" and CPU_AT_START in item.stash:
        item.user_properties.append(("cpu_seconds", round(cpu_seconds_used() - item.stash[CPU_AT_START], 2)))
        # Which worker ran it and when it ended (unix time): each worker's timeline, so the report shows which worker
        # ended the run and what it ran last (bench/suite_times.py).
        item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))
        item.user_properties.append(("ended_at", round(call.stop, 1)))
    return (yield)


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """URL of a Postgres server's admin database; tests create their own databases on it.

    Under xdist each worker process starts its own server (in a temp folder of its own, on its own socket): no
    worker waits for another's, and a worker that ends cannot stop a server another still uses."""
    if url := os.environ.get("TEST_DATABASE_URL"):
        yield psycopg2_url(url)
        return
    # Not under pytest's basetemp: that folder is private to root (Postgres runs as an unprivileged user when the
    # tests run as root) and concurrent pytest sessions prune each other's basetemps. Removed with its folder at the end.
    with temporary_embedded_postgres(TEST_SERVER_PREFIX) as server:
        yield psycopg2_url(server.get_uri())


def _fresh_database(server_url: str, prefix: str) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = ensure_database(server_url, name)
    try:
        yield url
    finally:
        drop_database(server_url, name)


@pytest.fixture
def fresh_database_url(postgres_server_url: str) -> Iterator[str]:
    """An empty database of its own for one test, dropped afterwards."""
    yield from _fresh_database(postgres_server_url, "t")


@pytest.fixture
def registry_url(fresh_database_url: str) -> str:
    """A fresh database with the maintenance task registry's schema."""
    from maintenance_jobs.database.migrate import upgrade

    upgrade(fresh_database_url)
    return fresh_database_url


@pytest.fixture(scope="session")
def dagster_database_url(postgres_server_url: str) -> Iterator[str]:
    """One Dagster storage database for the session (tests wipe it through `pg_instance`)."""
    yield from _fresh_database(postgres_server_url, "dagster")


# The tests' Dagster instances keep their storage connections as the compose daemon does (orchestration_core/
# pooled_storage.py): a test makes hundreds of storage calls, and dagster-postgres' NullPool opens a Postgres backend
# for each. On the racing tests of the fast tier (3 workers) that was 115 CPU-s of Postgres instead of 64 and 180 s
# instead of 148 (BENCHMARKS.md "Test suite"). The variable reaches the commands tests start too, whose instances
# (dagster.yaml) read it as well.
os.environ.setdefault(KEEP_CONNECTIONS_VARIABLE, "1")


@pytest.fixture(autouse=True)
def _close_kept_storage_connections() -> Iterator[None]:
    """Each test's instances leave their kept connections open (Dagster's dispose() does not close a storage's
    engine): closed after every test, so a session of thousands of instances does not run Postgres out of them."""
    yield
    close_kept_connections()


def pooled_postgres_storage(url: str) -> dict:
    """The instance `storage:` block of a test instance on the Postgres database at `url`."""
    return {"custom": {"module": "orchestration_core.pooled_storage", "class": "PooledPostgresStorage",
                       "config": {"postgres_url": url}}}


@pytest.fixture
def pg_instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance on Postgres run/event/schedule storage, emptied before each test."""
    yield from wiped_instance(dagster_database_url)


# The session databases whose Dagster tables exist: later instances skip dagster-postgres' check for them (a table
# listing per storage, three connections; 3% of the fast tier's test-process samples under py-spy).
_DAGSTER_TABLES_CREATED: set[str] = set()


def wiped_instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance on the session's Postgres storage database, emptied first (for fixtures of any scope)."""
    storage = pooled_postgres_storage(dagster_database_url)
    storage["custom"]["config"]["should_autocreate_tables"] = dagster_database_url not in _DAGSTER_TABLES_CREATED
    overrides = {"storage": storage}
    with dg.instance_for_test(overrides=overrides) as instance:
        _DAGSTER_TABLES_CREATED.add(dagster_database_url)
        instance.wipe()
        # Schedule and sensor states and ticks too: a sensor one test stopped (or failed) must not leak into the next.
        instance.wipe_all_schedules()
        yield instance


@pytest.fixture(scope="session")
def tab_samples_dir() -> Path:
    assert TAB_SAMPLES_DIR.is_dir(), f"TAB samples not found at {TAB_SAMPLES_DIR}"
    return TAB_SAMPLES_DIR


def server_url_for(database: str, server_url: str) -> str:
    return database_url(server_url, database)


@pytest.fixture(scope="session")
def dagster_webserver_url(dagster_database_url: str) -> Iterator[str]:
    """A real Dagster webserver (GraphQL over HTTP) serving the maintenance location on the session's storage.

    Its instance queues runs (QueuedRunCoordinator) and nothing dequeues them here: the control API's manual trigger
    launches through it as it does in production, and tests that need the run executed dequeue it themselves.
    """
    with serve_webserver(dagster_database_url, "maintenance_jobs.definitions", "maintenance_jobs") as url:
        yield url


@contextmanager
def serve_webserver(dagster_database_url: str, module: str, location: str) -> Iterator[str]:
    """A Dagster webserver on a free port serving `module` as code location `location`, its instance queueing runs
    on the storage at `dagster_database_url`; yields its URL."""
    from dagster_webserver.app import create_app_from_workspace_process_context

    from local_stack.stack import free_port
    from tests.code_server import module_workspace
    from tests.control_api.conftest import serve

    overrides = {
        "storage": pooled_postgres_storage(dagster_database_url),
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
    }
    with dg.instance_for_test(overrides=overrides) as instance:
        with module_workspace(instance, module, location) as context:
            server, thread = serve(create_app_from_workspace_process_context(context), free_port())
            port = server.servers[0].sockets[0].getsockname()[1]
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
                thread.join(timeout=10)


@pytest.fixture
def mocked_launch_instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """The real run queue on Postgres whose launcher only records launches (tests/run_queue.py), for the queue-order
    tests of both code locations."""
    from tests.run_queue import mocked_launch_instance as queue_instance  # run_queue imports this module

    with queue_instance(dagster_database_url) as instance:
        yield instance
