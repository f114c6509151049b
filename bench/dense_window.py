"""Benchmark 2: a dense real-time window through the real `dagster-daemon`, with either run launcher. Run by hand:

    .venv/bin/python bench/dense_window.py [--launcher local|docker] [--races 40] [--every 0.5] [--lead 1.5]
                                           [--final-after 400] [--launch-ahead SECONDS] [--out figures.json]

`--launcher local` (default): embedded Postgres (Dagster storage + race DB), `racing sim` in dense mode (two races a
minute for 20 minutes), the morning scrape through `racing scrape`, then `dagster code-server start` +
`dagster-daemon run` with the project's dagster.yaml (each run a local process) until every race's post-race chain
has ended.

`--launcher docker`: the compose deployment for real (docker-compose.yml + the live production test's override with
the simulated feed as `tab-sim`, through tests/production/compose_stack.py; a Docker engine is started if none runs):
every service but the daemon and the feed comes up and turns healthy, then the feed (so its dense card starts then),
the scrape runs inside the `code-racing` container, and the daemon comes up last; each run is a container of its own
(DockerRunLauncher, deploy/dagster.yaml). Postgres and the feed are reached on their container addresses. Images are
built (layer cache) unless `--skip-build`; everything is torn down at the end (`docker compose down -v`).

In both, the window starts inside the races' T-60 (and, for the first races, T-15) windows: checkpoints due before
the daemon can request them (now + the launch-ahead margin + 30 s) are written to the ledger as skipped before the
daemon starts, so the measured load is the steady state (T-15 of the later races, every post-race attempt), not a
start-up burst.

Reports: lateness of each checkpoint's /events request after its target (the run's `racing/scheduled_for`: the
T-15 / T+5 time, or the ledger's next_attempt_at for chain attempts; negative would be early), API requests against
the minimum (one /events per checkpoint attempt + the scrape's /meetings pages + one /meetings per today's
combination for each `card_refresh` run the daemon's schedule launched in the window), exactly-once (one run per race,
checkpoint and attempt; one /events request per run), and resources: local, peak RSS summed over the daemon's and code
server's process trees (run workers included; sampled every second from /proc) and their mean CPU, Postgres
separately; docker, peak memory (cgroup usage less inactive file pages, as `docker stats` shows it) summed over every
container of the deployment, run containers included, per service and without Postgres, and their mean CPU (cgroup
cpuacct), the feed's container apart.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import sqlalchemy as sa  # noqa: E402

from local_stack.embedded_postgres import ensure_database, start_embedded_postgres  # noqa: E402
from racing_orchestration.race_db import upgrade  # noqa: E402
from racing_orchestration.ingestion.combinations import DEFAULT_CATEGORIES, DEFAULT_COUNTRIES  # noqa: E402

BIN = Path(sys.executable).parent
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _proc_table() -> dict[int, tuple[int, int, float, int]]:
    """pid -> (ppid, starttime, cpu seconds, rss bytes) for every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICK,
                             int(fields[21]) * PAGE)
    return table


def _tree(table: dict, children: dict[int, list[int]], roots: list[int]) -> set[int]:
    tree, todo = set(), [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    return tree


class Sampler(threading.Thread):
    """Sums RSS over the process trees of `roots` every second; CPU from each process's last seen utime+stime.
    `extra` process trees (Postgres) are summed apart; their CPU counts from the first sample on."""

    def __init__(self, roots: list[int], extra: dict[str, int | None] | None = None) -> None:
        super().__init__(daemon=True)
        self.roots, self.stop = roots, threading.Event()
        self.extra = {name: pid for name, pid in (extra or {}).items() if pid is not None}
        self.peak_rss = 0
        self.peak_procs = 0
        self.cpu: dict[tuple[int, int], float] = {}
        self.samples: list[tuple[float, int, int]] = []
        self.extra_peak: dict[str, int] = {}
        self.extra_cpu: dict[str, dict[tuple[int, int], list[float]]] = {name: {} for name in self.extra}

    def run(self) -> None:
        while not self.stop.wait(1.0):
            table = _proc_table()
            children: dict[int, list[int]] = {}
            for pid, (ppid, *_rest) in table.items():
                children.setdefault(ppid, []).append(pid)
            tree = _tree(table, children, self.roots)
            rss = sum(table[p][3] for p in tree)
            for pid in tree:
                self.cpu[(pid, table[pid][1])] = table[pid][2]
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_procs = max(self.peak_procs, len(tree))
            self.samples.append((time.monotonic(), rss, len(tree)))
            for name, root in self.extra.items():
                extra_tree = _tree(table, children, [root])
                self.extra_peak[name] = max(self.extra_peak.get(name, 0), sum(table[p][3] for p in extra_tree))
                for pid in extra_tree:
                    seen = self.extra_cpu[name].setdefault((pid, table[pid][1]), [table[pid][2], table[pid][2]])
                    seen[1] = table[pid][2]

    def extra_cpu_seconds(self, name: str) -> float:
        return sum(last - first for first, last in self.extra_cpu.get(name, {}).values())


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


SKIP_PAST_SQL = (
    "INSERT INTO race_checkpoints (race_id, checkpoint, scheduled_for, state, note) "
    "SELECT race_id, '{cp}', start_time + interval '{m} minutes', 'skipped', "
    "'bench: the window opened after this checkpoint' FROM races "
    "WHERE start_time + interval '{m} minutes' < '{cutoff}'::timestamptz ON CONFLICT DO NOTHING")


def skip_past_checkpoints(execute, now: dt.datetime, ahead_seconds: float) -> None:
    """Checkpoints the daemon could not request in time when the window opens: recorded as skipped, visibly."""
    cutoff = (now + dt.timedelta(seconds=30 + ahead_seconds)).isoformat()
    for checkpoint, minutes in (("t60", -60), ("t15", -15)):
        execute(SKIP_PAST_SQL.format(cp=checkpoint, m=minutes, cutoff=cutoff))


def sim_args(args) -> list[str]:
    return ["--dense-every", str(args.every), "--dense-races", str(args.races), "--dense-lead", str(args.lead),
            "--final-after", str(args.final_after), "--fault-5xx", str(args.fault_5xx),
            "--fault-timeout", str(args.fault_timeout), "--fault-malformed", str(args.fault_malformed),
            "--fault-429", str(args.fault_429)]


def wait_for_chains(race_engine: sa.Engine, races: list, timeout_minutes: float, progress) -> tuple[float, bool]:
    """Poll the ledger until every race's post-race chain has ended; (wall seconds, finished)."""
    started = time.monotonic()
    last_start = max(r.start_time for r in races)
    deadline = started + timeout_minutes * 60
    while time.monotonic() < deadline:
        time.sleep(10)
        with race_engine.connect() as conn:
            open_rows = conn.execute(sa.text(
                "SELECT count(*) FROM race_checkpoints WHERE state NOT IN "
                "('done','provisional','abandoned','skipped','failed')")).scalar()
            posts = conn.execute(sa.text("SELECT count(*) FROM race_checkpoints WHERE checkpoint='post'")).scalar()
        elapsed = time.monotonic() - started
        print(f"{elapsed / 60:5.1f} min: {posts}/{len(races)} post claimed, {open_rows} open; {progress()}", flush=True)
        if posts == len(races) and open_rows == 0 and dt.datetime.now(dt.UTC) > last_start + dt.timedelta(minutes=6):
            return time.monotonic() - started, True
    return time.monotonic() - started, False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", choices=("local", "docker"), default="local")
    parser.add_argument("--races", type=int, default=40)
    parser.add_argument("--every", type=float, default=0.5, help="minutes between races")
    parser.add_argument("--lead", type=float, default=1.5, help="minutes from the feed's start to the first race")
    parser.add_argument("--final-after", type=float, default=400.0, help="sim: a race turns Final this long after the jump")
    parser.add_argument("--launch-ahead", type=float, default=None,
                        help="RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS (default: the launcher's: 45 s local, 60 s compose)")
    parser.add_argument("--timeout-minutes", type=float, default=45.0)
    for kind in ("5xx", "timeout", "malformed", "429"):  # the feed's fault injection (`racing sim --fault-…`)
        parser.add_argument(f"--fault-{kind}", type=float, default=0.0, metavar="RATE")
    parser.add_argument("--image-tag", default="bench", help="docker: IMAGE_TAG of the images built and run")
    parser.add_argument("--skip-build", action="store_true", help="docker: use the images already built under the tag")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    # Stopped with SIGTERM (or SIGINT, which a background shell job ignores): unwind, so `finally` tears down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="dense_window_"))
    print(f"work dir {work}", flush=True)
    figures = run_docker(args, work) if args.launcher == "docker" else run_local(args, work)
    if figures is None:
        return 1
    figures["machine"] = {"nproc": os.cpu_count(), "loadavg_end": os.getloadavg(),
                          "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")}
    figures["args"] = vars(args) | {"out": str(args.out) if args.out else None}
    print(json.dumps(figures, indent=2, default=str))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2, default=str))
    return 0


def run_local(args, work: Path) -> dict | None:
    from racing_orchestration.settings import DEFAULT_LAUNCH_AHEAD_SECONDS

    server = start_embedded_postgres(work / "pg")
    dagster_url = ensure_database(server.get_uri(), "dagster")
    racing_url = ensure_database(server.get_uri(), "racing")
    upgrade(racing_url)
    home = work / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    sim_port, grpc_port = _free_port(), _free_port()
    sim_base = f"http://127.0.0.1:{sim_port}"
    ahead = DEFAULT_LAUNCH_AHEAD_SECONDS if args.launch_ahead is None else args.launch_ahead
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_url, "RACING_DATABASE_URL": racing_url,
           "TAB_API_BASE_URL": f"{sim_base}/affiliates/v1/racing", "PYTHONUNBUFFERED": "1",
           "RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS": str(ahead)}
    logs = {name: (work / f"{name}.log").open("w") for name in ("sim", "scrape", "code_server", "daemon")}
    procs: list[subprocess.Popen] = []

    def spawn(name: str, cmd: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=logs[name], stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        spawn("sim", [str(BIN / "racing"), "sim", "--port", str(sim_port), *sim_args(args)])
        for _ in range(100):
            try:
                _get_json(f"{sim_base}/_sim/stats")
                break
            except OSError:
                time.sleep(0.2)
        scrape = subprocess.run([str(BIN / "racing"), "scrape", "--in-process"], cwd=REPO, env=env, capture_output=True, text=True)
        logs["scrape"].write(scrape.stdout + scrape.stderr)
        engine = sa.create_engine(racing_url)
        now = dt.datetime.now(dt.UTC)
        with engine.begin() as conn:
            races = conn.execute(sa.text("SELECT race_id, start_time FROM races WHERE start_time > :now"), {"now": now}).all()
            skip_past_checkpoints(lambda sql: conn.execute(sa.text(sql)), now, ahead)
        scrape_calls = _get_json(f"{sim_base}/_sim/stats")["requests"]
        print(f"scrape exit {scrape.returncode}: {len(races)} races stored; sim calls so far {scrape_calls}", flush=True)
        if not races:
            print(scrape.stdout[-2000:], scrape.stderr[-2000:])
            return None
        workspace = work / "workspace.yaml"
        workspace.write_text(f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {grpc_port}\n"
                             "      location_name: racing_orchestration\n")
        code_server = spawn("code_server", [str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p",
                                            str(grpc_port), "-m", "racing_orchestration.definitions"])
        time.sleep(8)
        daemon = spawn("daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)])
        sampler = Sampler([code_server.pid, daemon.pid], extra={"postgres": _postmaster_pid(work / "pg")})
        sampler.start()
        wall, finished = wait_for_chains(
            engine, races, args.timeout_minutes,
            lambda: f"RSS now {sampler.samples[-1][1] / 2**20 if sampler.samples else 0:.0f} MiB "
                    f"peak {sampler.peak_rss / 2**20:.0f} MiB")
        sampler.stop.set()
        sampler.join()
        stats = _get_json(f"{sim_base}/_sim/stats")
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    cpu_seconds = sum(sampler.cpu.values())
    resources = {
        "peak_rss_mib": round(sampler.peak_rss / 2**20), "peak_processes": sampler.peak_procs,
        "median_rss_mib": round(statistics.median(s[1] for s in sampler.samples) / 2**20) if sampler.samples else None,
        "mean_cpu_cores": round(cpu_seconds / wall, 3) if wall else None,
        "postgres_peak_rss_mib": round(sampler.extra_peak.get("postgres", 0) / 2**20),
        "postgres_mean_cpu_cores": round(sampler.extra_cpu_seconds("postgres") / wall, 3) if wall else None,
        "launch_ahead_seconds": ahead,
    }
    return report(engine, sa.create_engine(dagster_url), stats, scrape_calls, resources, wall, finished)


def _postmaster_pid(pg_dir: Path) -> int | None:
    for candidate in pg_dir.rglob("postmaster.pid"):
        try:
            return int(candidate.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return None


# --- docker: the compose deployment ---------------------------------------------------------------------------------

CGROUP_MEMORY = Path("/sys/fs/cgroup/memory/docker")  # cgroup v1, cgroupfs driver (Debian's docker.io here)
CGROUP_CPU = Path("/sys/fs/cgroup/cpuacct/docker")
CGROUP2 = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def container_usage(container_id: str) -> tuple[int, float] | None:
    """(memory bytes as `docker stats` counts it: usage less inactive file pages, CPU seconds) of a running container,
    from its cgroup (v1 cgroupfs, or v2 under docker/ or system.slice/docker-<id>.scope); None once it is gone."""
    v1 = CGROUP_MEMORY / container_id
    if v1.is_dir():
        usage = _read_int(v1 / "memory.usage_in_bytes")
        cpu_ns = _read_int(CGROUP_CPU / container_id / "cpuacct.usage")
        if usage is None or cpu_ns is None:
            return None
        inactive = 0
        try:
            for line in (v1 / "memory.stat").read_text().splitlines():
                if line.startswith("total_inactive_file "):
                    inactive = int(line.split()[1])
        except OSError:
            return None
        return max(0, usage - inactive), cpu_ns / 1e9
    for v2 in (CGROUP2 / "docker" / container_id, CGROUP2 / "system.slice" / f"docker-{container_id}.scope"):
        if v2.is_dir():
            usage = _read_int(v2 / "memory.current")
            try:
                stat = dict(line.split() for line in (v2 / "memory.stat").read_text().splitlines())
                cpu = dict(line.split() for line in (v2 / "cpu.stat").read_text().splitlines())
            except (OSError, ValueError):
                return None
            if usage is None:
                return None
            return max(0, usage - int(stat.get("inactive_file", 0))), int(cpu["usage_usec"]) / 1e6
    return None


def cgroup_container_ids() -> list[str]:
    """Every running container of the engine, from the cgroup tree (no docker CLI call per sample)."""
    for parent in (CGROUP_MEMORY, CGROUP2 / "docker"):
        if parent.is_dir():
            return [p.name for p in parent.iterdir() if p.is_dir() and len(p.name) == 64]
    slice_dir = CGROUP2 / "system.slice"
    if slice_dir.is_dir():
        return [p.name[len("docker-"):-len(".scope")] for p in slice_dir.glob("docker-*.scope")]
    return []


class ContainerSampler(threading.Thread):
    """Every second: memory of every container of the engine, summed (the deployment, without the simulated feed) and
    per service; CPU seconds from each container's last reading less its reading when first seen before the start
    (run containers, new during the window, count from their creation). Containers not among `services` at the start
    are run containers (the engine runs nothing else)."""

    def __init__(self, services: dict[str, str], outside: set[str] = frozenset({"tab-sim"}),
                 without: set[str] = frozenset({"postgres"})) -> None:
        super().__init__(daemon=True)
        self.services, self.outside, self.without, self.stop = services, outside, without, threading.Event()
        self.baseline: dict[str, float] = {}
        self.last_cpu: dict[str, float] = {}
        self.samples: list[tuple[float, int, int, int]] = []  # (t, deployment bytes, without postgres, run containers)
        self.peak_by_service: dict[str, int] = {}
        self.run_containers: set[str] = set()
        for cid in cgroup_container_ids():
            usage = container_usage(cid)
            if usage is not None:
                self.baseline[cid] = usage[1]

    def service(self, cid: str) -> str:
        return self.services.get(cid, "run")

    def run(self) -> None:
        while not self.stop.wait(1.0):
            total = without = runs = 0
            by_service: dict[str, int] = {}
            for cid in cgroup_container_ids():
                usage = container_usage(cid)
                if usage is None:
                    continue
                memory, cpu = usage
                self.last_cpu[cid] = cpu
                name = self.service(cid)
                by_service[name] = by_service.get(name, 0) + memory
                if name == "run":
                    runs += 1
                    self.run_containers.add(cid)
                if name in self.outside:
                    continue
                total += memory
                if name not in self.without:
                    without += memory
            for name, memory in by_service.items():
                self.peak_by_service[name] = max(self.peak_by_service.get(name, 0), memory)
            self.samples.append((time.monotonic(), total, without, runs))

    def cpu_seconds(self, include) -> float:
        return sum(cpu - self.baseline.get(cid, 0.0) for cid, cpu in self.last_cpu.items() if include(self.service(cid)))

    def summary(self, wall: float) -> dict:
        def peak(index: int) -> int:
            return max((s[index] for s in self.samples), default=0)

        mib = 2**20
        return {
            "peak_memory_mib": round(peak(1) / mib),
            "median_memory_mib": round(statistics.median(s[1] for s in self.samples) / mib) if self.samples else None,
            "peak_memory_without_postgres_mib": round(peak(2) / mib),
            "peak_memory_by_service_mib": {k: round(v / mib) for k, v in sorted(self.peak_by_service.items())},
            "peak_run_containers": peak(3), "run_containers_seen": len(self.run_containers),
            "mean_cpu_cores": round(self.cpu_seconds(lambda s: s not in self.outside) / wall, 3) if wall else None,
            "mean_cpu_cores_without_postgres": round(
                self.cpu_seconds(lambda s: s not in self.outside and s not in self.without) / wall, 3) if wall else None,
            "feed_mean_cpu_cores": round(self.cpu_seconds(lambda s: s in self.outside) / wall, 3) if wall else None,
        }


def run_docker(args, work: Path) -> dict | None:
    from tests.production.compose_stack import LONG_RUNNING, SERVICES, ComposeStack
    from tests.production.docker_engine import ensure_engine

    engine = ensure_engine(work / "engine")
    stack = ComposeStack(work_dir=work / "compose", image_tag=args.image_tag, sim_args=sim_args(args))
    sampler: ContainerSampler | None = None
    try:
        stack.write_env()
        if args.launch_ahead is not None:
            with stack.env_file.open("a") as env_file:
                env_file.write(f"RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS={args.launch_ahead:g}\n")
        stack.down()  # a deployment an interrupted run left behind
        if not args.skip_build:
            stack.build_images()
        first = [s for s in SERVICES if s not in ("daemon", "tab-sim")]
        bring_up(stack, first, [s for s in LONG_RUNNING if s not in ("daemon", "tab-sim")])
        bring_up(stack, ["tab-sim"], ["tab-sim"])  # the dense card is timed from the feed's start
        env = dict(line.split("=", 1) for line in stack.env_file.read_text().splitlines() if "=" in line)
        pg_ip, sim_ip = _container_ip(stack, "postgres"), _container_ip(stack, "tab-sim")
        racing = sa.create_engine(f"postgresql+psycopg2://racing:{env['RACING_DB_PASSWORD']}@{pg_ip}:5432/racing")
        dagster = sa.create_engine(f"postgresql+psycopg2://dagster:{env['DAGSTER_DB_PASSWORD']}@{pg_ip}:5432/dagster")
        sim_base = f"http://{sim_ip}:8765"
        scrape = stack.compose("exec", "-T", "code-racing", "racing", "scrape", "--in-process", timeout=900, check=False)
        (work / "scrape.log").write_text(scrape.stdout + scrape.stderr)
        ahead = float(stack.compose("exec", "-T", "code-racing", "python", "-c",
                                    "from racing_orchestration.settings import launch_ahead; "
                                    "print(launch_ahead().total_seconds())").stdout.strip())
        now = dt.datetime.now(dt.UTC)
        with racing.begin() as conn:
            races = conn.execute(sa.text("SELECT race_id, start_time FROM races WHERE start_time > :now"), {"now": now}).all()
            skip_past_checkpoints(lambda sql: conn.execute(sa.text(sql)), now, ahead)
        scrape_calls = _get_json(f"{sim_base}/_sim/stats")["requests"]
        print(f"scrape exit {scrape.returncode}: {len(races)} races stored; sim calls so far {scrape_calls}; "
              f"launch ahead {ahead:g} s", flush=True)
        if not races:
            print(scrape.stdout[-2000:], scrape.stderr[-2000:])
            return None
        bring_up(stack, ["daemon"], ["daemon"], healthy=False)  # its first health probe comes 30 s later
        services = {_full_id(stack, record["ID"]): service for service, record in stack.states().items()
                    if record.get("State") == "running"}
        sampler = ContainerSampler(services)
        sampler.start()

        def progress() -> str:
            latest = sampler.samples[-1] if sampler.samples else (0, 0, 0, 0)
            return (f"memory now {latest[1] / 2**20:.0f} MiB ({latest[3]} run containers), "
                    f"peak {max((s[1] for s in sampler.samples), default=0) / 2**20:.0f} MiB")

        wall, finished = wait_for_chains(racing, races, args.timeout_minutes, progress)
        sampler.stop.set()
        sampler.join()
        stats = _get_json(f"{sim_base}/_sim/stats")
        resources = sampler.summary(wall) | {"launch_ahead_seconds": ahead, "timings_s": dict(stack.timings)}
        figures = report(racing, dagster, stats, scrape_calls, resources, wall, finished)
        (work / "daemon.log").write_text(stack.logs("daemon", tail=400))
        return figures
    finally:
        if sampler is not None:
            sampler.stop.set()
        stack.down()
        engine.stop()


def bring_up(stack, services: list[str], long_running: list[str], timeout: float = 600,
             healthy: bool = True) -> None:
    """`up`, then `docker start` what compose left `created`, until all are healthy (or, `healthy=False`, running).

    Seen here (Compose 2.40.3 on Engine 20.10, loaded 2-core host): `up -d` of a subset returned 0 with the webserver,
    and on a later `up -d daemon` the daemon, created but never started (the webserver after its code servers took
    minutes to turn healthy; the daemon after compose re-ran the exited `migrate` it depends on through them)."""
    stack.up(services)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = stack.states()
        wanted = "healthy" if healthy else "running"
        if all(states.get(s, {}).get("Health" if healthy else "State") == wanted for s in long_running):
            return
        for service in long_running:
            if states.get(service, {}).get("State") == "created":
                print(f"{service} was left created by compose: starting it", flush=True)
                stack._run(["docker", "start", states[service]["ID"]], check=False)
        time.sleep(3)
    stack.wait_healthy(long_running, timeout=1)  # raises with the states and logs


def _container_ip(stack, service: str) -> str:
    container = stack.compose("ps", "-q", service).stdout.strip()
    return stack._run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                       container]).stdout.strip()


def _full_id(stack, short_id: str) -> str:
    return stack._run(["docker", "inspect", "-f", "{{.Id}}", short_id]).stdout.strip()


def completeness(race_engine: sa.Engine) -> dict:
    """The racing_day checks' figures (race_db.completeness) for every meeting date of the window, at the end."""
    from racing_orchestration.race_db.completeness import day_completeness, race_facts_for_day

    out = {}
    now = dt.datetime.now(dt.UTC)
    with race_engine.connect() as conn:
        days = [d for (d,) in conn.execute(sa.text("SELECT DISTINCT meeting_date FROM meetings ORDER BY 1"))]
        for day in days:
            facts = day_completeness(race_facts_for_day(conn, day), now)
            out[str(day)] = {"races": facts.races, "started": facts.started, "finished": facts.finished} | {
                name: {"expected": f.expected, "captured_or_explained": f.complete, "ratio": round(f.ratio, 4),
                       "counts": {str(c): n for c, n in f.counts.items()},
                       "gaps": [f"{g.race_id}: {g.item_class}" for g in f.gaps][:10]}
                for name, f in facts.figures.items()}
    return out


def report(race_engine: sa.Engine, dagster_engine: sa.Engine, stats: dict, scrape_calls: dict, resources: dict,
           wall: float, finished: bool) -> dict:
    with dagster_engine.connect() as conn:
        tag_rows = conn.execute(sa.text(
            "SELECT run_id, key, value FROM run_tags WHERE key IN ('racing/scheduled_for', 'racing/checkpoint', "
            "'racing/attempt', 'racing/late', 'racing/outcome', 'racing/awaiting_final', 'racing/race_id', "
            "'racing/rescheduled', 'dagster/sensor_name')")).all()
        statuses = dict(conn.execute(sa.text("SELECT status, count(*) FROM runs GROUP BY 1")).all())
        refresh_runs = conn.execute(sa.text("SELECT count(*) FROM runs WHERE pipeline_name = 'card_refresh'")).scalar()
    tags: dict[str, dict[str, str]] = {}
    for run_id, key, value in tag_rows:
        tags.setdefault(run_id, {})[key] = value
    with race_engine.connect() as conn:
        calls = conn.execute(sa.text("SELECT run_id, started_at, outcome FROM scrapes WHERE endpoint LIKE '/events/%' "
                                     "ORDER BY started_at")).all()
        ledger = dict(conn.execute(sa.text("SELECT checkpoint || ':' || state, count(*) FROM race_checkpoints GROUP BY 1")).all())
        attempts = dict(conn.execute(sa.text("SELECT attempt, count(*) FROM race_checkpoints WHERE checkpoint='post' "
                                             "GROUP BY 1")).all())
    lateness: dict[str, list[float]] = {}
    first_call: dict[str, float] = {}
    calls_per_run: dict[str, int] = {}
    for run_id, started_at, _outcome in calls:
        calls_per_run[run_id] = calls_per_run.get(run_id, 0) + 1
        run = tags.get(run_id, {})
        if run_id in first_call or "racing/scheduled_for" not in run:
            continue
        late = (started_at - dt.datetime.fromisoformat(run["racing/scheduled_for"])).total_seconds()
        first_call[run_id] = late
        kind = run.get("racing/checkpoint", "?")
        if kind == "post":
            kind = "post attempt 0" if run.get("racing/attempt", "0") == "0" else "post attempts 1-3"
        lateness.setdefault(kind, []).append(late)
    every = [v for values in lateness.values() for v in values]
    sensor_runs = {run_id: run for run_id, run in tags.items() if "racing/checkpoint" in run and "dagster/sensor_name" in run}
    checkpoint_runs = len(sensor_runs)
    # Exactly once: one sensor run per (race, checkpoint, attempt) that called TAB, and one /events call per run.
    fetched: dict[tuple, int] = {}
    for run_id, run in sensor_runs.items():
        if calls_per_run.get(run_id):
            key = (run.get("racing/race_id"), run["racing/checkpoint"], run.get("racing/attempt", "0"))
            fetched[key] = fetched.get(key, 0) + 1
    # Each card refresh asks for today's (category, country) combinations once: one /meetings page each.
    refresh_calls_minimum = refresh_runs * len(DEFAULT_CATEGORIES) * len(DEFAULT_COUNTRIES)
    events_calls = stats["requests"].get("/events/{id}", 0)

    def figures(values: list[float]) -> dict:
        if not values:
            return {"n": 0}
        return {"n": len(values), "p50": round(statistics.median(values), 2), "p99": round(_pct(values, 0.99), 2),
                "max": round(max(values), 2), "min": round(min(values), 2), "early": sum(v < 0 for v in values)}

    summary = {
        "finished": finished, "wall_minutes": round(wall / 60, 1),
        "lateness_s": {kind: figures(v) for kind, v in sorted(lateness.items())},
        "lateness_all_s": figures(every),
        "api": {"sim_requests": stats["requests"], "total": stats["total"], "scrape_calls": scrape_calls,
                "checkpoint_runs": checkpoint_runs, "events_calls": events_calls, "card_refresh_runs": refresh_runs,
                "card_refresh_calls_minimum": refresh_calls_minimum,
                "minimum": len(fetched) + sum(scrape_calls.values()) + refresh_calls_minimum, "faults": stats["faults"],
                # No polling, no extra fetch: one /events request per checkpoint attempt. (Under docker the feed's
                # healthcheck also calls /meetings every 5 s, so only /events is compared there.)
                "events_calls_above_minimum": events_calls - len(fetched),
                "rescheduled_runs": sum(1 for run in sensor_runs.values() if "racing/rescheduled" in run)},
        "exactly_once": {"checkpoint_attempts_fetched": len(fetched),
                         "attempts_fetched_by_more_than_one_run": sum(1 for n in fetched.values() if n > 1),
                         "runs_with_more_than_one_events_call": sum(1 for n in calls_per_run.values() if n > 1)},
        "late_tagged_runs": sum(1 for run in sensor_runs.values() if run.get("racing/late") == "true"),
        "ledger": ledger, "post_attempt_reached": attempts, "run_statuses": statuses,
        "completeness": completeness(race_engine),
        "resources": resources,
    }
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
