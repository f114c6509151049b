"""What an idle local stack costs, with its storage pooled and without, by hand (BENCHMARKS.md "Daemon storage").

    .venv/bin/python bench/local_stack_idle.py [--rounds 2] [--settle 60] [--window 120]

Starts the real local stack (local_stack/stack.py: embedded Postgres, the simulated feed, `dagster dev`, the control
API) on free ports, once with DAGSTER_STORAGE_POOL_SIZE=0 (dagster-postgres' NullPool in every process: a new
connection per storage call) and once as the stack sets it (a pool of 2 in the daemon and the code servers; run workers
never pool: orchestration_core/pooled_storage.py), interleaved, `--rounds` times each. After `--settle` seconds it
measures over `--window` seconds: new Postgres sessions a second per database (pg_stat_database.sessions), the CPU of
the stack's Postgres (the postmaster with its reaped backends and the live ones) and the whole host's busy CPU
(/proc/stat). Nothing else should run beside it. Medians of the rounds, side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from local_stack.stack import LocalStack, StackOptions, free_port  # noqa: E402
from orchestration_core.pooled_storage import POOL_SIZE_VARIABLE  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def host_busy_seconds() -> float:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS


def _stat(pid: str) -> list[str]:
    return (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()


def postmaster_of(data_dir: Path) -> str:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.split(b"\0")[0].endswith(b"postgres") and str(data_dir).encode() in cmdline:
            return proc.name
    raise RuntimeError(f"no postmaster serving {data_dir}")


def postgres_cpu_seconds(postmaster: str) -> float:
    """The postmaster's own CPU and its reaped backends' (utime, stime, cutime, cstime), plus its live backends'."""
    ticks = sum(int(v) for v in _stat(postmaster)[11:15])
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                fields = _stat(proc.name)
            except OSError:
                continue
            if fields[1] == postmaster:
                ticks += int(fields[11]) + int(fields[12])
    return ticks / TICKS


def sessions(admin: sa.Engine) -> dict[str, int]:
    with admin.connect() as conn:
        rows = conn.execute(sa.text("SELECT datname, sessions FROM pg_stat_database WHERE datname IS NOT NULL"))
        return {name: int(count) for name, count in rows}


def measure(pool_size: str | None, settle: float, window: float) -> dict[str, float]:
    saved = os.environ.get(POOL_SIZE_VARIABLE)
    if pool_size is None:
        os.environ.pop(POOL_SIZE_VARIABLE, None)  # the stack's own setting
    else:
        os.environ[POOL_SIZE_VARIABLE] = pool_size
    data_dir = Path(tempfile.mkdtemp(prefix="stack-idle-"))
    stack = LocalStack(StackOptions(data_dir=data_dir, dagster_port=free_port(), sim_port=free_port(),
                                    api_port=free_port()))
    try:
        stack.start()
        admin = sa.create_engine(sa.engine.make_url(stack.env["DAGSTER_POSTGRES_URL"]).set(database="postgres"),
                                 poolclass=sa.pool.NullPool)
        postmaster = postmaster_of(data_dir)
        time.sleep(settle)
        before, pg_before, host_before, t0 = sessions(admin), postgres_cpu_seconds(postmaster), host_busy_seconds(), \
            time.monotonic()
        time.sleep(window)
        after, pg_after, host_after = sessions(admin), postgres_cpu_seconds(postmaster), host_busy_seconds()
        elapsed = time.monotonic() - t0
        admin.dispose()
        return {"sessions_per_s": (sum(after.values()) - sum(before.values())) / elapsed,
                "dagster_sessions_per_s": (after["dagster"] - before["dagster"]) / elapsed,
                "postgres_cores": (pg_after - pg_before) / elapsed,
                "host_cores": (host_after - host_before) / elapsed}
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        if saved is None:
            os.environ.pop(POOL_SIZE_VARIABLE, None)
        else:
            os.environ[POOL_SIZE_VARIABLE] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=120.0)
    args = parser.parse_args()
    modes = {"no pool (POOL_SIZE=0)": "0", "the stack's pool": None}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, size in modes.items():
            results[name].append(measure(size, args.settle, args.window))
            print(name, {k: round(v, 3) for k, v in results[name][-1].items()}, flush=True)
    print(f"\n{args.rounds} rounds, {args.window:.0f} s windows after {args.settle:.0f} s, medians:\n")
    print("| storage | new sessions/s (dagster db) | Postgres cores | host cores |")
    print("|---|---|---|---|")
    medians = {}
    for name, rounds in results.items():
        medians[name] = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        m = medians[name]
        print(f"| {name} | {m['sessions_per_s']:.1f} ({m['dagster_sessions_per_s']:.1f}) | "
              f"{m['postgres_cores']:.3f} | {m['host_cores']:.3f} |")
    old, new = medians["no pool (POOL_SIZE=0)"], medians["the stack's pool"]
    print(f"\nhost CPU {old['host_cores'] / new['host_cores']:.2f}x less, Postgres "
          f"{old['postgres_cores'] / new['postgres_cores']:.1f}x less with the pool")


if __name__ == "__main__":
    main()
