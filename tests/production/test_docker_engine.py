"""DockerEngine.stop(): ends the dockerd the live tests started once its last user is done, as soon as it has exited;
leaves any other alone. (Stand-in processes for the engine and its users; the users file is the test's own.)"""

import os
import subprocess
import sys
import time

import pytest

from tests.production.docker_engine import DockerEngine, exited, read_users, write_users

pytestmark = pytest.mark.unit  # a stand-in process, no Docker engine


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


@pytest.mark.parametrize(
    ("stat", "ended"),
    [
        ("4242 (python) S 1 4242", False),
        ("4242 (python) R 1 4242", False),
        ("4242 (python) D 1 4242", False),
        ("4242 (python) T 1 4242", False),  # stopped (SIGSTOP) is still alive: a test resumes or kills it
        ("4242 (python) Z 1 4242", True),  # exited, waiting for its parent to reap it
        ("4242 (python) X 1 4242", True),  # exited and being reaped: /proc still shows it for a moment
        ("4242 (a) Z (b) S 1 4242", False),  # a command name holding ") Z ": the state follows the last ")"
    ],
)
def test_a_process_has_exited_once_it_is_a_zombie_or_dead(stat: str, ended: bool) -> None:
    assert exited(stat) is ended


def test_stop_returns_once_the_engine_it_started_has_exited(tmp_path) -> None:
    process = sleeper()
    engine = DockerEngine(started_here=True, pid=process.pid, process=process, users_file=tmp_path / "users.json")
    started = time.monotonic()
    engine.stop()
    assert process.poll() is not None
    assert time.monotonic() - started < 10, "waited for an engine that had already exited"


def test_stop_leaves_an_engine_it_did_not_start_running(tmp_path) -> None:
    process = sleeper()
    try:
        DockerEngine(started_here=False, pid=process.pid, users_file=tmp_path / "users.json").stop()
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_shared_engine_runs_until_its_last_user_is_done(tmp_path) -> None:
    """Two workers' deployments on one engine: the first to finish leaves it running for the other; the last stops
    it, and a user that died without stopping does not keep it alive."""
    users_file = tmp_path / "users.json"
    dockerd, other_worker = sleeper(), sleeper()
    try:
        write_users(users_file, dockerd.pid, [os.getpid(), other_worker.pid])
        DockerEngine(started_here=True, pid=dockerd.pid, process=dockerd, users_file=users_file).stop()
        assert dockerd.poll() is None, "stopped while another worker still used it"
        assert read_users(users_file) == (dockerd.pid, [other_worker.pid])

        other_worker.kill()
        other_worker.wait()
        write_users(users_file, dockerd.pid, [other_worker.pid, os.getpid()])
        # This process did not start it (process=None): it ends it by pid and waits for it to exit.
        DockerEngine(started_here=True, pid=dockerd.pid, users_file=users_file).stop()
        assert dockerd.wait(timeout=10) is not None
        assert read_users(users_file) == (None, [])
    finally:
        for process in (dockerd, other_worker):
            process.kill()
            process.wait()


V1_ROOT = "9:name=systemd:/\n4:memory:/process_api/f6f3\n2:cpuacct:/\n1:cpu:/\n0::/\n"
V1_CHILD = "9:name=systemd:/\n4:memory:/process_api/f6f3\n2:cpu,cpuacct:/ci/job-1\n0::/\n"


@pytest.mark.parametrize(
    ("layout", "proc_cgroup", "parent", "written", "value"),
    [
        # the root cpu cgroup: sessions are weighed, the containers at dockerd's default weigh as 8 of them
        ("v1", V1_ROOT, "/docker", "cpu/docker/cpu.shares", "8192"),  # 1024 a share
        # a child cpu cgroup (a CI runner's): the containers under it, weighed as 8 of its processes
        ("v1", V1_CHILD, "/ci/job-1/docker", "cpu/ci/job-1/docker/cpu.shares", "8192"),
        ("v2", "0::/\n", "/docker", "docker/cpu.weight", "800"),  # 100 a share
        # cgroup v2 has no room under a cgroup holding processes: dockerd's default, unweighted
        ("v2", "0::/ci/job-1\n", "/docker", None, None),
    ],
)
def test_containers_weigh_eight_of_what_the_suite_competes_as(tmp_path, layout: str, proc_cgroup: str, parent: str,
                                                              written: str | None, value: str | None) -> None:
    from tests.production.docker_engine import weigh_containers

    (tmp_path / "proc").write_text(proc_cgroup)
    root = tmp_path / "cgroup"
    if layout == "v1":
        (root / "cpu").mkdir(parents=True)
        (root / "cpu" / "cpu.shares").write_text("1024\n")
    else:
        root.mkdir()
        (root / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
    assert weigh_containers(cgroup_root=root, proc_cgroup=tmp_path / "proc") == (
        parent, root / written if written else None)
    if written:
        assert (root / written).read_text().strip() == value
    else:
        assert sorted(p.name for p in root.iterdir()) == ["cgroup.subtree_control"]


@pytest.mark.parametrize(("container_cgroup", "parent_flags"),
                         [("/docker", []), ("/ci/job-1/docker", ["--cgroup-parent=/ci/job-1/docker"])])
def test_dockerd_is_told_where_the_containers_go_only_when_not_its_default(
        tmp_path, container_cgroup: str, parent_flags: list[str]) -> None:
    from tests.production.docker_engine import dockerd_command

    command = dockerd_command("/usr/sbin/dockerd", tmp_path, tmp_path / "dockerd.pid", container_cgroup)
    assert [flag for flag in command if flag.startswith("--cgroup-parent")] == parent_flags
    assert command[:2] == ["/usr/sbin/dockerd", "--storage-driver=overlay2"]


def test_without_a_cpu_controller_the_weight_is_left_alone(tmp_path) -> None:
    from tests.production.docker_engine import weigh_containers

    (tmp_path / "proc").write_text("0::/\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    assert weigh_containers(cgroup_root=tmp_path, proc_cgroup=tmp_path / "proc") == ("/docker", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cgroup.subtree_control", "proc"]


def test_a_background_teardown_releases_the_engine_only_once_it_has_ended() -> None:
    """compose_stack.in_background: the alert deployment's `down` runs while the next one comes up; the engine is
    released after it, even when it failed, and not before join_background."""
    import threading

    from tests.production.compose_stack import in_background, join_background

    order: list[str] = []
    may_end = threading.Event()

    def teardown() -> None:
        may_end.wait(10)
        order.append("down")
        raise RuntimeError("a failed down is reported, not raised")

    in_background(teardown, then=lambda: order.append("engine released"))
    assert order == []  # running: the caller went on
    may_end.set()
    join_background()
    assert order == ["down", "engine released"]
    join_background()  # nothing left: returns at once
    assert order == ["down", "engine released"]
