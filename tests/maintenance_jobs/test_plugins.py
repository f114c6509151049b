"""Plug-in executors: found by module name in a configurable package or by entry point, run inside an op."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from maintenance_jobs.executors.plugins import PluginNotFound, load_plugin, run_plugin
from maintenance_jobs.jobs import example_executor_job, plugin_executor_job
from maintenance_jobs.models import TaskValidationError, validate_task
from maintenance_jobs.settings import MaintenanceSettings
from maintenance_jobs.tags import TAG_OUTPUT

pytestmark = pytest.mark.executor


def write_module(root: Path, dotted: str, source: str) -> None:
    path = root.joinpath(*dotted.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(root).parents:
        if str(parent) != ".":
            (root / parent / "__init__.py").touch()
    path.write_text(textwrap.dedent(source))


@pytest.fixture
def plugin_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith(("homelab_plugins", "ep_plugins"))]:
        del sys.modules[name]


def test_shipped_example_plugin_runs_in_the_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINTENANCE_DISK_USAGE_ROOTS", str(tmp_path))
    config = {"paths": [str(tmp_path)], "min_free_percent": 0}
    validate_task({"task_name": "disk", "service": "s", "executor": "disk_usage_executor", "config": config})
    with dg.instance_for_test() as instance:
        ok = plugin_executor_job.execute_in_process(
            run_config={
                "ops": {"run_plugin_executor": {"config": {"executor": "disk_usage_executor", "config_json": json.dumps(config)}}}
            },
            instance=instance,
        )
        assert f"{tmp_path}: " in ok.output_for_node("run_plugin_executor")
        assert "% free" in instance.get_run_by_id(ok.run_id).tags[TAG_OUTPUT]
        full = {**config, "min_free_percent": 100}
        failed = plugin_executor_job.execute_in_process(
            run_config={
                "ops": {"run_plugin_executor": {"config": {"executor": "disk_usage_executor", "config_json": json.dumps(full)}}}
            },
            instance=instance,
            raise_on_error=False,
        )
        assert not failed.success
        error = instance.get_run_by_id(failed.run_id).tags["racing/error"]
        assert error.startswith("disk_usage_executor failed: RuntimeError: below 100.0% free")


def test_plugin_from_a_configured_package(plugin_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_module(
        plugin_root,
        "homelab_plugins.prune_images",
        """
        async def execute(config: dict, settings) -> str:
            return f"pruned {config['keep']} in {settings.timezone}"
        """,
    )
    monkeypatch.setenv("MAINTENANCE_PLUGIN_PACKAGE", "homelab_plugins")
    plugin = load_plugin("prune_images")
    assert run_plugin(plugin, {"keep": 3}, MaintenanceSettings(timezone="UTC")) == "pruned 3 in UTC"
    # The registry accepts the executor name once the package provides it.
    validate_task({"task_name": "p", "service": "s", "executor": "prune_images", "config": {"keep": 3}})


def test_plugin_from_an_entry_point(plugin_root: Path) -> None:
    write_module(
        plugin_root,
        "ep_plugins.vacuum",
        """
        async def execute(config: dict, settings) -> str:
            return "vacuumed"
        """,
    )
    dist = plugin_root / "ep_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[maintenance_jobs.executors]\nvacuum_db = ep_plugins.vacuum\n")
    plugin = load_plugin("vacuum_db")
    assert run_plugin(plugin, {}, MaintenanceSettings()) == "vacuumed"


def test_plugins_must_be_async_and_exist(plugin_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_module(plugin_root, "homelab_plugins.sync_one", "def execute(config, settings):\n    return 'x'\n")
    monkeypatch.setenv("MAINTENANCE_PLUGIN_PACKAGE", "homelab_plugins")
    with pytest.raises(PluginNotFound, match="async def execute"):
        load_plugin("sync_one")
    with pytest.raises(PluginNotFound, match="unknown executor 'absent'"):
        load_plugin("absent")
    with pytest.raises(PluginNotFound, match="not a valid executor name"):
        load_plugin("os.path")


def test_example_executor_logs_waits_and_returns(caplog: pytest.LogCaptureFixture) -> None:
    with dg.instance_for_test() as instance:
        result = example_executor_job.execute_in_process(
            run_config={"ops": {"run_example_executor": {"config": {"message": "ping", "delay_seconds": 0.2}}}},
            instance=instance,
        )
        records = instance.all_logs(result.run_id)
    assert result.output_for_node("run_example_executor") == "Example task completed: ping (waited 0.2s)"
    assert any(r.user_message == "ping" for r in records)
    start, end = (
        next(r.timestamp for r in records if r.dagster_event and r.dagster_event.event_type_value == kind)
        for kind in ("STEP_START", "STEP_SUCCESS")
    )
    assert end - start >= 0.2


@pytest.mark.parametrize("path", ["/etc/shadow", "/root", "/etc/no-such-file", "/data/../etc", "relative/path"])
def test_disk_usage_paths_outside_its_roots_are_refused_alike_at_write_and_at_run(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plug-in is no oracle for host paths: outside its roots every path gets the same refusal, whether it
    exists or not, when the task is written and again in the run (whose worker may have narrower roots)."""
    monkeypatch.setenv("MAINTENANCE_DISK_USAGE_ROOTS", str(tmp_path))
    config = {"paths": [path]}
    with pytest.raises(TaskValidationError) as info:
        validate_task({"task_name": "disk", "service": "s", "executor": "disk_usage_executor", "config": config})
    assert info.value.field == "config.paths"
    assert "exist" not in info.value.message and "ermission" not in info.value.message
    with dg.instance_for_test() as instance:
        refused = plugin_executor_job.execute_in_process(
            run_config={"ops": {"run_plugin_executor": {"config": {
                "executor": "disk_usage_executor", "config_json": json.dumps(config)}}}},
            instance=instance,
            raise_on_error=False,
        )
        tags = instance.get_run_by_id(refused.run_id).tags
    assert not refused.success
    assert tags["racing/outcome"] == "failed"
    assert tags["racing/error"].startswith("disk_usage_executor config refused: paths:")
