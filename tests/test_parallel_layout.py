"""The suite's side-by-side layout (tests/conftest.py): which tests share an xdist worker, and which start first."""

import pytest

from tests.conftest import (ALERT_PATH_GROUP, DOCKER_ENGINE_GROUP, LONG_GROUPS, REPO_ROOT, autogroup_nice_for,
                            group_of_node, long_first, set_autogroup_nice, xdist_group_of)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "group"),
    [
        # Two compose deployments side by side on the one engine: the alert path's on a worker of its own, the rest of
        # tests/production (live production, the engine's tests) together on another.
        ("tests/production/test_live_production.py", DOCKER_ENGINE_GROUP),
        ("tests/production/test_live_alerts.py", "tests/production/test_live_alerts.py"),
        ("tests/production/test_docker_engine.py", DOCKER_ENGINE_GROUP),
        ("tests/production/sub/test_more.py", DOCKER_ENGINE_GROUP),
        # Any other file is a group of its own (its module-scoped fixtures start once).
        ("tests/e2e/test_live_stack.py", "tests/e2e/test_live_stack.py"),
        ("tests/control_api/test_auth.py", "tests/control_api/test_auth.py"),
        ("tests/test_settings.py", "tests/test_settings.py"),
        ("tests/deploy/test_production_names.py", "tests/deploy/test_production_names.py"),
    ],
)
def test_xdist_group_of_a_test_file(path: str, group: str) -> None:
    assert xdist_group_of(path) == group


def test_a_node_id_belongs_to_its_files_unit() -> None:
    assert group_of_node("tests/production/test_live_production.py::test_teardown") == DOCKER_ENGINE_GROUP
    assert group_of_node("tests/a/test_one.py::TestX::test_y[p::q]") == "tests/a/test_one.py"


def test_long_groups_start_first_in_their_order_and_the_rest_keep_theirs() -> None:
    collected = ["tests/a/test_one.py", "tests/e2e/test_live_stack.py", "tests/a/test_two.py", DOCKER_ENGINE_GROUP,
                 "tests/a/test_one.py", "tests/reliability/test_postgres_outage.py", "tests/b/test_three.py",
                 ALERT_PATH_GROUP]
    assert long_first(collected) == [ALERT_PATH_GROUP, "tests/reliability/test_postgres_outage.py",
                                     DOCKER_ENGINE_GROUP, "tests/e2e/test_live_stack.py", "tests/a/test_one.py",
                                     "tests/a/test_two.py", "tests/b/test_three.py"]


def test_every_long_group_names_tests_that_exist() -> None:
    for group in LONG_GROUPS:
        if group == DOCKER_ENGINE_GROUP:
            assert sorted((REPO_ROOT / "tests" / "production").glob("test_*.py")), group
        else:
            assert (REPO_ROOT / group).is_file(), group


@pytest.mark.parametrize(
    ("group", "nice"),
    [
        (DOCKER_ENGINE_GROUP, 0),  # the long units wait on their stacks at the default weight
        (ALERT_PATH_GROUP, 0),
        ("tests/reliability/test_postgres_outage.py", 0),
        ("tests/e2e/test_live_stack.py", 0),
        ("tests/control_api/test_auth.py", 5),  # a short file fills what the stacks leave idle
        ("tests/test_settings.py", 5),
    ],
)
def test_short_files_run_niced_and_the_long_units_do_not(group: str, nice: int) -> None:
    assert autogroup_nice_for(group) == nice


def test_the_autogroup_nice_is_written_where_the_kernel_has_one(tmp_path) -> None:
    autogroup = tmp_path / "autogroup"
    autogroup.write_text("/autogroup-1 nice 0\n")
    assert set_autogroup_nice(5, autogroup) and autogroup.read_text() == "5\n"
    assert not set_autogroup_nice(5, tmp_path / "missing" / "autogroup")


@pytest.mark.parametrize("has_autogroups", [True, False])
def test_a_worker_is_niced_in_its_session_and_as_a_process(tmp_path, has_autogroups: bool) -> None:
    """The process's own nice value is what counts in a child cpu cgroup (a CI runner's) or without autogroups: set
    in a child process, which the processes it starts inherit."""
    import subprocess
    import sys

    autogroup = tmp_path / "autogroup" if has_autogroups else tmp_path / "missing" / "autogroup"
    if has_autogroups:
        autogroup.write_text("/autogroup-1 nice 0\n")
    script = (f"import os, sys; sys.path.insert(0, {str(REPO_ROOT)!r}); from pathlib import Path; "
              f"from tests.conftest import set_worker_nice; ok = set_worker_nice(7, Path({str(autogroup)!r})); "
              "import subprocess; child = subprocess.run(['sh', '-c', 'cut -d\" \" -f19 /proc/$$/stat'], "
              "capture_output=True, text=True).stdout.strip(); print(ok, os.getpriority(os.PRIO_PROCESS, 0), child)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "7", "7"]
    assert (autogroup.read_text() == "7\n") if has_autogroups else not autogroup.exists()
