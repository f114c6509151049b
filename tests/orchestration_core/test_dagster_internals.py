"""The private Dagster APIs the project relies on, checked where they are used from: an upgrade that moves, renames
or reshapes any of them fails here, naming what changed, instead of somewhere inside a page or the cleanup job.

Everything else uses public APIs; the boundary test below keeps it that way.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dagster as dg
import pytest

from orchestration_core import dagster_internals as internals
from tests.conftest import REPO_ROOT
from tests.package_scan import dagster_internal_imports, production_modules

pytestmark = pytest.mark.unit

# The only production module allowed to import `dagster._…`, and how many names it may take from there (issue #44).
INTERNALS_MODULES = {"orchestration_core/dagster_internals.py"}
MOST_PRIVATE_NAMES = 12
INTERNALS = REPO_ROOT / "orchestration_core" / "dagster_internals.py"


def private_names_imported(tree: ast.Module) -> set[str]:
    """The local names a module binds from `dagster._…` modules."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dagster._"):
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names if alias.name.startswith("dagster._")}
    return names


def test_the_module_takes_at_most_twelve_private_names_and_exports_exactly_them() -> None:
    names = private_names_imported(ast.parse(INTERNALS.read_text()))
    assert len(names) <= MOST_PRIVATE_NAMES, sorted(names)
    assert names == set(internals.__all__)


def test_each_private_import_says_which_public_route_was_tried() -> None:
    """Every `from dagster._…` line has a comment block right above it (the reason it is private)."""
    lines = INTERNALS.read_text().splitlines()
    imports = [i for i, line in enumerate(lines) if line.startswith("from dagster._")]
    assert imports
    for i in imports:
        above = i - 1
        while lines[above].startswith("from dagster._"):  # one comment may cover two imports from one module
            above -= 1
        assert lines[above].startswith("# "), f"line {i + 1}: {lines[i]}"


def test_the_executors_entry_points_keep_the_shape_it_calls() -> None:
    """How racing_orchestration/threaded_executor.py calls each name: a moved or reshaped one fails here."""
    def parameters(function) -> list[str]:
        return list(inspect.signature(function).parameters)

    assert {"execution_plan", "iterator", "execution_context_manager"} <= set(
        parameters(internals.ExecuteRunWithPlanIterable))
    assert {"job", "retry_mode", "execution_plan", "run_config", "dagster_run", "instance", "raise_on_error",
            "output_capture"} <= set(parameters(internals.PlanExecutionContextManager))
    assert parameters(internals.dagster_event_sequence_for_step)[0] == "step_context"
    assert parameters(internals.trigger_step_hooks)[:2] == ["step_context", "step_event_list"]
    assert parameters(internals.InstanceConcurrencyContext)[:2] == ["instance", "dagster_run"]
    assert callable(internals.InstanceConcurrencyContext.__enter__)
    assert internals.RetryMode.from_config({"enabled": {}}) == internals.RetryMode.ENABLED
    assert internals.RetryMode.from_config({"disabled": {}}) == internals.RetryMode.DISABLED
    assert dg.Executor.retries.__isabstractmethod__  # the property the executor fills with a RetryMode


@pytest.mark.parametrize("name", ["RunsTable", "RunTagsTable", "SqlEventLogStorageTable", "AssetEventTagsTable",
                                  "ConcurrencySlotsTable", "PendingStepsTable", "JobTickTable", "SqlRunStorage",
                                  "SqlEventLogStorage", "InstigatorSelector", "InstigatorStatus", "InstigatorTick",
                                  "ScheduleInstigatorData", "SensorInstigatorData", "TickData", "TickStatus",
                                  "AUTO_RETRY_RUN_ID_TAG", "PARENT_RUN_ID_TAG", "RETRY_NUMBER_TAG", "ROOT_RUN_ID_TAG",
                                  "RUN_KEY_TAG", "TAGS_TO_MAYBE_OMIT_ON_RETRY", "WILL_RETRY_TAG", "DagsterGrpcClient",
                                  "dagster_api_pb2", "ping_code_server", "retry_consumer_cursor",
                                  "retry_run_as_the_daemon_would"])
def test_names_with_a_public_home_are_not_here(name: str) -> None:
    """Tables: orchestration_core/dagster_schema.py; schedule state: public instance methods; tag keys:
    orchestration_core/dagster_tags.py; run retries: orchestration_core/run_retries.py; the code servers' health:
    orchestration_core/code_server_probe.py."""
    assert not hasattr(internals, name)


def internals_importers(root: Path = REPO_ROOT) -> set[str]:
    return {relative for relative, tree in production_modules(root=root) if dagster_internal_imports(tree)}


def test_no_other_production_module_imports_dagster_internals() -> None:
    # Equal, not a subset: the allowed module is found, so the scan is looking at the real modules.
    assert internals_importers() == INTERNALS_MODULES


def test_the_scan_finds_an_internals_import_planted_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "control_api").mkdir()
    (tmp_path / "control_api" / "planted.py").write_text("from dagster import _check as check\n")
    (tmp_path / "control_api" / "clean.py").write_text("import dagster as dg\nfrom dagster import DagsterInstance\n")
    assert internals_importers(tmp_path) == {"control_api/planted.py"}


# Underscore attributes production code may read on objects other than its own `self`: argparse's subparsers type,
# namedtuple's and SQLAlchemy rows' public underscore API, and the TAB client's fork of itself (tab/client.py).
PUBLIC_UNDERSCORE_ATTRIBUTES = frozenset({"_SubParsersAction", "_replace", "_asdict", "_mapping", "_fields",
                                          "_http", "_calls", "_lock", "_pool_owner", "_client"})


def private_attribute_reads(tree: ast.Module) -> list[str]:
    """`x._name` reads where `x` is not `self`/`cls` and the name is not one of PUBLIC_UNDERSCORE_ATTRIBUTES."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and node.attr not in PUBLIC_UNDERSCORE_ATTRIBUTES
                and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_production_module_reads_another_objects_private_attribute() -> None:
    """How `storage._engine`, `client._query` or `server._executions` would come back: none does."""
    reads = {relative: private_attribute_reads(tree) for relative, tree in production_modules()}
    assert {relative: found for relative, found in reads.items() if found} == {}


@pytest.mark.parametrize(("source", "found"), [
    ("storage._engine.dispose()\n", ["1: storage._engine"]),
    ("instance.run_storage._engine\n", ["1: instance.run_storage._engine"]),
    ("self._engine\n", []),
    ("row._mapping\n", []),
    ("x.__class__\n", []),
])
def test_the_private_attribute_scan(source: str, found: list[str]) -> None:
    assert private_attribute_reads(ast.parse(source)) == found
