"""The control API: the old scheduler's REST API (tasks, executions, stats) over the registry and Dagster.

`create_app(settings)` in `control_api.app` builds it; `python -m control_api` (console script
`maintenance-api`) serves it with uvicorn.
"""
