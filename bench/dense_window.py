"""Benchmark 2: a dense real-time window through the real `dagster-daemon` and a gRPC code server. Run by hand:

    .venv/bin/python bench/dense_window.py [--races 40] [--every 0.5] [--lead 1.5] [--final-after 400]

Embedded Postgres (Dagster storage + race DB), `racing sim` in dense mode (two races a minute for 20 minutes), the
morning scrape through `racing scrape`, then `dagster code-server start` + `dagster-daemon run` with the project's
dagster.yaml until every race's post-race chain has ended. The window starts inside the races' T-60 (and, for the
first races, T-15) windows: those checkpoints are written to the ledger as skipped before the daemon starts, so the
measured load is the steady state (T-15 of the later races, every post-race attempt), not a start-up burst.

Reports: lateness of each checkpoint's /events request after its target time (the run's `racing/scheduled_for`: the
T-15 / T+5 time, or the ledger's next_attempt_at for chain attempts), API requests against the minimum (one /events per
checkpoint attempt + the scrape's /meetings pages + one /meetings per today's combination for each `card_refresh` run
the daemon's schedule launched in the window: every 30 min from 07:00 racing time until the last race has started),
peak RSS summed over the daemon's and code server's process trees
(run workers included; sampled every second from /proc) and their mean CPU.
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


class Sampler(threading.Thread):
    """Sums RSS over the process trees of `roots` every second; CPU from each process's last seen utime+stime."""

    def __init__(self, roots: list[int]) -> None:
        super().__init__(daemon=True)
        self.roots, self.stop = roots, threading.Event()
        self.peak_rss = 0
        self.peak_procs = 0
        self.cpu: dict[tuple[int, int], float] = {}
        self.samples: list[tuple[float, int, int]] = []

    def run(self) -> None:
        while not self.stop.wait(1.0):
            table = _proc_table()
            children: dict[int, list[int]] = {}
            for pid, (ppid, *_rest) in table.items():
                children.setdefault(ppid, []).append(pid)
            tree, todo = set(), [r for r in self.roots if r in table]
            while todo:
                pid = todo.pop()
                tree.add(pid)
                todo.extend(children.get(pid, []))
            rss = sum(table[p][3] for p in tree)
            for pid in tree:
                self.cpu[(pid, table[pid][1])] = table[pid][2]
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_procs = max(self.peak_procs, len(tree))
            self.samples.append((time.monotonic(), rss, len(tree)))


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--races", type=int, default=40)
    parser.add_argument("--every", type=float, default=0.5, help="minutes between races")
    parser.add_argument("--lead", type=float, default=1.5, help="minutes from now to the first race")
    parser.add_argument("--final-after", type=float, default=400.0, help="sim: a race turns Final this long after the jump")
    parser.add_argument("--timeout-minutes", type=float, default=45.0)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dense_window_"))
    server = start_embedded_postgres(work / "pg")
    dagster_url = ensure_database(server.get_uri(), "dagster")
    racing_url = ensure_database(server.get_uri(), "racing")
    upgrade(racing_url)
    home = work / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    sim_port, grpc_port = _free_port(), _free_port()
    sim_base = f"http://127.0.0.1:{sim_port}"
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_url, "RACING_DATABASE_URL": racing_url,
           "TAB_API_BASE_URL": f"{sim_base}/affiliates/v1/racing", "PYTHONUNBUFFERED": "1"}
    logs = {name: (work / f"{name}.log").open("w") for name in ("sim", "scrape", "code_server", "daemon")}
    procs: list[subprocess.Popen] = []

    def spawn(name: str, cmd: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=logs[name], stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    print(f"work dir {work}", flush=True)
    try:
        spawn("sim", [str(BIN / "racing"), "sim", "--port", str(sim_port), "--dense-every", str(args.every),
                      "--dense-races", str(args.races), "--dense-lead", str(args.lead),
                      "--final-after", str(args.final_after)])
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
            # Checkpoints already past when the window opens: recorded as skipped, visibly, before any sensor ticks.
            for checkpoint, minutes in (("t60", -60), ("t15", -15)):
                conn.execute(sa.text(
                    "INSERT INTO race_checkpoints (race_id, checkpoint, scheduled_for, state, note) "
                    "SELECT race_id, :cp, start_time + make_interval(mins => :m), 'skipped', "
                    "'bench: the window opened after this checkpoint' FROM races "
                    "WHERE start_time + make_interval(mins => :m) < :cutoff"),
                    {"cp": checkpoint, "m": minutes, "cutoff": now + dt.timedelta(seconds=30)})
        scrape_calls = _get_json(f"{sim_base}/_sim/stats")["requests"]
        print(f"scrape exit {scrape.returncode}: {len(races)} races stored; sim calls so far {scrape_calls}", flush=True)
        if not races:
            print(scrape.stdout[-2000:], scrape.stderr[-2000:])
            return 1
        workspace = work / "workspace.yaml"
        workspace.write_text(f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {grpc_port}\n"
                             "      location_name: racing_orchestration\n")
        code_server = spawn("code_server", [str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p",
                                            str(grpc_port), "-m", "racing_orchestration.definitions"])
        time.sleep(8)
        daemon = spawn("daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)])
        sampler = Sampler([code_server.pid, daemon.pid])
        started = time.monotonic()
        sampler.start()
        last_start = max(r.start_time for r in races)
        deadline = time.monotonic() + args.timeout_minutes * 60
        finished = False
        while time.monotonic() < deadline:
            time.sleep(10)
            with engine.connect() as conn:
                open_rows = conn.execute(sa.text(
                    "SELECT count(*) FROM race_checkpoints WHERE state NOT IN "
                    "('done','provisional','abandoned','skipped','failed')")).scalar()
                posts = conn.execute(sa.text("SELECT count(*) FROM race_checkpoints WHERE checkpoint='post'")).scalar()
            elapsed = time.monotonic() - started
            print(f"{elapsed / 60:5.1f} min: {posts}/{len(races)} post claimed, {open_rows} open; "
                  f"RSS now {sampler.samples[-1][1] / 2**20 if sampler.samples else 0:.0f} MiB "
                  f"peak {sampler.peak_rss / 2**20:.0f} MiB", flush=True)
            if posts == len(races) and open_rows == 0 and dt.datetime.now(dt.UTC) > last_start + dt.timedelta(minutes=6):
                finished = True
                break
        wall = time.monotonic() - started
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
    figures = report(engine, sa.create_engine(dagster_url), stats, scrape_calls, sampler, wall, finished)
    figures["machine"] = {"nproc": os.cpu_count(), "loadavg_end": os.getloadavg(),
                          "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")}
    figures["args"] = vars(args) | {"out": str(args.out) if args.out else None}
    print(json.dumps(figures, indent=2, default=str))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2, default=str))
    return 0


def report(race_engine: sa.Engine, dagster_engine: sa.Engine, stats: dict, scrape_calls: dict, sampler: Sampler,
           wall: float, finished: bool) -> dict:
    with dagster_engine.connect() as conn:
        tag_rows = conn.execute(sa.text(
            "SELECT run_id, key, value FROM run_tags WHERE key IN ('racing/scheduled_for', 'racing/checkpoint', "
            "'racing/attempt', 'racing/late', 'racing/outcome', 'racing/awaiting_final', 'dagster/sensor_name')")).all()
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
    for run_id, started_at, _outcome in calls:
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
    checkpoint_runs = sum(1 for run in tags.values() if "racing/checkpoint" in run and "dagster/sensor_name" in run)
    # Each card refresh asks for today's (category, country) combinations once: one /meetings page each.
    refresh_calls_minimum = refresh_runs * len(DEFAULT_CATEGORIES) * len(DEFAULT_COUNTRIES)
    events_calls = stats["requests"].get("/events/{id}", 0)
    cpu_seconds = sum(sampler.cpu.values())
    summary = {
        "finished": finished, "wall_minutes": round(wall / 60, 1),
        "lateness_s": {kind: {"n": len(v), "p50": round(statistics.median(v), 1), "p99": round(_pct(v, 0.99), 1),
                              "max": round(max(v), 1)} for kind, v in sorted(lateness.items())},
        "lateness_all_s": {"n": len(every), "p50": round(statistics.median(every), 1) if every else None,
                           "p99": round(_pct(every, 0.99), 1) if every else None, "max": round(max(every), 1) if every else None},
        "api": {"sim_requests": stats["requests"], "total": stats["total"], "scrape_calls": scrape_calls,
                "checkpoint_runs": checkpoint_runs, "events_calls": events_calls, "card_refresh_runs": refresh_runs,
                "card_refresh_calls_minimum": refresh_calls_minimum,
                "minimum": checkpoint_runs + sum(scrape_calls.values()) + refresh_calls_minimum,
                "faults": stats["faults"]},
        "ledger": ledger, "post_attempt_reached": attempts, "run_statuses": statuses,
        "peak_rss_mib": round(sampler.peak_rss / 2**20), "peak_processes": sampler.peak_procs,
        "median_rss_mib": round(statistics.median(s[1] for s in sampler.samples) / 2**20) if sampler.samples else None,
        "mean_cpu_cores": round(cpu_seconds / wall, 3) if wall else None,
    }
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
