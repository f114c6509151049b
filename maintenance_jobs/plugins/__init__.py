"""Plug-in executors: each module exposes `async def execute(config: dict, settings) -> str` (raise on failure).

A task whose executor is not built in names a module here (or in `MAINTENANCE_PLUGIN_PACKAGE`), or an entry point in
the `maintenance_jobs.executors` group. An optional pydantic `Config` class validates the task's config.
"""
