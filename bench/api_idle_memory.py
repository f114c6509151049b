"""Idle memory of the control API's workers: `python -m control_api --workers N` of a given commit and of this
checkout, side by side.

Each round starts the API from a `git worktree` of the `--before` commit (in /tmp) and from this checkout, one after
the other, on the same embedded Postgres; waits for /health, asks /health and /executions once each, then waits until
the workers' memory settles and sums the PSS (/proc/PID/smaps_rollup: pages shared with the supervisor counted once
between them) and the RSS of the worker processes (uvicorn's spawned children; the supervisor is left out: it serves
nothing; `--workers 1` serves from the process itself). Prints each round, the medians per worker, and after/before.

    .venv/bin/python bench/api_idle_memory.py [--rounds 3] [--workers 2] [--before <commit>]

The webserver address points at a closed port in both: the API then holds no catalog (a few kB of dataclasses when it
has one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from local_stack.embedded_postgres import ensure_database, psycopg2_url, temporary_embedded_postgres  # noqa: E402
from local_stack.stack import free_port  # noqa: E402

KEY = "bench-key-0123456789abcdef"
SETTLE_SECONDS = 3.0
START_TIMEOUT = 240.0


def commit_before_the_change() -> str:
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "platform_monitoring/__init__.py"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    if not added:
        raise SystemExit("platform_monitoring is not committed yet: pass --before <commit>")
    return added[-1] + "^"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def workers_of(pid: int, workers: int = 2) -> list[int]:
    """The worker processes of the API whose supervisor is `pid`; one worker is the process itself (no supervisor)."""
    if workers == 1:
        return [pid]
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def measure(tree: Path, env: dict[str, str], workers: int) -> tuple[float, float]:
    """MiB: the summed PSS and RSS of the API's worker processes, idle after start-up and one /health and
    /executions."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "control_api", "--workers", str(workers), "--port", str(port),
                                "--log-level", "warning"], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                httpx.get(f"{url}/health", timeout=10)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the API in {tree} did not start")
                time.sleep(0.5)
        while len(workers_of(process.pid, workers)) < workers:
            time.sleep(0.2)
        httpx.get(f"{url}/health", timeout=30)
        answer = httpx.get(f"{url}/executions", headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
        if answer.status_code != 200:
            raise SystemExit(f"the API in {tree} answered /executions with {answer.status_code}: {answer.text[:300]}")
        # Idle: the start-up work is done once the workers' memory stops moving.
        previous, total = -1, 0
        while time.monotonic() < deadline:
            time.sleep(SETTLE_SECONDS)
            total = sum(pss_kib(pid) for pid in workers_of(process.pid, workers))
            if previous > 0 and abs(total - previous) < 0.005 * previous:
                break
            previous = total
        return total / 1024, sum(rss_kib(pid) for pid in workers_of(process.pid, workers)) / 1024
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--before", help="the commit to measure as 'before' (default: the parent of the commit that "
                                         "added platform_monitoring)")
    args = parser.parse_args()
    before = subprocess.run(["git", "rev-parse", args.before or commit_before_the_change()], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip()
    scratch = Path(tempfile.mkdtemp(prefix="bench-api-memory-"))
    worktree = scratch / "before"
    subprocess.run(["git", "worktree", "add", "--detach", str(worktree), before], cwd=REPO, check=True,
                   capture_output=True)
    try:
        with temporary_embedded_postgres("bench-api-memory-pg-") as server:
            run_rounds(args, before, scratch, worktree, psycopg2_url(server.get_uri()))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO, capture_output=True)


def run_rounds(args: argparse.Namespace, before: str, scratch: Path, worktree: Path, server_url: str) -> None:
    home = scratch / "dagster_home"
    home.mkdir()
    dagster_url = ensure_database(server_url, "bench_dagster")
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_url}\ntelemetry:\n  enabled: false\n")
    create_dagster_tables(home)
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_url, "SCHEDULER_API_KEY": KEY,
           "MAINTENANCE_DATABASE_URL": ensure_database(server_url, "bench_registry"),
           "DAGSTER_WEBSERVER_URL": f"http://127.0.0.1:{free_port()}", "DAGSTER_UI_URL": "http://127.0.0.1:3000"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for round_ in range(1, args.rounds + 1):
        for name, tree in (("before", worktree), ("after", REPO)):
            results[name].append(measure(tree, env, args.workers))
        (bp, br), (ap, ar) = results["before"][-1], results["after"][-1]
        print(f"round {round_}: before PSS {bp:.0f} MiB (RSS {br:.0f}), after PSS {ap:.0f} MiB (RSS {ar:.0f}) "
              f"({args.workers} workers, summed)", flush=True)
    head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()
    medians = {}
    for name, commit in (("before", before[:10]), ("after", head)):
        pss = statistics.median(p for p, _ in results[name])
        rss = statistics.median(r for _, r in results[name])
        medians[name] = pss
        print(f"{name:6} {commit}: median PSS {pss:.0f} MiB for {args.workers} workers ({pss / args.workers:.0f} per "
              f"worker), RSS {rss:.0f} MiB ({rss / args.workers:.0f} per worker)")
    print(f"after/before (PSS): {medians['after'] / medians['before']:.2f}")


def create_dagster_tables(home: Path) -> None:
    """Dagster's storage tables, created by Dagster as a deployment's `migrate` does (the API only reads them)."""
    subprocess.run([sys.executable, "-c", "import dagster as dg; dg.DagsterInstance.from_config(%r).dispose()"
                    % str(home)], cwd=REPO, check=True, capture_output=True)


if __name__ == "__main__":
    main()
