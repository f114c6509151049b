"""Where the test suite's CPU goes: samples the host while `make test` (or `.ci/run`) runs beside it, by hand.

    .venv/bin/python bench/suite_cpu.py --out test-artifacts/suite-cpu.json -- .ci/run

runs the command, samples every `--every` seconds until it exits, and prints the CPU seconds spent per kind of
process: the Docker containers by compose service (run containers together), and on the host the pytest workers,
their Dagster processes (webservers, daemons, code servers, run workers), the embedded Postgres servers, the Docker
engine, Chromium and the rest. The 2-core machine gives 2 CPU-seconds per second: a suite whose CPU total exceeds
2 x its target wall time cannot meet that target however it is split (BENCHMARKS.md "Test suite").

Host processes are read from /proc (utime + stime of each process, last value seen; a process that lives less than
one sample interval is missed and shows in "unattributed"); containers from the cpuacct cgroup Docker gives each
(cgroup v1, cgroupfs driver, as dockerd runs here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
# dockerd's default `/docker`, or `<the suite's cgroup>/docker` when the suite runs in a child cpu cgroup
# (tests/production/docker_engine.py, weigh_containers).
DOCKER_CGROUPS = ("docker", "*/docker", "*/*/docker")
CONTAINERS = Path("/var/lib/docker/containers")

# First match wins: (kind, pattern over the command line).
HOST_KINDS = (
    ("dagster run worker", re.compile(r"dagster(\.__main__)? api execute_run|execute_run")),
    ("dagster code server", re.compile(r"dagster(\.__main__)? (api grpc|code-server)|dagster api grpc")),
    ("dagster daemon", re.compile(r"dagster[-_]daemon|dagster(\.__main__)? (dev|daemon)")),
    ("dagster webserver", re.compile(r"dagster[-_]webserver")),
    ("pytest worker", re.compile(r"pytest|execnet|xdist|exec\(eval\(sys\.stdin")),
    ("embedded postgres", re.compile(r"^postgres|/postgres |pgserver")),
    ("docker engine", re.compile(r"dockerd|containerd|docker-proxy|runc")),
    ("docker compose / cli", re.compile(r"docker-compose|^docker |/docker ")),
    ("chromium", re.compile(r"chrom")),
    ("git", re.compile(r"^git|/git ")),
    ("apt / build", re.compile(r"apt|dpkg|debootstrap|pip ")),
    ("other python", re.compile(r"python")),
)


def host_kind(cmdline: str) -> str:
    for kind, pattern in HOST_KINDS:
        if pattern.search(cmdline):
            return kind
    return "other"


def container_kind(name: str) -> str:
    """A compose service's containers by service (`racing-orchestration-daemon-1` -> daemon); run containers and
    builds together."""
    match = re.match(r"^/?[a-z0-9-]*?-(postgres|migrate|code-racing|code-maintenance|webserver|daemon|api|tab-sim|"
                     r"prometheus|alertmanager|webhook-receiver)-\d+$", name)
    if match:
        return f"container {match.group(1)}"
    return "container run/build/other"


def read(path: Path | str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def busy_seconds() -> tuple[float, float]:
    fields = [int(v) for v in read("/proc/stat").splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICKS, idle / TICKS


def container_name(container_id: str) -> str:
    try:
        return json.loads(read(CONTAINERS / container_id / "config.v2.json")).get("Name", container_id[:12])
    except ValueError:
        return container_id[:12]


class Sampler:
    def __init__(self) -> None:
        self.processes: dict[tuple[int, str], dict] = {}  # (pid, start time) -> kind, cpu seconds
        self.containers: dict[str, dict] = {}  # id -> name, cpu seconds
        self.timeline: list[dict] = []
        self.start_busy, self.start_idle = busy_seconds()
        self.started = time.monotonic()
        self.sample()  # what processes and containers already running had spent is not the command's
        for known in (*self.processes.values(), *self.containers.values()):
            known["base"] = known.get("cpu", 0.0)
        self.timeline.clear()

    def sample(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            stat = read(f"/proc/{entry.name}/stat")
            if not stat:
                continue
            rest = stat.rsplit(")", 1)[-1].split()
            key = (int(entry.name), rest[19])  # start time tells a reused pid apart
            seconds = (int(rest[11]) + int(rest[12])) / TICKS
            known = self.processes.get(key)
            if known is None:
                if "/docker/" in read(f"/proc/{entry.name}/cgroup"):
                    known = {"kind": None}  # counted through its container's cgroup
                else:
                    cmdline = read(f"/proc/{entry.name}/cmdline").replace("\0", " ").strip()
                    known = {"kind": host_kind(cmdline or stat.split("(", 1)[-1].split(")")[0])}
                self.processes[key] = known
            known["cpu"] = seconds
        for docker_cgroup in (found for pattern in DOCKER_CGROUPS for found in CPUACCT.glob(pattern)):
            for entry in os.scandir(docker_cgroup):
                if entry.is_dir() and len(entry.name) == 64:
                    usage = read(Path(entry.path) / "cpuacct.usage").strip()
                    if usage:
                        known = self.containers.setdefault(entry.name, {"name": container_name(entry.name)})
                        known["cpu"] = int(usage) / 1e9
        busy, idle = busy_seconds()
        self.timeline.append({"t": round(time.monotonic() - self.started, 1), "busy": round(busy - self.start_busy, 1),
                              "idle": round(idle - self.start_idle, 1), "load": os.getloadavg()[0]})

    def report(self) -> dict:
        busy, idle = busy_seconds()
        per_kind: dict[str, float] = defaultdict(float)
        for known in self.processes.values():
            if known["kind"]:
                per_kind[known["kind"]] += known.get("cpu", 0.0) - known.get("base", 0.0)
        for known in self.containers.values():
            per_kind[container_kind(known["name"])] += known.get("cpu", 0.0) - known.get("base", 0.0)
        total = busy - self.start_busy
        per_kind["unattributed (processes shorter than a sample)"] = max(0.0, total - sum(per_kind.values()))
        wall = time.monotonic() - self.started
        return {"wall_seconds": round(wall, 1), "busy_cpu_seconds": round(total, 1),
                "idle_cpu_seconds": round(idle - self.start_idle, 1), "cores": os.cpu_count(),
                "max_load": max((s["load"] for s in self.timeline), default=0.0),
                "per_kind": {k: round(v, 1) for k, v in sorted(per_kind.items(), key=lambda kv: -kv[1])},
                "timeline": self.timeline}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--out", type=Path, default=Path("test-artifacts/suite-cpu.json"))
    parser.add_argument("command", nargs="+", help="the command to run and sample (after --)")
    args = parser.parse_args(argv)
    sampler = Sampler()
    child = subprocess.Popen(args.command)
    while child.poll() is None:
        sampler.sample()
        time.sleep(args.every)
    sampler.sample()
    report = sampler.report()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nexit {child.returncode}; wall {report['wall_seconds']} s; CPU busy {report['busy_cpu_seconds']} s "
          f"of {report['wall_seconds'] * report['cores']:.0f} ({report['busy_cpu_seconds'] / report['wall_seconds']:.2f}"
          f" cores busy on average); load up to {report['max_load']:.1f}")
    print("| kind | CPU s | share |\n|---|---|---|")
    for kind, seconds in report["per_kind"].items():
        print(f"| {kind} | {seconds:.0f} | {seconds / max(report['busy_cpu_seconds'], 1):.0%} |")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
