"""`/tasks`: the task registry's CRUD and manual trigger (registry errors become 404/409/422 in `app.py`)."""

from __future__ import annotations

import copy
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Body, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from control_api.deps import ApiState, api_state, registry
from maintenance_jobs import registry as tasks_registry
from maintenance_jobs.limits import MAX_TASK_NAME_CHARS
from maintenance_jobs.models import TASK_NAME_PATTERN, Task, TaskSpec, TaskValidationError, with_problem
from maintenance_jobs.trigger import trigger_task

router = APIRouter(prefix="/tasks", tags=["tasks"])
Registry = Annotated[sa.Engine, Depends(registry)]
State = Annotated[ApiState, Depends(api_state)]



def _optional(field: FieldInfo) -> tuple[Any, FieldInfo]:
    # Left out means unchanged; null is not a value of any field, so it is refused (422) and not documented.
    info = copy.copy(field)
    info.default = PydanticUndefined
    info.default_factory = None
    return field.annotation, FieldInfo.merge_field_infos(info, default=None)


def _no_defaults(schema: dict[str, Any]) -> None:
    # A left-out field keeps its value: there is no default to document (and null is not a value).
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


# Every writable field optional: a PUT changes only what it sends (the registry re-validates the merged row).
TaskUpdate = create_model(
    "TaskUpdate",
    __config__=ConfigDict(extra="forbid", strict=True, json_schema_extra=_no_defaults),
    **{name: _optional(field) for name, field in TaskSpec.model_fields.items()},
)
TaskName = Annotated[str, Path(json_schema_extra={"pattern": TASK_NAME_PATTERN, "maxLength": MAX_TASK_NAME_CHARS})]


def reject_nul(value: Any, field: str) -> None:
    """TaskValidationError naming the first string (key or value) holding NUL, which Postgres cannot store."""
    if isinstance(value, str) and "\x00" in value:
        raise TaskValidationError(field, "must not contain NUL characters")
    if isinstance(value, dict):
        for key, item in value.items():
            reject_nul(key, f"{field}.{key}" if field else str(key))
            reject_nul(item, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            reject_nul(item, f"{field}.{index}")


class Triggered(BaseModel):
    run_id: str
    task_name: str
    triggered_by: str
    status: str
    dagster_url: str


class Deleted(BaseModel):
    deleted: str


@router.get("", response_model=list[Task], summary="List tasks (by priority, then name)")
def list_tasks(engine: Registry, enabled: bool | None = None, service: Annotated[str | None, Query()] = None):
    # `problem` says when the current settings refuse a task's stored config (it is never run until fixed).
    return [with_problem(task) for task in tasks_registry.list_tasks(engine, enabled=enabled, service=service)]


@router.get("/{task_name}", response_model=Task)
def get_task(task_name: TaskName, engine: Registry):
    return with_problem(tasks_registry.get_task(engine, task_name))


@router.post("", response_model=Task, status_code=201)
def create_task(spec: TaskSpec, engine: Registry, state: State):
    data = spec.model_dump()
    reject_nul(data, "")
    created = tasks_registry.create_task(engine, data)
    state.responses.clear()  # /stats counts enabled tasks: this client must see its own write
    return with_problem(created)


@router.put("/{task_name}", response_model=Task, summary="Change some fields of a task")
def update_task(task_name: TaskName, engine: Registry, changes: Annotated[TaskUpdate, Body()], state: State):
    data: dict[str, Any] = changes.model_dump(exclude_unset=True)
    reject_nul(data, "")
    updated = tasks_registry.update_task(engine, task_name, data)
    state.responses.clear()
    return with_problem(updated)


@router.delete("/{task_name}", response_model=Deleted)
def delete_task(task_name: TaskName, engine: Registry, state: State):
    tasks_registry.delete_task(engine, task_name)
    state.responses.clear()
    return Deleted(deleted=task_name)


@router.post("/{task_name}/trigger", response_model=Triggered, summary="Queue a run of the task now")
def trigger(task_name: TaskName, engine: Registry, state: State):
    task = tasks_registry.get_task(engine, task_name)
    run_id = trigger_task(state.webserver, task, triggered_by="manual")
    state.responses.clear()  # the new run must be in this client's next /executions page
    return Triggered(
        run_id=run_id,
        task_name=task.task_name,
        triggered_by="manual",
        status="pending",
        dagster_url=f"{state.settings.dagster_ui_url}/runs/{run_id}",
    )
