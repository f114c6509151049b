"""How much of the box the deployment takes: memory per service at idle and after some load, against budgets. Run by
hand, not a timed test (BENCHMARKS.md "Footprint"); the live production test checks the same idle figures with
`alarms` (tests/production/test_live_production.py).

    python bench/compose_footprint.py [--skip-build] [--image-tag footprint] [--idle-seconds 120] [--json OUT]
    python bench/compose_footprint.py --local [--idle-seconds 120] [--json OUT]      # `make run`'s stack

Compose (the production reference): brings the deployment up as a project of its own beside anything already
running (its own ports), waits `--idle-seconds` after every service is healthy and records `docker stats` memory per
service, and the PSS of each control-API worker (/proc/PID/smaps_rollup of the container's processes). Then one
morning scrape of the simulated feed in dense mode (a race a minute, the first 16 minutes out) and 10 finished
checkpoint runs, and the same figures again. `--local`: the local stack on free ports, every process of it summed
(PSS) `--idle-seconds` after it is up, per service as the soak names them (bench/soak.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.soak import docker_memory_mib, launch_scrape, pss_mib_from_smaps_rollup  # noqa: E402

# The services a homelab host always pays for; Prometheus, Alertmanager and Grafana come on top (issue: "core").
CORE_SERVICES = ("front", "webserver", "daemon", "code-racing", "code-maintenance", "api", "postgres")
CORE_IDLE = "core services at idle"
API_PER_WORKER = "control API per worker"
LOCAL_IDLE = "make run at idle"
# Goals, MiB: what a 4-8 GB mini PC shared with the services this project mirrors and backs up can give.
BUDGETS_MIB = {CORE_IDLE: 768.0, API_PER_WORKER: 80.0, LOCAL_IDLE: 1228.8}
IDLE_SECONDS = 120.0  # "2 minutes idle" after every service is healthy
# A figure this far above its budget fails the live production test: a regression alarm, not a timing test.
ALARM_FACTOR = 1.25
CHECKPOINT_JOBS = ("pre_race_t60", "pre_race_t15", "post_race_t5")
STATS_FORMAT = "{{.ID}} {{.MemUsage}}"


@dataclass(frozen=True)
class BudgetRow:
    name: str
    value: float
    budget: float
    alarm_at: float
    verdict: str  # "within budget", "over budget", "ALARM"


def memory_by_service(stats_output: str, containers: Mapping[str, str]) -> dict[str, float]:
    """service -> MiB from `docker stats --no-stream --format STATS_FORMAT` for the containers `containers` names
    (service -> id, as `docker ps` prints it). A container the stats do not list is left out, not guessed."""
    by_id = {}
    for line in stats_output.splitlines():
        cid, _, usage = line.strip().partition(" ")
        if cid and usage:
            by_id[cid] = docker_memory_mib(usage)
    out = {}
    for service, cid in containers.items():
        match = [mib for stats_id, mib in by_id.items() if cid.startswith(stats_id) or stats_id.startswith(cid)]
        if match:
            out[service] = match[0]
    return out


def api_worker_pss(processes: Iterable[tuple[list[str], float]]) -> list[float]:
    """The PSS (MiB) of each control-API process that serves requests, from (command line, PSS) of the container's
    processes: with `--workers N` (N > 1) uvicorn serves from multiprocessing spawn children and its supervisor
    serves nothing; with one worker the API's own process serves. Python's resource tracker serves nothing, nor does
    a healthcheck that happens to run (`python -m control_api.container_probe`)."""
    processes = [(" ".join(cmdline), pss) for cmdline, pss in processes]
    spawned = [pss for text, pss in processes if "multiprocessing.spawn" in text]
    if spawned:
        return spawned
    serving = [pss for text, pss in processes if ("control_api" in text or "maintenance-api" in text)
               and "resource_tracker" not in text and "container_probe" not in text]
    return [max(serving)] if serving else []


def core_total(by_service: Mapping[str, float], core: Iterable[str] = CORE_SERVICES) -> float:
    """The core services' memory together; a core service missing from `by_service` is an error, not a zero."""
    missing = [service for service in core if service not in by_service]
    if missing:
        raise ValueError(f"no memory figure for {', '.join(missing)}")
    return round(sum(by_service[service] for service in core), 1)


def budget_rows(figures: Mapping[str, float], budgets: Mapping[str, float] = BUDGETS_MIB,
                factor: float = ALARM_FACTOR) -> list[BudgetRow]:
    """One row per figure that has a budget: within it, over it, or over it by more than `factor` (the alarm)."""
    rows = []
    for name, value in figures.items():
        if name not in budgets:
            continue
        budget = budgets[name]
        alarm_at = round(budget * factor, 1)
        verdict = "ALARM" if value > alarm_at else "over budget" if value > budget else "within budget"
        rows.append(BudgetRow(name, round(value, 1), budget, alarm_at, verdict))
    return rows


def alarms(rows: Iterable[BudgetRow]) -> list[str]:
    """What the live production test reports as failed: each figure over its alarm threshold."""
    return [f"{row.name}: {row.value} MiB, budget {row.budget} (alarm above {row.alarm_at})"
            for row in rows if row.verdict == "ALARM"]


def format_rows(rows: Iterable[BudgetRow]) -> str:
    return "\n".join(f"{row.name:<28} {row.value:>8.1f} MiB   budget {row.budget:>7.1f}   alarm above "
                     f"{row.alarm_at:>7.1f}   {row.verdict}" for row in rows)


# --- compose --------------------------------------------------------------------------------------------------------
def container_processes(container: str) -> list[tuple[list[str], float]]:
    """(command line, PSS MiB) of each process of a running container, read from the host's /proc."""
    top = subprocess.run(["docker", "top", container, "-eo", "pid"], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split()[1:]
    out = []
    for pid in (int(p) for p in top if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            out.append(([part for part in cmdline if part],
                        pss_mib_from_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # ended meanwhile
    return out


def compose_figures(stack) -> dict:
    """The memory figures of a compose deployment that is up (tests.production.compose_stack.ComposeStack)."""
    ps = subprocess.run(["docker", "ps", "--filter", f"label=com.docker.compose.project={stack.project}",
                         "--format", '{{.ID}} {{.Label "com.docker.compose.service"}}'],
                        capture_output=True, text=True, check=True, timeout=60).stdout
    containers = {fields[1]: fields[0] for fields in (line.split() for line in ps.splitlines()) if len(fields) == 2}
    stats = subprocess.run(["docker", "stats", "--no-stream", "--format", STATS_FORMAT, *containers.values()],
                           capture_output=True, text=True, check=True, timeout=120).stdout
    by_service = memory_by_service(stats, containers)
    workers = api_worker_pss(container_processes(containers["api"]))
    return {"services_mib": by_service, "core_services_mib": core_total(by_service), "api_workers_pss_mib": workers,
            "api_per_worker_mib": round(max(workers), 1) if workers else None}


def idle_budget_figures(idle: Mapping) -> dict[str, float]:
    """The figures of `compose_figures` taken at idle that have budgets, by budget name."""
    return {CORE_IDLE: idle["core_services_mib"], API_PER_WORKER: idle["api_per_worker_mib"]}


def finished_checkpoint_runs(stack) -> dict[str, int]:
    """Finished checkpoint runs by end status."""
    names = ", ".join(f"'{job}'" for job in CHECKPOINT_JOBS)
    rows = stack.psql("dagster", f"SELECT status, count(*) FROM runs WHERE pipeline_name IN ({names}) "
                                 "AND status IN ('SUCCESS', 'FAILURE', 'CANCELED') GROUP BY status")
    return {status: int(count) for status, count in rows}


def run_compose(args) -> dict:
    from local_stack.stack import free_port
    from tests.production.compose_stack import ComposeStack

    work = Path(tempfile.mkdtemp(prefix="footprint-"))
    stack = ComposeStack(work_dir=work, image_tag=args.image_tag, project=args.project,
                         # The services of the live deployment that publish a port (Prometheus and Grafana are not
                         # started: no stand-in images).
                         host_ports={service: free_port() for service in ("front", "api")},
                         sim_args=("--dense-every", "1", "--dense-races", "30", "--dense-lead", "16"))
    result: dict = {"form": "compose", "idle_seconds": args.idle_seconds}
    try:
        stack.deploy(build=not args.skip_build)
        time.sleep(args.idle_seconds)
        result["idle"] = compose_figures(stack)
        print(json.dumps(result["idle"], indent=1), flush=True)
        result["scrape_run"] = launch_scrape(stack.dagster_url)
        deadline = time.monotonic() + 1800
        while sum(finished_checkpoint_runs(stack).values()) < 10 and time.monotonic() < deadline:
            time.sleep(15)
        result["checkpoint_runs_finished"] = finished_checkpoint_runs(stack)
        result["after_load"] = compose_figures(stack)
    finally:
        stack.down()
    return result


# --- local ------------------------------------------------------------------------------------------------------------
def run_local(args) -> dict:
    import secrets

    from bench.soak import LocalSampler, read_pss_mib
    from local_stack.stack import LocalStack, StackOptions, free_port

    work = Path(tempfile.mkdtemp(prefix="footprint-local-"))
    stack = LocalStack(StackOptions(data_dir=work, dagster_port=free_port(), sim_port=free_port(),
                                    api_port=free_port(), api_key=secrets.token_hex(16)))
    try:
        stack.start()
        time.sleep(args.idle_seconds)
        by_service: dict[str, float] = {}
        for service, pids in LocalSampler(stack).services().items():
            for pid in pids:
                try:
                    by_service[service] = by_service.get(service, 0.0) + read_pss_mib(pid)
                except (FileNotFoundError, ProcessLookupError):
                    continue
        by_service = {service: round(mib, 1) for service, mib in by_service.items()}
        return {"form": "local", "idle_seconds": args.idle_seconds, "services_pss_mib": by_service,
                LOCAL_IDLE: round(sum(by_service.values()), 1)}
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", action="store_true", help="the local stack (`make run`) instead of compose")
    parser.add_argument("--idle-seconds", type=float, default=IDLE_SECONDS)
    parser.add_argument("--skip-build", action="store_true", help="compose: use the images already tagged")
    parser.add_argument("--image-tag", default="footprint")
    parser.add_argument("--project", default="racing-footprint",
                        help="compose: the project name (a second run beside the first needs another)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    result = run_local(args) if args.local else run_compose(args)
    figures = idle_budget_figures(result["idle"]) if "idle" in result else {LOCAL_IDLE: result[LOCAL_IDLE]}
    rows = budget_rows(figures)
    result["budgets"] = [asdict(row) for row in rows]
    print(json.dumps(result, indent=1))
    print(format_rows(rows))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
