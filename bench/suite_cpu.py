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

`--acct` (root, `accton` from Debian's `acct`) also turns on the kernel's process accounting for the run: every
process that ends writes its CPU, pid, parent and name, however short it lived. The second table splits what ended by
command line (the one sampled for that pid and start time, or the parent's for a process no sample saw), which is
where the "unattributed" share goes: e.g. the run workers a local code server spawns, a location load each.

Every host process that is not a pytest worker is also charged to the test file that started it: pytest sets
PYTEST_CURRENT_TEST while a test runs, and a process started then (or by one started then) inherits it, so
`/proc/<pid>/environ` names the file even for a daemonized grandchild whose CPU the worker never reaps. A process that
ended unsampled is charged to its parent's file. The last table ranks the files by that CPU, the one cost the
per-test figures of `make test-measured` (the workers' own CPU and what they reaped) leave out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
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
    ("apt / build", re.compile(r"apt|dpkg|mmdebstrap|pip ")),
    ("other python", re.compile(r"python")),
)


# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float), utime,
# stime, mem, io, rw, minflt, majflt, swaps (comp_t each), comm[16]; 64 bytes, native order.
ACCT_V3 = struct.Struct("=BBH6If8H16s")
ACCT_HZ = 100  # AHZ: comp_t times count hundredths of a second


@dataclass(frozen=True)
class Ended:
    """One process accounting record: a process that ended."""

    comm: str
    pid: int
    ppid: int
    started: float  # unix time, whole seconds
    cpu_seconds: float


def comp_t(value: int) -> int:
    """The kernel's comp_t: a 13-bit mantissa times 8 to the power of the 3 bits above it."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def parse_acct(data: bytes) -> list[Ended]:
    """The acct_v3 records of a process accounting file; a trailing partial record is left out."""
    records = []
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        fields = ACCT_V3.unpack_from(data, offset)
        if fields[1] & 0x0F != 3:
            raise ValueError(f"not an acct_v3 record at byte {offset}: version {fields[1]}")
        pid, ppid, btime = fields[6], fields[7], fields[8]
        utime, stime = comp_t(fields[10]), comp_t(fields[11])
        comm = fields[18].split(b"\0", 1)[0].decode(errors="replace")
        records.append(Ended(comm, pid, ppid, float(btime), (utime + stime) / ACCT_HZ))
    return records


# Folders whose paths change from run to run or from machine to machine: the temporary ones and this checkout.
VARYING_ROOTS = (tempfile.gettempdir(), "/var/tmp", str(Path(__file__).resolve().parents[1]))


def command_key(cmdline: str, roots: tuple[str, ...] = VARYING_ROOTS) -> str:
    """A command line with what changes from run to run (paths under `roots`, ports, ids) starred out, so the same
    command started many times adds up."""
    for root in roots:
        cmdline = re.sub(re.escape(root.rstrip("/")) + r"/\S*", "*", cmdline)
    cmdline = re.sub(r"(?<![0-9a-f])([0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{12,64})(?![0-9a-f])|\b\d{3,}\b", "*", cmdline)
    return cmdline[:120]


def file_of_current_test(environ: bytes) -> str | None:
    """The test file of PYTEST_CURRENT_TEST (`tests/x.py::test_y[row] (call)`) in a /proc environ block, if set."""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            return entry.split(b"=", 1)[1].split(b"::", 1)[0].decode(errors="replace")
    return None


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


def read_bytes(path: Path | str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def read(path: Path | str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


BOOT_TIME = next((float(line.split()[1]) for line in read("/proc/stat").splitlines() if line.startswith("btime")),
                 0.0)


def busy_seconds() -> tuple[float, float]:
    fields = [int(v) for v in read("/proc/stat").splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICKS, idle / TICKS


def container_name(container_id: str) -> str:
    try:
        return json.loads(read(CONTAINERS / container_id / "config.v2.json")).get("Name", container_id[:12])
    except ValueError:
        return container_id[:12]


def sampled_as(by_pid: dict[int, list[dict]], record: Ended) -> dict | None:
    """The sampled process that `record` is: same pid, started within acct's whole seconds of it."""
    return next((known for known in by_pid.get(record.pid, []) if abs(known["started"] - record.started) <= 2), None)


def parent_of(by_pid: dict[int, list[dict]], record: Ended) -> dict | None:
    """The sampled process that started `record`: the last process of its parent's pid started before it."""
    parents = [known for known in by_pid.get(record.ppid, []) if known["started"] <= record.started + 2]
    return max(parents, key=lambda known: known["started"]) if parents else None


def ranked(totals: dict[str, list[float]], name: str, top: int) -> list[dict]:
    """The `top` rows of `totals` (name -> [CPU seconds, processes]), most CPU first."""
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    return [{name: key, "cpu_seconds": round(cpu, 1), "processes": count} for key, (cpu, count) in rows]


class Sampler:
    def __init__(self) -> None:
        self.processes: dict[tuple[int, str], dict] = {}  # (pid, start time) -> kind, command, cpu seconds
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
                cmdline = read(f"/proc/{entry.name}/cmdline").replace("\0", " ").strip()
                command = cmdline or stat.split("(", 1)[-1].split(")")[0]
                started = BOOT_TIME + int(rest[19]) / TICKS
                if "/docker/" in read(f"/proc/{entry.name}/cgroup"):
                    known = {"kind": None, "command": "container", "started": started}  # its container's cgroup
                else:
                    known = {"kind": host_kind(command), "command": command, "started": started}
                    if known["kind"] != "pytest worker":  # a worker's own CPU is in the per-test figures already
                        known["test_file"] = file_of_current_test(read_bytes(f"/proc/{entry.name}/environ"))
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

    def _by_pid(self) -> dict[int, list[dict]]:
        by_pid: dict[int, list[dict]] = defaultdict(list)  # a suite: ~60,000 records, ~20,000 processes
        for (pid, _), known in self.processes.items():
            by_pid[pid].append(known)
        return by_pid

    def ended_by_command(self, records: list[Ended], top: int = 25) -> list[dict]:
        """CPU of the processes that ended, by command line: the one sampled for that pid and start time (acct's whole
        seconds), else `<name> under <parent's>`, the parent being the last process of its pid started before it;
        processes in containers (their cgroups count them) apart."""
        by_pid = self._by_pid()
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for record in records:
            seen = sampled_as(by_pid, record)
            if seen:
                command = seen["command"]
            else:
                parent = parent_of(by_pid, record)
                parent_command = parent["command"] if parent else None
                if parent_command == "container" or (parent_command or "").startswith("/usr/bin/containerd-shim"):
                    command = "container"
                else:
                    command = f"[{record.comm}] under {command_key(parent_command) if parent else 'an unseen parent'}"
            # `runc init` is a container's first process, sampled before it joined its cgroup and exec'd the image's.
            if command == "container" or command.startswith("runc init"):
                continue
            total = totals[command_key(command)]
            total[0] += record.cpu_seconds
            total[1] += 1
        return ranked(totals, "command", top)

    def by_test_file(self, records: list[Ended], top: int = 30) -> list[dict]:
        """CPU of the host processes the tests started, by test file: what samples saw of each process (its last
        value, less what it had spent before the run), and each ended process no sample saw charged to the file of
        its parent (as in ended_by_command)."""
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for known in self.processes.values():
            if known.get("test_file"):
                total = totals[known["test_file"]]
                total[0] += known.get("cpu", 0.0) - known.get("base", 0.0)
                total[1] += 1
        by_pid = self._by_pid()
        for record in records:
            if sampled_as(by_pid, record):
                continue  # counted above
            parent = parent_of(by_pid, record)
            if parent and parent.get("test_file"):
                total = totals[parent["test_file"]]
                total[0] += record.cpu_seconds
                total[1] += 1
        return ranked(totals, "test_file", top)

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
    parser.add_argument("--acct", action="store_true",
                        help="also split the CPU of processes that ended by command (process accounting; root)")
    parser.add_argument("command", nargs="+", help="the command to run and sample (after --)")
    args = parser.parse_args(argv)
    sampler = Sampler()
    acct_file = Path(tempfile.mkstemp(prefix="suite-acct-")[1]) if args.acct else None
    if acct_file:
        subprocess.run(["accton", str(acct_file)], check=True, capture_output=True)
    try:
        child = subprocess.Popen(args.command)
        while child.poll() is None:
            sampler.sample()
            time.sleep(args.every)
        sampler.sample()
    finally:
        if acct_file:
            subprocess.run(["accton", "off"], check=False, capture_output=True)
    report = sampler.report()
    ended = parse_acct(acct_file.read_bytes()) if acct_file else []
    if acct_file:
        report["ended_by_command"] = sampler.ended_by_command(ended)
        acct_file.unlink()
    report["by_test_file"] = sampler.by_test_file(ended)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nexit {child.returncode}; wall {report['wall_seconds']} s; CPU busy {report['busy_cpu_seconds']} s "
          f"of {report['wall_seconds'] * report['cores']:.0f} ({report['busy_cpu_seconds'] / report['wall_seconds']:.2f}"
          f" cores busy on average); load up to {report['max_load']:.1f}")
    print("| kind | CPU s | share |\n|---|---|---|")
    for kind, seconds in report["per_kind"].items():
        print(f"| {kind} | {seconds:.0f} | {seconds / max(report['busy_cpu_seconds'], 1):.0%} |")
    if "ended_by_command" in report:
        print("\nprocesses that ended during the run, by command (process accounting; containers apart)")
        print("| command | processes | CPU s |\n|---|---|---|")
        for row in report["ended_by_command"]:
            print(f"| `{row['command']}` | {row['processes']} | {row['cpu_seconds']:.0f} |")
    print("\nhost processes the tests started (not the workers), by the test file that started them")
    print("| test file | processes | CPU s |\n|---|---|---|")
    for row in report["by_test_file"]:
        print(f"| `{row['test_file']}` | {row['processes']} | {row['cpu_seconds']:.0f} |")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
