"""Soak: the compose deployment (the production reference) or the local stack (`make run`), for hours at a busy racing
day's density, sampled every minute. Run by hand, not a timed test (BENCHMARKS.md "Soak").

    python bench/soak.py --form compose --hours 4 --out /var/tmp/soak/compose [--skip-build] [--env NAME=VALUE] \
        [--project racing-soak]
    python bench/soak.py --form local --hours 4 --out /var/tmp/soak/local
    python bench/soak.py --report /var/tmp/soak/compose /var/tmp/soak/local     # the figures side by side

Load: the simulated feed in dense mode (a race a minute, every checkpoint: T-60, T-15, T+5 until Final) after one
morning scrape, the seeded `test_example_task` enabled (a maintenance run every minute) plus a second every-minute
task, and the Postgres backup seed task, when the registry has it, moved to minute 22 of every hour.

Every minute it appends one line to OUT/samples.jsonl: each long-lived service's PSS (in compose also `docker stats`),
its open file descriptors and Postgres connections, each database's size and its largest tables' live and dead
tuples, the compute-log, export and backup folders, Docker's containers by state and volumes, the runs by status and
the restarts seen. The report prints each figure's slope after the warm-up (20 minutes), the 30-day projection of each
service's memory against the goal (2 MiB/h), the runs per day, the checkpoint ledger's end states and the asset checks
whose recorded state disagrees with the stored data (`racing verify-checks`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

GOAL_MIB_PER_HOUR = 2.0
WARMUP_MINUTES = 20.0
PROJECTION_DAYS = 30
DATABASES = ("dagster", "racing", "maintenance")
LARGEST_TABLES = 5
# The ledger's end states: a claimed checkpoint ends done, skipped or failed, each with its reason in `note`.
LEDGER_END_STATES = ("done", "skipped", "failed")
SCRAPE_RUN_CONFIG = {"ops": {"scrape_combination": {"config": {"retry_empty": False}}}}
EVERY_MINUTE_TASK = {
    "task_name": "soak_every_minute", "service": "soak", "executor": "example_executor", "priority": 60,
    "minute": -1, "hour": -1, "day_of_month": -1, "month": -1, "day_of_week": -1,
    "config": {"message": "soak", "delay_seconds": 1}, "timeout_seconds": 60,
}
BACKUP_SEED_TASK = "backup_postgres_nightly"


# --- pure helpers (tests/bench/test_soak.py) -------------------------------------------------------------------------
SPAWNED = "spawned"  # a multiprocessing child, placed by its parent


def classify_local_process(cmdline: list[str]) -> str:
    """Which service of the local stack a process belongs to, from its command line. Run workers are not long-lived:
    they are counted apart and kept out of the slopes."""
    text = " ".join(cmdline)
    if "execute_run" in text or "execute_step" in text or "api execute" in text:
        return "run-workers"
    # dagster dev's code servers start each run in a multiprocessing child of their own; `maintenance-api --workers N`
    # serves from such children too. Whose it is, its parent says (services_of).
    if "multiprocessing.spawn" in text:
        return SPAWNED
    if text.startswith("postgres") or "/bin/postgres" in text or " postgres:" in f" {text}":
        return "postgres"
    if "dagster-daemon" in text or "dagster._daemon" in text:
        return "daemon"
    if "dagster-webserver" in text or "dagster_webserver" in text:
        return "webserver"
    if "racing_orchestration" in text and ("grpc" in text or "code-server" in text or "code_server" in text):
        return "code-racing"
    if "maintenance_jobs" in text and ("grpc" in text or "code-server" in text or "code_server" in text):
        return "code-maintenance"
    if "control_api" in text:
        return "api"
    if "racing_orchestration.cli sim" in text or text.endswith(" sim") or " sim --" in text:
        return "feed"
    if "dagster dev" in text or "dagster.__main__ dev" in text or "-m dagster dev" in text:
        return "dagster-dev"
    return "other"


CONTAINER_FORMAT = '{{.ID}} {{.Label "com.docker.compose.service"}}'


def long_running_containers(ps_output: str, long_running: tuple[str, ...]) -> dict[str, str]:
    """service -> container id from `docker ps --format CONTAINER_FORMAT` (not `-q`, which prints the ids alone and
    so would match no service); one-shot services and run containers (no service label) are left out."""
    out = {}
    for line in ps_output.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] in long_running:
            out[fields[1]] = fields[0]
    return out


def guard_restarts(log_text: str) -> dict[str, int]:
    """The memory guard's restarts in a container log, by the name it guards (orchestration_core/memory_guard.py
    writes `memory-guard: NAME restarting: ...` once a restart)."""
    out: dict[str, int] = {}
    for name in re.findall(r"^memory-guard: (\S+) restarting:", log_text, flags=re.MULTILINE):
        out[name] = out.get(name, 0) + 1
    return out


def services_of(cmdlines: dict[int, list[str]], parents: dict[int, int]) -> dict[int, str]:
    """pid -> service for a process tree: a process its command line does not name (a multiprocessing resource
    tracker, a shell) belongs to its nearest named ancestor's service. A multiprocessing child is a run worker when
    a code server (or nothing named) spawned it, and part of its ancestor's service otherwise (the API's workers)."""
    named = {pid: classify_local_process(cmdline) for pid, cmdline in cmdlines.items()}
    out = {}
    for pid in cmdlines:
        current, seen = pid, set()
        while named.get(current, "other") in ("other", SPAWNED) and current in parents and current not in seen:
            seen.add(current)
            current = parents[current]
        service = named.get(current, "other")
        if SPAWNED in (named[pid], *(named.get(p) for p in seen)):
            service = "run-workers" if service in ("code-racing", "code-maintenance", "other", SPAWNED) else service
        out[pid] = service
    return out


def unix_socket_clients(ss_text: str, socket_marker: str = ".s.PGSQL.") -> list[int]:
    """The client pid at the other end of each Postgres connection over its Unix socket, from `ss -xpn`: the server
    end names the socket path and its peer's inode; the client end is the line whose own inode that is."""
    owners: dict[str, list[int]] = {}
    server_peers = []
    for line in ss_text.splitlines():
        fields = line.split()
        if len(fields) < 8 or fields[0] != "u_str":
            continue
        local_path, local_inode, peer_inode = fields[4], fields[5], fields[7]
        pids = [int(p) for p in re.findall(r"pid=(\d+)", line)]
        owners.setdefault(local_inode, []).extend(pids)
        if socket_marker in local_path:
            server_peers.append(peer_inode)
    return [owners[peer][0] for peer in server_peers if owners.get(peer)]


_UNITS = {"b": 1 / 2**20, "kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0}


def docker_memory_mib(usage: str) -> float:
    """`docker stats`' MemUsage ("123.4MiB / 1GiB") as MiB used."""
    used = usage.split("/")[0].strip()
    match = re.fullmatch(r"([\d.]+)\s*([A-Za-z]+)", used)
    if not match:
        raise ValueError(f"not a docker memory figure: {usage!r}")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def pss_mib_from_smaps_rollup(text: str) -> float:
    """The `Pss:` line of /proc/PID/smaps_rollup, in MiB."""
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise ValueError("no Pss line")


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (hours, value) points, per hour; None with fewer than two distinct times."""
    if len({t for t, _ in points}) < 2:
        return None
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den


def series(samples: list[dict], field: str) -> dict[str, list[tuple[float, float]]]:
    """name -> [(hours since the first sample, value)] of one per-name field of the samples."""
    if not samples:
        return {}
    start = samples[0]["t"]
    out: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        for name, value in sample.get(field, {}).items():
            if isinstance(value, (int, float)):
                out.setdefault(name, []).append(((sample["t"] - start) / 3600, float(value)))
    return out


def trend(points: list[tuple[float, float]], warmup_hours: float) -> dict:
    """First and last value after the warm-up, the slope per hour over it and the value in 30 days at that slope, and
    the slope over the later half of it alone: a cache filling up to its bound (SQLAlchemy's reflection caches in the
    code servers, BENCHMARKS.md "Dagster's own growth") climbs early and then stays flat, a leak keeps its slope."""
    kept = [(t, v) for t, v in points if t >= warmup_hours]
    if len(kept) < 2:
        return {"samples": len(kept)}
    slope = slope_per_hour(kept)
    middle = kept[0][0] + (kept[-1][0] - kept[0][0]) / 2
    late = slope_per_hour([(t, v) for t, v in kept if t >= middle])
    return {"samples": len(kept), "hours": round(kept[-1][0] - kept[0][0], 2), "first": round(kept[0][1], 1),
            "last": round(kept[-1][1], 1), "per_hour": round(slope, 2),
            "late_per_hour": None if late is None else round(late, 2),
            "in_30_days": round(kept[-1][1] + slope * 24 * PROJECTION_DAYS, 1)}


def run_rate(samples: list[dict], warmup_hours: float) -> dict:
    """Runs started per day and the share that failed or were canceled, over the samples after the warm-up."""
    start = samples[0]["t"] if samples else 0
    kept = [s for s in samples if (s["t"] - start) / 3600 >= warmup_hours and s.get("runs")]
    if len(kept) < 2:
        return {}
    first, last = kept[0]["runs"], kept[-1]["runs"]
    days = (kept[-1]["t"] - kept[0]["t"]) / 86400
    total = sum(last.values()) - sum(first.values())
    failed = sum(last.get(s, 0) - first.get(s, 0) for s in ("FAILURE", "CANCELED"))
    return {"per_day": round(total / days) if days else None,
            "failed_share": round(failed / total, 4) if total else 0.0}


def summarize(samples: list[dict], warmup_minutes: float = WARMUP_MINUTES) -> dict:
    """Every figure's trend after the warm-up, and each service's memory against the goal."""
    warmup = warmup_minutes / 60
    report: dict = {"duration_hours": round((samples[-1]["t"] - samples[0]["t"]) / 3600, 2) if samples else 0,
                    "samples": len(samples), "runs": run_rate(samples, warmup)}
    for field in ("pss_mib", "docker_mib", "fds", "pg_connections", "db_mib", "dead_tuples", "live_tuples",
                  "folders_mib", "containers", "volumes"):
        report[field] = {name: trend(points, warmup) for name, points in sorted(series(samples, field).items())}
    memory = report["docker_mib"] or report["pss_mib"]
    report["memory_goal"] = {
        name: {"per_hour": t.get("per_hour"), "in_30_days": t.get("in_30_days"),
               "within_goal": t.get("per_hour") is not None and t["per_hour"] <= GOAL_MIB_PER_HOUR}
        for name, t in memory.items() if name not in ("run-workers", "other")}
    report["restarts"] = samples[-1].get("restarts", {}) if samples else {}
    return report


def env_assignments(pairs: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` arguments as a mapping; a pair without `=` is refused."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise ValueError(f"--env takes NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


# --- measuring processes ---------------------------------------------------------------------------------------------
def read_pss_mib(pid: int) -> float:
    try:
        return pss_mib_from_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
    except (OSError, ValueError):
        return 0.0  # gone between listing and reading


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def folder_mib(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return round(total / 2**20, 2)


STATS_SQL = {
    "connections": "SELECT coalesce(host(client_addr), 'local'), client_port, datname FROM pg_stat_activity "
                   "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    "sizes": "SELECT datname, pg_database_size(datname) FROM pg_database WHERE datname IN ('dagster', 'racing', "
             "'maintenance')",
    "tables": "SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables "
              f"ORDER BY pg_total_relation_size(relid) DESC LIMIT {LARGEST_TABLES}",
    "runs": "SELECT status, count(*) FROM runs GROUP BY status",
    "ledger": "SELECT checkpoint, state, count(*) FROM race_checkpoints GROUP BY checkpoint, state",
    "ledger_stuck": "SELECT count(*) FROM race_checkpoints WHERE state NOT IN ('done', 'skipped', 'failed') "
                    "AND scheduled_for < now() - interval '30 minutes' AND (next_attempt_at IS NULL OR "
                    "next_attempt_at < now() - interval '30 minutes')",
}


class Sampler:
    """One form's stack: what to measure and how. `query(database, sql)` gives rows as lists of strings."""

    def services(self) -> dict[str, list[int]]:
        raise NotImplementedError

    def query(self, database: str, sql: str) -> list[list[str]]:
        raise NotImplementedError

    def pg_connection_owners(self) -> list[str]:
        """The service of each open Postgres client connection (the sampler's own not counted)."""
        raise NotImplementedError

    def folders(self) -> dict[str, Path]:
        raise NotImplementedError

    def extra(self) -> dict:
        return {}

    def restarts(self) -> dict[str, int]:
        return {}

    def sample(self) -> dict:
        record: dict = {"t": time.time(), "pss_mib": {}, "fds": {}, "pg_connections": {}, "db_mib": {},
                        "live_tuples": {}, "dead_tuples": {}, "folders_mib": {}}
        for service, pids in self.services().items():
            record["pss_mib"][service] = round(sum(read_pss_mib(p) for p in pids), 1)
            record["fds"][service] = sum(open_fds(p) for p in pids)
        for owner in self.pg_connection_owners():
            record["pg_connections"][owner] = record["pg_connections"].get(owner, 0) + 1
        for name, size in self.query("postgres", STATS_SQL["sizes"]):
            record["db_mib"][name] = round(int(size) / 2**20, 2)
        for database in DATABASES:
            for table, live, dead in self.query(database, STATS_SQL["tables"]):
                record["live_tuples"][f"{database}.{table}"] = int(live)
                record["dead_tuples"][f"{database}.{table}"] = int(dead)
        record["runs"] = {status: int(n) for status, n in self.query("dagster", STATS_SQL["runs"])}
        for name, path in self.folders().items():
            record["folders_mib"][name] = folder_mib(path)
        record["restarts"] = self.restarts()
        record.update(self.extra())
        return record

    def ledger(self) -> dict:
        rows = self.query("racing", STATS_SQL["ledger"])
        [[stuck]] = self.query("racing", STATS_SQL["ledger_stuck"])
        return {"states": {f"{c}:{s}": int(n) for c, s, n in rows}, "not_ended_after_30_min": int(stuck)}


class LocalSampler(Sampler):
    def __init__(self, stack) -> None:  # local_stack.stack.LocalStack, started
        import psutil
        import sqlalchemy as sa

        self.psutil, self.sa, self.stack = psutil, sa, stack
        self.engines = {db: sa.create_engine(stack.env[var], poolclass=sa.pool.NullPool)
                        for db, var in (("dagster", "DAGSTER_POSTGRES_URL"), ("racing", "RACING_DATABASE_URL"),
                                        ("maintenance", "MAINTENANCE_DATABASE_URL"))}
        self.engines["postgres"] = self.engines["dagster"]
        self.pgdata = str(stack.options.data_dir / "pgdata")
        self.seen_pids: dict[str, set[int]] = {}
        self.restart_counts: dict[str, int] = {}
        self.service_by_pid: dict[int, str] = {}

    def _tree(self) -> list:
        roots = [self.psutil.Process(p.pid) for p in self.stack.processes.values() if p.poll() is None]
        roots += [p for p in self.psutil.process_iter(["cmdline"])
                  if self.pgdata in " ".join(p.info["cmdline"] or []) and "postgres" in " ".join(p.info["cmdline"])]
        found = {}
        for root in roots:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    found[proc.pid] = proc
            except self.psutil.NoSuchProcess:
                pass
        return list(found.values())

    def services(self) -> dict[str, list[int]]:
        cmdlines, parents = {}, {}
        for proc in self._tree():
            try:
                cmdlines[proc.pid], parents[proc.pid] = proc.cmdline(), proc.ppid()
            except self.psutil.Error:
                pass
        self.service_by_pid = services_of(cmdlines, parents)
        out: dict[str, list[int]] = {}
        for pid, service in self.service_by_pid.items():
            out.setdefault(service, []).append(pid)
        for service, pids in out.items():  # a long-lived service whose processes all changed was restarted
            before = self.seen_pids.get(service)
            if service != "run-workers" and before and not before & set(pids):
                self.restart_counts[service] = self.restart_counts.get(service, 0) + 1
            self.seen_pids[service] = set(pids)
        return out

    def restarts(self) -> dict[str, int]:
        return dict(self.restart_counts)

    def query(self, database: str, sql: str) -> list[list[str]]:
        with self.engines[database].connect() as conn:
            return [[str(v) for v in row] for row in conn.execute(self.sa.text(sql))]

    def pg_connection_owners(self) -> list[str]:
        # The embedded Postgres listens on a Unix socket only: `ss` pairs each connection's two ends. The sampler
        # holds no connection while this runs (NullPool).
        ss = subprocess.run(["ss", "-xpn"], capture_output=True, text=True, timeout=60).stdout
        return [self.service_by_pid.get(pid, "other") for pid in unix_socket_clients(ss, f"{self.pgdata}/.s.PGSQL.")]

    def folders(self) -> dict[str, Path]:
        home = Path(self.stack.env["DAGSTER_HOME"])
        return {"compute-logs": home / "storage", "exports": Path(self.stack.env["RACING_EXPORT_DIR"]),
                "backups": self.stack.options.data_dir / "backups"}


class ComposeSampler(Sampler):
    def __init__(self, stack) -> None:  # tests.production.compose_stack.ComposeStack, up
        from tests.production.compose_stack import LONG_RUNNING

        self.stack, self.long_running = stack, LONG_RUNNING
        self.addresses: dict[str, str] = {}
        self.logs_since: str | None = None
        self.guard_counts: dict[str, int] = {}

    def _docker(self, *args: str) -> str:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60).stdout

    def containers(self) -> dict[str, str]:
        """service -> container id of the deployment's long-lived services."""
        out = self._docker("ps", "--filter", f"label=com.docker.compose.project={self.stack.project}",
                           "--format", CONTAINER_FORMAT)
        return long_running_containers(out, self.long_running)

    def services(self) -> dict[str, list[int]]:
        out = {}
        for service, cid in self.containers().items():
            top = self._docker("top", cid, "-eo", "pid").split()[1:]
            out[service] = [int(p) for p in top if p.isdigit()]
        return out

    def query(self, database: str, sql: str) -> list[list[str]]:
        return self.stack.psql(database, sql)

    def pg_connection_owners(self) -> list[str]:
        return [self.connection_owner(address) for address, _port, _db in
                self.query("postgres", STATS_SQL["connections"])]

    def connection_owner(self, address: str) -> str:
        if address not in self.addresses:
            for service, cid in self.containers().items():
                for ip in self._docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
                                       cid).split():
                    self.addresses[ip] = service
        return self.addresses.get(address, "run-containers" if address != "local" else "unix-socket")

    def folders(self) -> dict[str, Path]:
        mount = self._docker("volume", "inspect", "-f", "{{.Mountpoint}}", self.stack.volume("compute-logs")).strip()
        folders = {"exports": self.stack.exports, "backups": self.stack.backups}
        if mount:
            folders["compute-logs"] = Path(mount)
        return folders

    def extra(self) -> dict:
        stats = self._docker("stats", "--no-stream", "--format", "{{json .}}")
        ids = {cid[:12]: svc for svc, cid in self.containers().items()}
        docker_mib = {}
        for line in stats.splitlines():
            record = json.loads(line)
            if record["ID"][:12] in ids:
                docker_mib[ids[record["ID"][:12]]] = round(docker_memory_mib(record["MemUsage"]), 1)
        states: dict[str, int] = {}
        for state in self._docker("ps", "-a", "--format", "{{.State}}").split():
            states[state] = states.get(state, 0) + 1
        volumes = len(self._docker("volume", "ls", "-q").split())
        return {"docker_mib": docker_mib, "containers": states, "volumes": {"all": volumes}}

    def restarts(self) -> dict[str, int]:
        """Each service's engine restarts, and the memory guard's in-place restarts (daemon, code servers) counted
        from the container logs written since the previous sample, so no sample reads a log whole again."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        out = {}
        for service, cid in self.containers().items():
            count = self._docker("inspect", "-f", "{{.RestartCount}}", cid).strip()
            out[service] = int(count or 0)
            since = ["--since", self.logs_since] if self.logs_since else []
            logs = subprocess.run(["docker", "logs", *since, cid], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=120).stdout  # the guard writes to stderr
            for name, n in guard_restarts(logs).items():
                self.guard_counts[name] = self.guard_counts.get(name, 0) + n
        self.logs_since = now
        out.update({f"{name}-memory-guard": n for name, n in self.guard_counts.items()})
        return out


# --- driving the load -------------------------------------------------------------------------------------------------
def graphql(url: str, query: str, variables: dict) -> dict:
    import httpx

    response = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=120)
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise RuntimeError(body["errors"])
    return body["data"]


def launch_scrape(dagster_url: str) -> str:
    data = graphql(dagster_url, """
        mutation Launch($params: ExecutionParams!) {
          launchRun(executionParams: $params) { __typename ... on LaunchRunSuccess { run { runId } }
                                                ... on PythonError { message } } }""",
                   {"params": {"selector": {"repositoryLocationName": "racing_orchestration",
                                            "repositoryName": "__repository__", "jobName": "morning_scrape"},
                               "runConfigData": SCRAPE_RUN_CONFIG}})
    if data["launchRun"]["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(f"morning_scrape not launched: {data}")
    return data["launchRun"]["run"]["runId"]


def start_maintenance_load(api_url: str, api_key: str | None) -> list[str]:
    """The every-minute tasks, and the backup seed task hourly; returns what was set up."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    done = []
    with httpx.Client(base_url=api_url, headers=headers, timeout=60) as api:
        api.put("/tasks/test_example_task", json={"enabled": True}).raise_for_status()
        done.append("test_example_task every minute")
        created = api.post("/tasks", json=EVERY_MINUTE_TASK)
        if created.status_code not in (201, 409):
            created.raise_for_status()
        done.append(f"{EVERY_MINUTE_TASK['task_name']} every minute")
        if api.get(f"/tasks/{BACKUP_SEED_TASK}").status_code == 200:
            api.put(f"/tasks/{BACKUP_SEED_TASK}", json={"minute": 22, "hour": -1, "enabled": True}).raise_for_status()
            done.append(f"{BACKUP_SEED_TASK} at minute 22 of every hour")
    return done


def dense_sim_args(hours: float) -> list[str]:
    """A race a minute for the whole soak (and an hour beyond, so the last T-60s are due), the first in 16 minutes."""
    return ["--dense-every", "1", "--dense-races", str(int(hours * 60) + 90), "--dense-lead", "16"]


# --- the forms -----------------------------------------------------------------------------------------------------
def soak(sampler: Sampler, out: Path, hours: float, every_seconds: float, stop: dict) -> None:
    deadline = time.monotonic() + hours * 3600
    with (out / "samples.jsonl").open("a") as samples:
        while time.monotonic() < deadline and not stop["now"]:
            started = time.monotonic()
            try:
                samples.write(json.dumps(sampler.sample()) + "\n")
            except Exception as error:  # one failed sample (a busy engine) must not end hours of soak
                samples.write(json.dumps({"t": time.time(), "sample_error": repr(error)[:500]}) + "\n")
            samples.flush()
            while time.monotonic() - started < every_seconds and not stop["now"]:
                time.sleep(1)


def verify_checks(done: subprocess.CompletedProcess) -> dict:
    """`racing verify-checks --json`'s answer, or what it said instead."""
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"error": (done.stderr or done.stdout)[-500:], "exit": done.returncode}


def run_local(args, out: Path, stop: dict) -> dict:
    import secrets

    from local_stack.stack import LocalStack, StackOptions, free_port

    api_key = secrets.token_hex(16)
    stack = LocalStack(StackOptions(data_dir=out / "local-data", dagster_port=free_port(), sim_port=free_port(),
                                    api_port=free_port(), sim_args=dense_sim_args(args.hours), api_key=api_key,
                                    extra_env=env_assignments(args.env)))
    try:
        stack.start()
        meta = {"form": "local", "scrape_run": launch_scrape(stack.dagster_url),
                "maintenance": start_maintenance_load(stack.api_url, api_key)}
        sampler = LocalSampler(stack)
        soak(sampler, out, args.hours, args.every_seconds, stop)
        meta["ledger"] = sampler.ledger()
        meta["verify_checks"] = verify_checks(subprocess.run(
            [sys.executable, "-m", "racing_orchestration.cli", "verify-checks", "--json"], capture_output=True,
            text=True, env=stack.env, timeout=600))
        return meta
    finally:
        stack.stop()


def run_compose(args, out: Path, stop: dict) -> dict:
    from tests.production.compose_stack import ComposeStack

    from local_stack.stack import free_port

    # A project of its own on free ports: the suite's live production test (which owns the production name and
    # ports) can run on the same engine while a soak goes on.
    stack = ComposeStack(work_dir=out / "compose-work", image_tag=args.image_tag, project=args.project,
                         host_ports={service: free_port() for service in ("front", "api")},
                         sim_args=dense_sim_args(args.hours), extra_env=env_assignments(args.env))
    try:
        stack.deploy(build=not args.skip_build)
        meta = {"form": "compose", "scrape_run": launch_scrape(stack.dagster_url),
                "maintenance": start_maintenance_load(stack.api_url, stack.api_key)}
        sampler = ComposeSampler(stack)
        soak(sampler, out, args.hours, args.every_seconds, stop)
        meta["ledger"] = sampler.ledger()
        meta["verify_checks"] = verify_checks(stack.compose("exec", "-T", "code-racing", "racing", "verify-checks",
                                                            "--json", timeout=600, check=False))
        return meta
    finally:
        stack.down()


# --- the report ------------------------------------------------------------------------------------------------------
def load(out: Path) -> tuple[dict, list[dict]]:
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"form": out.name}
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line.strip()]
    return meta, [s for s in samples if "sample_error" not in s]


def print_report(outs: list[Path], warmup_minutes: float = WARMUP_MINUTES) -> None:
    reports = {}
    for out in outs:
        meta, samples = load(out)
        reports[meta.get("form", out.name)] = (meta, summarize(samples, warmup_minutes))
    forms = list(reports)
    print(f"Soak report (goal: each long-lived service grows at most {GOAL_MIB_PER_HOUR} MiB/h after a "
          f"{warmup_minutes:.0f}-minute warm-up)")
    for form, (meta, report) in reports.items():
        print(f"\n== {form}: {report['duration_hours']} h, {report['samples']} samples, runs {report['runs']}")
        print(f"{'service':<20}{'first MiB':>10}{'last MiB':>10}{'MiB/h':>8}{'late half':>10}{'30 days':>9}  goal")
        memory = report["docker_mib"] or report["pss_mib"]
        for name, t in memory.items():
            if "per_hour" in t:
                goal = "ok" if t["per_hour"] <= GOAL_MIB_PER_HOUR else "ABOVE"
                print(f"{name:<20}{t['first']:>10}{t['last']:>10}{t['per_hour']:>8}{str(t['late_per_hour']):>10}"
                      f"{t['in_30_days']:>9}  {goal}")
        for field in ("fds", "pg_connections", "db_mib", "dead_tuples", "folders_mib", "containers", "volumes"):
            figures = {n: t for n, t in report[field].items() if "per_hour" in t}
            if figures:
                print(f"-- {field}: " + "; ".join(f"{n} {t['first']}->{t['last']} ({t['per_hour']:+}/h)"
                                                  for n, t in figures.items()))
        print(f"-- restarts: {report['restarts']}")
        print(f"-- checkpoint ledger: {meta.get('ledger')}")
        print(f"-- asset checks vs stored data: {meta.get('verify_checks')}")
    if len(forms) > 1:
        print("\nMemory slopes side by side (MiB/h): " + ", ".join(forms))
        names = sorted({n for _, r in reports.values() for n in (r["docker_mib"] or r["pss_mib"])})
        for name in names:
            row = [(reports[f][1]["docker_mib"] or reports[f][1]["pss_mib"]).get(name, {}).get("per_hour", "-")
                   for f in forms]
            print(f"  {name:<20}" + "".join(f"{str(v):>10}" for v in row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--form", choices=("compose", "local"))
    parser.add_argument("--hours", type=float, default=4.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--every-seconds", type=float, default=60.0)
    parser.add_argument("--skip-build", action="store_true", help="compose: use the images already tagged")
    parser.add_argument("--image-tag", default="soak")
    parser.add_argument("--project", default="racing-soak",
                        help="compose: the project name (its network and volumes are named after it)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the stack (compose: its env file), e.g. DAEMON_RESTART_ABOVE_MIB=150")
    parser.add_argument("--report", nargs="+", type=Path, metavar="DIR", help="print the report of finished soaks")
    parser.add_argument("--warmup-minutes", type=float, default=WARMUP_MINUTES,
                        help="left out of every slope (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.report:
        print_report(args.report, args.warmup_minutes)
        return 0
    if not args.form or not args.out:
        parser.error("--form and --out are required (or --report DIR...)")
    env_assignments(args.env)  # refuse a malformed --env before hours of setup
    args.out.mkdir(parents=True, exist_ok=True)
    stop = {"now": False}

    def _stop(signum: int, _frame: object) -> None:
        stop["now"] = True  # end the sampling loop; the stack is then stopped and the report written

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    started = time.time()
    meta = (run_compose if args.form == "compose" else run_local)(args, args.out, stop)
    meta.update({"started": started, "ended": time.time(), "hours_asked": args.hours, "machine": os.uname().nodename,
                 "cpus": os.cpu_count()})
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2))
    print_report([args.out], args.warmup_minutes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
