"""The suite's own cpu cgroup (tests/suite_cgroup.py): entered from the root one only, left and removed at the end."""

import subprocess
from pathlib import Path

import pytest

from tests.suite_cgroup import (CGROUP_PREFIX, SUITE_CGROUP_RECORD, enter_own_cpu_cgroup, leave_own_cpu_cgroup,
                                 move_to_cgroup, record_own_cgroup, wants_own_cgroup)
from tests.production.docker_engine import CGROUP_ROOT, cpu_cgroup

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("current", "environ", "wanted"), [
    ("/", {}, True),  # the root cpu cgroup, where autogroups weigh sessions
    ("/", {"SUITE_OWN_CPU_CGROUP": "0"}, False),  # opted out, to measure the root layout
    ("/ci", {}, False),  # a CI runner's child cgroup already weighs processes one by one
    ("/pytest-suite-7", {}, False),
    ("?", {}, False),  # no cpu cgroup found
])
def test_the_suite_moves_only_from_the_root_cpu_cgroup(current, environ, wanted) -> None:
    assert wants_own_cgroup(current, environ) is wanted


def _fake_v1(tmp_path: Path, where: str) -> tuple[Path, Path]:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.shares").write_text("1024\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text(f"4:memory:/x\n1:cpu:{where}\n0::/\n")
    return tmp_path, proc


@pytest.mark.parametrize(("where", "environ", "entered"), [("/", {}, True), ("/ci", {}, False),
                                                          ("/", {"SUITE_OWN_CPU_CGROUP": "0"}, False)])
def test_entering_writes_the_pid_into_a_new_child_cgroup(tmp_path, where, environ, entered) -> None:
    root, proc = _fake_v1(tmp_path, where)
    own = enter_own_cpu_cgroup(4242, cgroup_root=root, proc_cgroup=proc, environ=environ)
    if entered:
        assert own == root / "cpu" / f"{CGROUP_PREFIX}4242"
        assert (own / "cgroup.procs").read_text() == "4242\n"
    else:
        assert own is None and not list((root / "cpu").glob(f"{CGROUP_PREFIX}*"))


def test_no_v1_cpu_hierarchy_leaves_the_suite_where_it_is(tmp_path) -> None:
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/\n")
    assert enter_own_cpu_cgroup(4242, cgroup_root=tmp_path, proc_cgroup=proc, environ={}) is None


def test_a_real_process_goes_into_a_child_cgroup_and_back() -> None:
    """On the real cgroupfs (root here and in CI): a process moved into a child of this test's own cpu cgroup runs
    there, and leaving puts it back in the parent and removes the child, with an empty cgroup nested in it."""
    hierarchy = CGROUP_ROOT / "cpu"
    here = cpu_cgroup(Path("/proc/self/cgroup").read_text())
    child = subprocess.Popen(["sleep", "30"])
    try:
        own = hierarchy / here.lstrip("/") / f"test-suite-cgroup-{child.pid}"
        try:
            own.mkdir()
        except OSError:  # no v1 cpu hierarchy, or not root: nothing can be moved, and nothing is claimed
            assert not move_to_cgroup(child.pid, own)
            return
        (own / "docker").mkdir()  # as a test engine nests its containers' cgroups
        assert move_to_cgroup(child.pid, own)
        assert cpu_cgroup(Path(f"/proc/{child.pid}/cgroup").read_text()) == f"{here.rstrip('/')}/{own.name}"
        assert leave_own_cpu_cgroup(child.pid, own)
        assert cpu_cgroup(Path(f"/proc/{child.pid}/cgroup").read_text()) == here
        assert not own.exists()
    finally:
        child.kill()
        child.wait()


def test_the_cgroup_the_suite_ran_in_is_recorded_for_the_host_report(tmp_path) -> None:
    artifacts = tmp_path / "test-artifacts"
    record_own_cgroup(tmp_path / "cgroup" / "cpu" / "pytest-suite-42", artifacts, cgroup_root=tmp_path / "cgroup")
    assert (artifacts / SUITE_CGROUP_RECORD).read_text() == "/pytest-suite-42\n"
