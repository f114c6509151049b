"""Size limits of task rows and of control API requests, in one place (README: "Limits")."""

from __future__ import annotations

# Task fields (validate_task, so the API's 422 and the registry agree).
MAX_TASK_NAME_CHARS = 200
MAX_SERVICE_CHARS = 100
MAX_EXECUTOR_CHARS = 100
MAX_CREATED_BY_CHARS = 100
MAX_DESCRIPTION_CHARS = 2_000
MAX_CONFIG_JSON_BYTES = 64 * 1024  # the task's config, serialised as compact JSON (UTF-8)
# Arrays/objects open at once, counted from the task object (its config is level 2): refused before any recursion,
# in request bodies (422) and in validate_task.
MAX_NESTING_DEPTH = 32

# Control API requests (control_api.app.RequestLimits), refused before any route or auth runs.
MAX_REQUEST_BODY_BYTES = 1024 * 1024  # 413 above this
MAX_AUTHORIZATION_HEADER_BYTES = 8 * 1024  # 431 above this
