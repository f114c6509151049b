"""Every error response the API gives, declared in its OpenAPI document with the body it really has.

Who answers what (so a client, or schemathesis's conformance checks, finds every status documented):
- RejectNulInUrl (app.py): 400 on any path; RequestLimits: 413 (body) and 431 (Authorization) on any path.
- ApiKeyMiddleware (auth.py): 401/403 on non-public paths (added by add_security_scheme).
- Exception handlers (app.py): 422 (request validation, TaskValidationError, a value the database refused) where
  a route takes input; 404/409 on the task routes; 502/503 on trigger; 503 wherever a database is read
  (sa.exc.OperationalError); CursorError 400 on /executions.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    """The body of every error answer: `detail` is a message, or FastAPI's list of validation errors (422)."""

    detail: str | list[dict[str, Any]] = Field(description="what went wrong; a list of errors for a 422 from "
                                                           "request validation")
    field: str | None = Field(None, description="the parameter or field at fault, when one is")
    error_id: str | None = Field(None, description="identifies the server-side log entry (503)")


_DESCRIPTIONS = {
    "400": "bad request (e.g. a NUL character in the URL, a malformed cursor)",
    "404": "no task with that name",
    "409": "a task with that name exists",
    "413": "request body too large",
    "422": "invalid input; `field` or the error list names what",
    "431": "Authorization header too large",
    "502": "the Dagster webserver refused the launch",
    "503": "a database or the Dagster webserver is unavailable",
}
# Routes that read a database (503 when it is down) and routes with named tasks (404) or writes (409).
_NO_DATABASE = {"/metrics", "/docs", "/docs/oauth2-redirect", "/openapi.json"}


def _codes(path: str, method: str, operation: dict[str, Any]) -> set[str]:
    codes = {"400", "413", "431"}
    if operation.get("parameters") or operation.get("requestBody"):
        codes.add("422")
    if path.startswith("/tasks"):
        codes.add("422")  # TaskValidationError / a value the database refused
        if "{task_name}" in path:
            codes.add("404")
        if (method, path) in (("post", "/tasks"), ("put", "/tasks/{task_name}")):
            codes.add("409")
        if path.endswith("/trigger"):
            codes |= {"502", "503"}
    if path not in _NO_DATABASE and not path.startswith("/docs"):
        codes.add("503")
    return codes


def add_error_responses(schema: dict[str, Any]) -> dict[str, Any]:
    """Declare ErrorBody and, on every operation, the error statuses it can answer (existing entries kept)."""
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    # FastAPI's own 422 schema names a shape only part of the 422s have: every 422 is an ErrorBody.
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            for code in _codes(path, method, operation) | ({"401", "403"} & set(responses)):
                entry = responses.setdefault(code, {"description": _DESCRIPTIONS.get(code, "error")})
                if code == "422" or "content" not in entry:
                    entry["content"] = content
    return schema
