"""Finding and running plug-in executors by name."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
from importlib.metadata import entry_points
from typing import Any

from maintenance_jobs.settings import PLUGIN_ENTRY_POINT_GROUP, MaintenanceSettings, plugin_package

# A plain identifier, so a task row cannot make us import an arbitrary dotted module path.
_PLUGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: `$` would let "name\n" through


class PluginNotFound(LookupError):
    """No plug-in module or entry point has this name."""


def load_plugin(name: str, package: str | None = None) -> Any:
    """The plug-in called `name`: module `<package>.<name>`, else entry point `name` in `maintenance_jobs.executors`."""
    if not _PLUGIN_NAME.fullmatch(name):
        raise PluginNotFound(f"{name!r} is not a valid executor name")
    package = package or plugin_package()
    module_name = f"{package}.{name}"
    try:
        plugin = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name not in (module_name, package):  # the plug-in exists but one of its imports is missing
            raise
        plugin = None
    if plugin is None:
        matches = [ep for ep in entry_points(group=PLUGIN_ENTRY_POINT_GROUP) if ep.name == name]
        if not matches:
            raise PluginNotFound(f"unknown executor {name!r} (no module {module_name} and no entry point)")
        plugin = matches[0].load()
    execute = getattr(plugin, "execute", None)
    if execute is None or not inspect.iscoroutinefunction(execute):
        raise PluginNotFound(f"executor {name!r} has no `async def execute(config, settings)`")
    return plugin


def validate_plugin_config(plugin: Any, config: dict) -> None:
    """Validate `config` with the plug-in's optional pydantic `Config` class (raises pydantic.ValidationError)."""
    model = getattr(plugin, "Config", None)
    if model is not None and hasattr(model, "model_validate"):
        model.model_validate(config)


def run_plugin(plugin: Any, config: dict, settings: MaintenanceSettings) -> str:
    """Run the plug-in's coroutine to completion; its string is the run's output."""
    result = asyncio.run(plugin.execute(config, settings))
    return "" if result is None else str(result)
