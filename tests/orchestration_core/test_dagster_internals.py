"""The private Dagster APIs the project relies on, checked where they are used from: an upgrade that moves, renames
or reshapes any of them fails here, naming what changed, instead of somewhere inside a page or the cleanup job.

Everything else uses public APIs; the boundary test below keeps it that way.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import dagster as dg
import pytest

from orchestration_core import dagster_internals as internals
from tests.conftest import REPO_ROOT
from tests.package_scan import dagster_internal_imports, production_modules

pytestmark = pytest.mark.unit

# The only production modules allowed to import `dagster._…`.
INTERNALS_MODULES = {"orchestration_core/dagster_internals.py", "racing_orchestration/threaded_executor.py"}


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        (internals.RunsTable, {"run_id", "status", "pipeline_name", "create_timestamp", "update_timestamp",
                               "start_time", "end_time", "run_body"}),
        (internals.RunTagsTable, {"run_id", "key", "value"}),
        (internals.SqlEventLogStorageTable, {"id", "run_id", "dagster_event_type", "event", "timestamp"}),
        (internals.AssetEventTagsTable, {"event_id", "key", "value"}),
        (internals.ConcurrencySlotsTable, {"run_id"}),
        (internals.PendingStepsTable, {"run_id"}),
    ],
    ids=lambda value: getattr(value, "name", None),
)
def test_storage_tables_have_the_columns_we_query(table, columns: set[str]) -> None:
    assert columns <= set(table.c.keys()), f"{table.name} lost {sorted(columns - set(table.c.keys()))}"


def test_storage_classes_keep_the_methods_the_bulk_delete_mirrors() -> None:
    assert callable(internals.SqlRunStorage.delete_run) and callable(internals.SqlRunStorage.connect)
    assert callable(internals.SqlEventLogStorage.delete_events)
    assert "run_id" in inspect.signature(internals.SqlEventLogStorage.delete_events).parameters


def test_instigator_types() -> None:
    selector = internals.InstigatorSelector(location_name="l", repository_name="r", name="n")
    assert selector.get_id()
    assert {s.name for s in internals.InstigatorStatus} >= {"RUNNING", "STOPPED", "DECLARED_IN_CODE"}
    # The instance API the schedulers page reads the state through.
    assert callable(dg.DagsterInstance.get_instigator_state)


@pytest.mark.parametrize("name", ["AUTO_RETRY_RUN_ID_TAG", "PARENT_RUN_ID_TAG", "RETRY_NUMBER_TAG", "ROOT_RUN_ID_TAG",
                                  "RUN_KEY_TAG", "TAGS_TO_MAYBE_OMIT_ON_RETRY", "WILL_RETRY_TAG", "DagsterGrpcClient",
                                  "dagster_api_pb2", "ping_code_server", "retry_consumer_cursor",
                                  "retry_run_as_the_daemon_would"])
def test_names_with_a_public_home_are_not_here(name: str) -> None:
    """Tag keys: orchestration_core/dagster_tags.py; run retries: orchestration_core/run_retries.py; the code servers'
    health: orchestration_core/code_server_probe.py."""
    assert not hasattr(internals, name)


def internals_importers(root: Path = REPO_ROOT) -> set[str]:
    return {relative for relative, tree in production_modules(root=root) if dagster_internal_imports(tree)}


def test_no_other_production_module_imports_dagster_internals() -> None:
    # Equal, not a subset: the two allowed modules are found, so the scan is looking at the real modules.
    assert internals_importers() == INTERNALS_MODULES


def test_the_scan_finds_an_internals_import_planted_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "control_api").mkdir()
    (tmp_path / "control_api" / "planted.py").write_text("from dagster import _check as check\n")
    (tmp_path / "control_api" / "clean.py").write_text("import dagster as dg\nfrom dagster import DagsterInstance\n")
    assert internals_importers(tmp_path) == {"control_api/planted.py"}
