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


def test_instigator_types_and_tags() -> None:
    selector = internals.InstigatorSelector(location_name="l", repository_name="r", name="n")
    assert selector.get_id()
    assert {s.name for s in internals.InstigatorStatus} >= {"RUNNING", "STOPPED", "DECLARED_IN_CODE"}
    assert internals.RUN_KEY_TAG == "dagster/run_key"
    # Run retries: the failed run names its retry, and says whether one will come (checkpoint sensors follow them).
    assert internals.AUTO_RETRY_RUN_ID_TAG == "dagster/auto_retry_run_id"
    assert internals.WILL_RETRY_TAG == "dagster/will_retry"
    # The maintenance guard makes a retry the daemon dropped as the daemon makes it (maintenance_jobs/lost_runs.py).
    assert internals.RETRY_NUMBER_TAG == "dagster/retry_number"
    assert {"dagster/will_retry", "dagster/auto_retry_run_id", "dagster/retry_number"} <= set(
        internals.TAGS_TO_MAYBE_OMIT_ON_RETRY)
    from dagster._daemon.auto_run_reexecution.event_log_consumer import _create_cursor_key
    assert internals.RETRY_CONSUMER_CURSOR_KEY == _create_cursor_key(dg.DagsterEventType.RUN_FAILURE)
    assert set(inspect.signature(dg.DagsterInstance.create_run).parameters) >= {
        "parent_run_id", "root_run_id", "execution_plan_snapshot", "job_snapshot", "asset_graph", "remote_job_origin"}
    # The instance API the schedulers page reads the state through.
    assert callable(dg.DagsterInstance.get_instigator_state)


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
