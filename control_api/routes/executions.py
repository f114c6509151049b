"""`/executions` and `/tasks/{name}/history`: the execution history merged with the runs still live, in the old
scheduler's shape.

`/executions` answers the old scheduler's JSON list of executions; the next page is in a `Link: <...>; rel="next"`
header (RFC 8288), absent on the last page.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import AwareDatetime, TypeAdapter

from control_api.deps import ApiState, CachedPage, api_state
from control_api.executions import (
    CURSOR_PATTERN,
    EXECUTION_STATUSES,
    ExecutionItem,
    ExecutionQuery,
    list_executions,
)
from maintenance_jobs import registry as tasks_registry
from maintenance_jobs.execution_history.task_view import TaskHistory, bounded, task_history
from maintenance_jobs.limits import MAX_TASK_NAME_CHARS
from maintenance_jobs.models import TASK_NAME_PATTERN
from maintenance_jobs.settings import maintenance_timezone

router = APIRouter(tags=["executions"])
State = Annotated[ApiState, Depends(api_state)]
# pydantic-core evaluates `pattern` with its Rust regex engine, where `$` is the end of the text: "success\n" is
# refused (tests/control_api/test_tasks_api.py checks it).
StatusName = Annotated[str | None, Query(pattern="^(" + "|".join(EXECUTION_STATUSES) + ")$")]
# ISO 8601 with an offset (`2025-06-01T00:00:00Z`, `2025-06-01T12:00+12:00`): a time without one is ambiguous.
Since = Annotated[AwareDatetime | None, Query(description="triggered at or after (ISO 8601 with an offset)")]
Until = Annotated[AwareDatetime | None, Query(description="triggered before (ISO 8601 with an offset)")]
TaskName = Annotated[str, Path(json_schema_extra={"pattern": TASK_NAME_PATTERN, "maxLength": MAX_TASK_NAME_CHARS})]
DEFAULT_TASK_HISTORY_DAYS = 30
_ITEMS = TypeAdapter(list[ExecutionItem])
LINK_HEADER = {
    "Link": {
        "description": 'The next page: `</executions?...&cursor=...>; rel="next"` with the same filters and limit; '
                       "absent on the last page.",
        "schema": {"type": "string"},
    },
}


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def next_page_link(root_path: str, query: ExecutionQuery, next_cursor: str) -> str:
    """The `Link` header value of the page after this one: the same filters and limit, the next cursor."""
    params = {"task_name": query.task_name, "status": query.status, "service": query.service,
              "since": _iso(query.since), "until": _iso(query.until), "limit": query.limit, "cursor": next_cursor}
    target = f"{root_path}/executions?{urlencode({k: v for k, v in params.items() if v is not None})}"
    return f'<{target}>; rel="next"'


@router.get("/executions", response_model=list[ExecutionItem],
            responses={200: {"description": "Executions, newest first (by triggered_at, then run id)",
                             "headers": LINK_HEADER}})
async def executions(
    request: Request,
    state: State,
    task_name: Annotated[str | None, Query(max_length=200)] = None,
    status_: Annotated[StatusName, Query(alias="status")] = None,
    service: Annotated[str | None, Query(max_length=100)] = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=300, json_schema_extra={"pattern": CURSOR_PATTERN},
                                        description='from the `Link: <...>; rel="next"` header of the previous '
                                                    "page (follow that link unchanged)")] = None,
):
    query = ExecutionQuery(task_name=task_name, service=service, status=status_,
                           since=bounded(since, "since") if since else None,
                           until=bounded(until, "until") if until else None, limit=limit, cursor=cursor)
    root_path = request.scope.get("root_path", "")

    def page() -> CachedPage:
        result = list_executions(state.dagster, state.prepared_registry(), query, state.settings.dagster_ui_url)
        headers = (("Link", next_page_link(root_path, query, result.next_cursor)),) if result.next_cursor else ()
        return CachedPage(_ITEMS.dump_json(result.items), headers)

    # Serialised once (FastAPI does not validate the built page again) and cached briefly, with its Link header.
    return await state.cached_response(("executions", root_path, query), page)


@router.get("/tasks/{task_name}/history", response_model=TaskHistory,
            summary="Each run the task's schedule expected in a range: ran (and how it ended) or missed (and why)")
def history_of_task(
    task_name: TaskName,
    state: State,
    since: Annotated[AwareDatetime | None, Query(description="start of the range, ISO 8601 with an offset "
                                                 f"(default: {DEFAULT_TASK_HISTORY_DAYS} days before until)")] = None,
    until: Annotated[AwareDatetime | None, Query(description="end of the range (default and at most: now)")] = None,
) -> TaskHistory:
    engine = state.prepared_registry()
    task = tasks_registry.get_task(engine, task_name)
    now = dt.datetime.now(dt.UTC)
    since = bounded(since, "since") if since else None
    until = bounded(until, "until") if until else max(now, since or now)  # a future `since` alone: an empty range
    since = since or until - dt.timedelta(days=DEFAULT_TASK_HISTORY_DAYS)
    return task_history(engine, state.dagster, task, since, until, now, maintenance_timezone(),
                        state.settings.dagster_ui_url)
