"""A Docker engine for the live production tests: the one already running, or one this module starts and stops.

Debian's docker.io has no init system to start it here, so `dockerd` is started by hand (overlay2, the machine's
default data root so images built by one run are reused by the next) and stopped by its pid, never by name.

The suite's workers run two compose deployments side by side on one engine: an engine a test started is shared, and
only its last user stops it. Who uses it is kept in USERS_FILE (the dockerd pid and the users' pids), read and written
under a machine-wide lock; a user that died without stopping is dropped when the next one comes or goes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

SOCKET = "/var/run/docker.sock"
LOCK_DIR = Path("/tmp")
USERS_FILE = LOCK_DIR / "racing-orchestration-docker-engine.json"
# Where a test-started dockerd keeps its exec root and log: not under a test's own folder, which goes with the test
# while the engine may still serve another worker.
ENGINE_STATE_DIR = LOCK_DIR / "racing-orchestration-dockerd"
# The CPU weight of every container of a test-started engine together. The kernel's autogroup scheduling gives each
# session one share: each process of the suite's local stacks (started in sessions of their own) weighed as much as
# the whole compose deployment, so with two local stacks starting beside it (~15 sessions) its containers got ~1/17
# of the CPU and its `up` took 170-290 s instead of ~60 (BENCHMARKS.md "Test suite"). Eight shares: the
# deployment's eight long-running services weigh about what eight of those processes do. The machine's own engine
# (a production host's) is left as its operator set it.
ENGINE_CPU_SHARES = 8
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
DEFAULT_CONTAINER_CGROUP = "/docker"  # dockerd's own default (cgroupfs driver)


@contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Held by one process of the machine at a time (the suite's workers share the engine and the image builds)."""
    with open(LOCK_DIR / f"racing-orchestration-{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def exited(stat: str) -> bool:
    """Whether the process whose /proc/PID/stat line is `stat` has exited: a zombie (Z) waits for its parent to reap
    it, and one being reaped shows as dead (X) for a moment before its /proc entry goes."""
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def process_alive(pid: int) -> bool:
    """A process that exists and has not exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not exited(stat)


def read_users(path: Path) -> tuple[int | None, list[int]]:
    """(the pid of the dockerd a test started, the pids using it), the dead left out."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, []
    dockerd = state.get("dockerd")
    if not (isinstance(dockerd, int) and process_alive(dockerd)):
        return None, []
    return dockerd, [pid for pid in state.get("users", []) if isinstance(pid, int) and process_alive(pid)]


def write_users(path: Path, dockerd: int | None, users: list[int]) -> None:
    path.write_text(json.dumps({"dockerd": dockerd, "users": users}))


class DockerUnavailable(RuntimeError):
    """No engine is running and none can be started here (no dockerd binary, not root)."""


def docker_cli() -> str:
    # Debian's package puts a 20.10 client at /usr/bin/docker; any client talks to the engine.
    found = shutil.which("docker")
    if not found:
        raise DockerUnavailable("no docker client on PATH (Debian: apt-get install docker.io)")
    return found


def engine_answers(timeout: float = 10.0) -> bool:
    try:
        done = subprocess.run(
            [docker_cli(), "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (DockerUnavailable, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


@dataclass
class DockerEngine:
    """The engine the test talks to; `started_here` says whether it was started by a test, so that `stop()` ends it
    once no other user is left."""

    started_here: bool
    pid: int | None = None
    log_path: Path | None = None
    process: subprocess.Popen | None = None  # the dockerd, when this process started it
    users_file: Path = field(default=USERS_FILE)

    def stop(self) -> None:
        if not self.started_here or self.pid is None:
            return
        with machine_lock("docker-engine"):
            dockerd, users = read_users(self.users_file)
            if dockerd == self.pid:
                if os.getpid() in users:
                    users.remove(os.getpid())
                if users:  # another worker's deployment still runs on it
                    write_users(self.users_file, dockerd, users)
                    return
                write_users(self.users_file, None, [])
            self._terminate()

    def _terminate(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            # wait() reaps it: a dockerd that exited stays a zombie until then, and polling its pid with kill(pid, 0)
            # found it "alive" until the deadline (60 s lost at the end of every run that started the engine).
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
            return
        # Started by another worker, which reaps it (or init, once that worker has ended): wait for it to exit.
        if not process_alive(self.pid):
            return
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while process_alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if process_alive(self.pid):
            with suppress(ProcessLookupError):  # it ended since the look
                os.kill(self.pid, signal.SIGKILL)


def ensure_engine(state_dir: Path, users_file: Path = USERS_FILE) -> DockerEngine:
    """Use the running engine, or start `dockerd` (root only) and wait until it answers. An engine another test
    started is shared: this process is counted among its users."""
    with machine_lock("docker-engine"):
        dockerd, users = read_users(users_file)
        if engine_answers():
            if dockerd is None:  # the machine's own engine: never stopped by a test
                return DockerEngine(started_here=False, users_file=users_file)
            write_users(users_file, dockerd, [*users, os.getpid()])
            return DockerEngine(started_here=True, pid=dockerd, users_file=users_file)
        engine = start_dockerd(state_dir, users_file)
        write_users(users_file, engine.pid, [os.getpid()])
        return engine


def cpu_cgroup(cgroup_text: str) -> str:
    """The cpu cgroup named in a /proc/<pid>/cgroup text: the v1 hierarchy holding the cpu controller, else the v2 one
    (`0::`); "?" when neither is there. bench/suite_host.py reports it too."""
    unified = "?"
    for line in cgroup_text.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if hierarchy == "0":
            unified = path
    return unified


def weigh_containers(shares: int = ENGINE_CPU_SHARES, cgroup_root: Path = CGROUP_ROOT,
                     proc_cgroup: Path = PROC_CGROUP) -> tuple[str, Path | None]:
    """Where a test-started engine puts its containers (dockerd's `--cgroup-parent`), weighted as `shares` of the
    entities the suite's processes compete as; returns that parent and the weight file written (None: left alone).

    In the root cpu cgroup the kernel weighs sessions (autogroups): the containers go to dockerd's default `/docker`,
    at `shares` sessions' weight. In a child cpu cgroup (a CI runner may start the suite in one) autogroups do not
    apply and the suite's processes are weighed one by one, inside it: there `/docker` would weigh `shares` times the
    suite's whole cgroup (the containers took most of the CPU and the outage stack's runs queued past their race's
    jump: BENCHMARKS.md "Test suite"). The containers then go under the suite's own cgroup, where they weigh as
    `shares` of its processes. cgroup v2 cannot nest them under a cgroup that holds processes: left as they are."""
    v1, v2_controllers = cgroup_root / "cpu", cgroup_root / "cgroup.subtree_control"
    suite = cpu_cgroup(proc_cgroup.read_text())
    nested = suite.rstrip("/") if suite not in ("/", "?") else ""  # "" in the root cgroup
    if (v1 / "cpu.shares").exists():  # cgroup v1: cpu.shares, 1024 a share
        parent, target, value = f"{nested}/docker", v1 / nested.lstrip("/") / "docker" / "cpu.shares", 1024 * shares
    elif v2_controllers.exists() and "cpu" in v2_controllers.read_text().split():
        if nested:
            return DEFAULT_CONTAINER_CGROUP, None
        parent, target, value = DEFAULT_CONTAINER_CGROUP, cgroup_root / "docker" / "cpu.weight", 100 * shares
    else:
        return DEFAULT_CONTAINER_CGROUP, None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n")
    except OSError:  # a read-only cgroup tree (a container without the privilege): dockerd's default, unweighted
        return DEFAULT_CONTAINER_CGROUP, None
    return parent, target


def dockerd_command(dockerd: str, state_dir: Path, pidfile: Path, container_cgroup: str) -> list[str]:
    command = [dockerd, "--storage-driver=overlay2", f"--exec-root={state_dir / 'exec'}", f"--pidfile={pidfile}",
               f"--host=unix://{SOCKET}"]
    if container_cgroup != DEFAULT_CONTAINER_CGROUP:
        command.append(f"--cgroup-parent={container_cgroup}")
    return command


def start_dockerd(state_dir: Path, users_file: Path) -> DockerEngine:
    dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None)
    if dockerd is None:
        raise DockerUnavailable("no Docker engine is running and dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise DockerUnavailable("no Docker engine is running and starting dockerd needs root")
    state_dir.mkdir(parents=True, exist_ok=True)
    container_cgroup, _ = weigh_containers()
    log_path = state_dir / "dockerd.log"
    pidfile = state_dir / "dockerd.pid"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            dockerd_command(dockerd, state_dir, pidfile, container_cgroup),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DockerUnavailable(f"dockerd exited with {process.returncode}: see {log_path}")
        if engine_answers(timeout=5):
            return DockerEngine(started_here=True, pid=process.pid, log_path=log_path, process=process,
                                users_file=users_file)
        time.sleep(0.5)
    process.kill()
    raise DockerUnavailable(f"dockerd did not answer within 60 s: see {log_path}")


def engine_for_test(state_dir: Path = ENGINE_STATE_DIR) -> DockerEngine:
    """`ensure_engine` for a test fixture: skips without an engine, but fails under CI=true, where `make test` installs
    Debian's docker.io (a skipped deployment test must never pass for a green CI)."""
    import pytest

    try:
        return ensure_engine(state_dir)
    except DockerUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no Docker engine: {exc} (make test installs Debian's docker.io)")
        pytest.skip(f"no Docker engine: {exc}")
