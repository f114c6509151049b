"""Task registry models: what a task row may hold, validated with messages that name the field."""

from __future__ import annotations

import calendar
import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from maintenance_jobs.executor_configs import BUILTIN_CONFIGS, ConfigBackupConfig, archive_name_problem
from maintenance_jobs.limits import (
    MAX_CONFIG_JSON_BYTES,
    MAX_CREATED_BY_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_EXECUTOR_CHARS,
    MAX_NESTING_DEPTH,
    MAX_SERVICE_CHARS,
    MAX_TASK_NAME_CHARS,
)
from maintenance_jobs.text_rules import check_label, nesting_depth_over
from maintenance_jobs.executors.plugins import PluginNotFound, load_plugin, validate_plugin_config
from maintenance_jobs.schedule import CronFields

# fullmatch, never match with `$`: `$` also matches before a trailing newline ("x\n" would pass).
_TASK_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_TASK_NAME_CHARS - 1}}}")
# The same rule for the OpenAPI document (JSON Schema patterns search, hence the anchors); the validator below
# checks it (with its own message).
TASK_NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_TASK_NAME_CHARS - 1}}}$"
PRIORITY_BANDS = "1-5 emergency, 10-30 user, 40-70 maintenance, 71-100 low"
STATUSES = ("success", "failed", "timeout", "canceled")


class TaskValidationError(ValueError):
    """A task definition was rejected; `field` names what is wrong (dotted for nested config keys)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class TaskSpec(BaseModel):
    """The writable part of a task row. Strict: `true` is not a priority and `"yes"` is not a boolean."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_name: str = Field(json_schema_extra={"pattern": TASK_NAME_PATTERN, "maxLength": MAX_TASK_NAME_CHARS})
    service: str = Field(min_length=1, max_length=MAX_SERVICE_CHARS)
    executor: str = Field(min_length=1, max_length=MAX_EXECUTOR_CHARS)
    priority: int = Field(default=50, ge=1, le=100, description=PRIORITY_BANDS)
    minute: int = Field(default=-1, ge=-1, le=59)
    hour: int = Field(default=-1, ge=-1, le=23)
    day_of_month: int = Field(default=-1, ge=-1, le=31)
    month: int = Field(default=-1, ge=-1, le=12)
    day_of_week: int = Field(default=-1, ge=-1, le=6, description="0 = Monday, -1 = any")
    enabled: bool = True
    description: str = Field(default="", max_length=MAX_DESCRIPTION_CHARS)
    config: dict[str, Any] = {}
    timeout_seconds: int = Field(default=3600, ge=1, le=86400)
    max_retries: int = Field(default=0, ge=0, le=10)
    created_by: str = Field(default="system", max_length=MAX_CREATED_BY_CHARS)

    @field_validator("task_name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _TASK_NAME.fullmatch(value):
            raise ValueError(
                f"must be 1-{MAX_TASK_NAME_CHARS} letters, digits, '_', '.' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("service", "description", "created_by")
    @classmethod
    def _showable(cls, value: str) -> str:
        return check_label(value)

    @field_validator("config")
    @classmethod
    def _config_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        size = len(text.encode("utf-8", "backslashreplace"))
        if size > MAX_CONFIG_JSON_BYTES:
            raise ValueError(f"is {size} bytes as JSON, over the limit of {MAX_CONFIG_JSON_BYTES}")
        return value

    @field_validator("day_of_month", "month")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("must be -1 (any) or start at 1")
        return value

    @property
    def cron_fields(self) -> CronFields:
        return CronFields(self.minute, self.hour, self.day_of_month, self.month, self.day_of_week)


class Task(TaskSpec):
    """A stored task row, with the fields the system maintains.

    `problem` is not stored: it is why the current settings refuse the row's executor config (set by the API and
    the dispatcher, which never run such a task), else None."""

    # A row read back is not input: lax, so a database's types (e.g. a float duration) load as they are.
    model_config = ConfigDict(extra="ignore", from_attributes=True, strict=False)

    id: int
    last_run: dt.datetime | None = None
    last_status: str | None = None
    last_duration_seconds: float | None = None
    retry_count: int = 0  # the retry number of the run last_status comes from (0: its first attempt)
    created_at: dt.datetime
    updated_at: dt.datetime
    problem: str | None = None


READ_ONLY_FIELDS = frozenset(Task.model_fields) - frozenset(TaskSpec.model_fields)


def _first_error(exc: ValidationError, prefix: str = "", missing_is_null: bool = False) -> TaskValidationError:
    """`missing_is_null`: a missing field and a null one get one message (a built-in executor's config, where the
    two have always been the same answer)."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in (prefix, *error["loc"]) if part != "") or "task"
    message = error["msg"].removeprefix("Value error, ")
    if error.get("input", "") is None and error["type"].endswith("_type") \
            or missing_is_null and error["type"] == "missing":
        message = "Field required (missing or null)"
    return TaskValidationError(field, message)


def check_storable(value: Any, field: str) -> None:
    """TaskValidationError naming the first value Postgres cannot store: a string (key or value) holding NUL or a lone
    surrogate (not encodable as UTF-8), or a non-finite float (NaN/Infinity, which JSON and JSONB cannot hold)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise TaskValidationError(field or "task", "must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise TaskValidationError(field or "task", "must be valid Unicode text (no lone surrogates)") from None
    elif isinstance(value, float) and not math.isfinite(value):
        raise TaskValidationError(field or "task", "must be a finite number")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{field}.{key}" if field else str(key)
            check_storable(key, name)
            check_storable(item, name)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_storable(item, f"{field}.{index}")


def validate_executor_config(executor: str, config: Mapping[str, Any]) -> None:
    """Reject unknown executors and configs the executor cannot accept."""
    if executor in BUILTIN_CONFIGS:
        try:
            BUILTIN_CONFIGS[executor].model_validate(dict(config))
        except ValidationError as exc:
            raise _first_error(exc, "config", missing_is_null=True) from None
        return
    try:
        plugin = load_plugin(executor)
    except PluginNotFound as exc:
        raise TaskValidationError("executor", str(exc)) from None
    try:
        validate_plugin_config(plugin, dict(config))
    except ValidationError as exc:
        raise _first_error(exc, "config") from None


def validate_task(data: Mapping[str, Any], *, check_config: bool = True) -> TaskSpec:
    """A validated task spec, or TaskValidationError naming the first bad field.

    `check_config=False` leaves the executor config to the caller: an update that changes neither the executor nor
    the config must succeed (e.g. disabling a task) even when the current settings refuse the stored config."""
    unknown = sorted(set(data) - set(TaskSpec.model_fields))
    if unknown:
        what = "is read-only" if unknown[0] in READ_ONLY_FIELDS else "is not a task field"
        raise TaskValidationError(unknown[0], what)
    if nesting_depth_over(dict(data), MAX_NESTING_DEPTH):
        raise TaskValidationError("config", f"nests deeper than {MAX_NESTING_DEPTH} levels (arrays and objects)")
    check_storable(dict(data), "")
    try:
        spec = TaskSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise _first_error(exc) from None
    if spec.month != -1 and spec.day_of_month != -1:
        longest = calendar.monthrange(2024, spec.month)[1]  # 2024 is a leap year: Feb 29 is allowed
        if spec.day_of_month > longest:
            raise TaskValidationError("day_of_month", f"{spec.day_of_month} never occurs in month {spec.month}")
    if check_config:
        validate_executor_config(spec.executor, spec.config)
        if spec.executor == "config_backup_executor":
            too_long = archive_name_problem(spec.task_name, ConfigBackupConfig.model_validate(spec.config))
            if too_long is not None:
                raise TaskValidationError(f"config.sources.{too_long[0]}.name", too_long[1])
    return spec


def config_problem(task: TaskSpec) -> str | None:
    """Why this process's settings refuse the task's executor config ("config.field: message"), or None.

    Settings can narrow after a task was written (backup roots, allowed hosts): such a row stays stored and is
    reported, never run."""
    try:
        validate_executor_config(task.executor, task.config)
    except TaskValidationError as exc:
        return str(exc)
    except Exception as exc:  # a plug-in that cannot even be imported here
        return f"executor: cannot be loaded ({type(exc).__name__})"
    return None


def with_problem(task: Task) -> Task:
    """`task` with `problem` set under this process's settings."""
    return task.model_copy(update={"problem": config_problem(task)})
