"""`/executions`: maintenance runs mapped to the old scheduler's execution records, cursor-paged.

The body is the old scheduler's JSON list of executions; the next page is in a `Link: <...>; rel="next"` header
(RFC 8288), absent on the last page.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from pydantic import TypeAdapter

from control_api.deps import ApiState, CachedPage, api_state
from control_api.executions import (
    CURSOR_PATTERN,
    EXECUTION_STATUSES,
    ExecutionItem,
    ExecutionQuery,
    list_executions,
)

router = APIRouter(tags=["executions"])
State = Annotated[ApiState, Depends(api_state)]
# pydantic-core evaluates `pattern` with its Rust regex engine, where `$` is the end of the text: "success\n" is
# refused (tests/control_api/test_tasks_api.py checks it).
StatusName = Annotated[str | None, Query(pattern="^(" + "|".join(EXECUTION_STATUSES) + ")$")]
_ITEMS = TypeAdapter(list[ExecutionItem])
LINK_HEADER = {
    "Link": {
        "description": 'The next page: `</executions?...&cursor=...>; rel="next"` with the same filters and limit; '
                       "absent on the last page.",
        "schema": {"type": "string"},
    },
}


def next_page_link(root_path: str, query: ExecutionQuery, next_cursor: str) -> str:
    """The `Link` header value of the page after this one: the same filters and limit, the next cursor."""
    params = {"task_name": query.task_name, "status": query.status, "service": query.service,
              "limit": query.limit, "cursor": next_cursor}
    target = f"{root_path}/executions?{urlencode({k: v for k, v in params.items() if v is not None})}"
    return f'<{target}>; rel="next"'


@router.get("/executions", response_model=list[ExecutionItem],
            responses={200: {"description": "Executions, newest first", "headers": LINK_HEADER}})
async def executions(
    request: Request,
    state: State,
    task_name: Annotated[str | None, Query(max_length=200)] = None,
    status_: Annotated[StatusName, Query(alias="status")] = None,
    service: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=300, json_schema_extra={"pattern": CURSOR_PATTERN},
                                        description='from the `Link: <...>; rel="next"` header of the previous '
                                                    "page (follow that link unchanged)")] = None,
):
    query = ExecutionQuery(task_name=task_name, service=service, status=status_, limit=limit, cursor=cursor)
    root_path = request.scope.get("root_path", "")

    def page() -> CachedPage:
        result = list_executions(state.instance, query, state.settings.dagster_ui_url)
        headers = (("Link", next_page_link(root_path, query, result.next_cursor)),) if result.next_cursor else ()
        return CachedPage(_ITEMS.dump_json(result.items), headers)

    # Serialised once (FastAPI does not validate the built page again) and cached briefly, with its Link header.
    return await state.cached_response(("executions", root_path, query), page)
