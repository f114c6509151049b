"""The control API: the old scheduler's REST API (tasks, executions, stats) over the registry and Dagster.

`create_app(settings)` in `maintenance_jobs.api.app` builds it; `python -m maintenance_jobs.api` (console script
`maintenance-api`) serves it with uvicorn.
"""
