"""`/executions`: maintenance runs mapped to the old scheduler's execution records, cursor-paged."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from control_api.deps import ApiState, api_state
from control_api.executions import (
    EXECUTION_STATUSES,
    ExecutionPage,
    ExecutionQuery,
    list_executions,
)

router = APIRouter(tags=["executions"])
State = Annotated[ApiState, Depends(api_state)]
# pydantic-core evaluates `pattern` with its Rust regex engine, where `$` is the end of the text: "success\n" is
# refused (tests/control_api/test_tasks_api.py checks it).
StatusName = Annotated[str | None, Query(pattern="^(" + "|".join(EXECUTION_STATUSES) + ")$")]


@router.get("/executions", response_model=ExecutionPage)
async def executions(
    state: State,
    task_name: Annotated[str | None, Query(max_length=200)] = None,
    status_: Annotated[StatusName, Query(alias="status")] = None,
    service: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=300, description="next_cursor of the previous page")] = None,
):
    query = ExecutionQuery(task_name=task_name, service=service, status=status_, limit=limit, cursor=cursor)
    # Serialised once (FastAPI does not validate the built page again) and cached briefly.
    return await state.cached_response(("executions", query), lambda: list_executions(
        state.instance, query, state.settings.dagster_ui_url).model_dump_json())
