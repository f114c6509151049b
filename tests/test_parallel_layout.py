"""The suite's side-by-side layout (tests/conftest.py): which tests share an xdist worker, and which start first."""

import pytest

from tests.conftest import (DOCKER_ENGINE_GROUP, LONG_GROUPS, REPO_ROOT, group_of_node, long_first,
                            xdist_group_of)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "group"),
    [
        # One Docker engine, one compose deployment at a time: every file under tests/production on one worker.
        ("tests/production/test_live_production.py", DOCKER_ENGINE_GROUP),
        ("tests/production/test_live_alerts.py", DOCKER_ENGINE_GROUP),
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
                 "tests/a/test_one.py", "tests/reliability/test_postgres_outage.py", "tests/b/test_three.py"]
    assert long_first(collected) == [DOCKER_ENGINE_GROUP, "tests/reliability/test_postgres_outage.py",
                                     "tests/e2e/test_live_stack.py", "tests/a/test_one.py", "tests/a/test_two.py",
                                     "tests/b/test_three.py"]


def test_every_long_group_names_tests_that_exist() -> None:
    for group in LONG_GROUPS:
        if group == DOCKER_ENGINE_GROUP:
            assert sorted((REPO_ROOT / "tests" / "production").glob("test_*.py")), group
        else:
            assert (REPO_ROOT / group).is_file(), group
