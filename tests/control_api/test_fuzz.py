"""Schemathesis fuzzing of the OpenAPI document against the real app over HTTP: no input may cause a 5xx, and
every response conforms to the document (status code, content type, body schema, headers).

Every operation gets valid-shaped (positive) and schema-violating (negative) cases, a bounded number each so CI
stays fast; the registry and Dagster storage behind the app are real Postgres.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import FailureGroup, not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.control_api.conftest import API_KEY, RunningApi
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]
EXAMPLES_PER_OPERATION = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]


def test_fuzzed_requests_never_cause_a_server_error(api: RunningApi) -> None:
    auth = {"Authorization": f"Bearer {API_KEY}"}
    with api.client() as client:
        client.post("/tasks", json=task_body("fuzz_target"))  # something for the {task_name} routes to find
    schema = schemathesis.openapi.from_url(f"{api.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {"GET /tasks", "POST /tasks", "PUT /tasks/{task_name}",
                                                 "GET /executions", "GET /stats", "GET /schedulers", "GET /health"}
    server_errors: list[str] = []
    nonconforming: list[str] = []
    calls = 0
    unsatisfiable: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(mode, headers=auth))
            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def call(case) -> None:
                nonlocal calls
                response = case.call(base_url=api.base_url, headers=auth, timeout=30)
                calls += 1
                if response.status_code >= 500:
                    server_errors.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r}: "
                                         f"{response.status_code} {response.text[:200]}")
                # Whatever the input, the reply never carries a stack trace.
                assert "Traceback" not in response.text
                try:
                    case.validate_response(response, checks=CHECKS)
                except (AssertionError, FailureGroup) as exc:  # collected, reported together below
                    nonconforming.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r}: "
                                         f"{response.status_code} {str(exc)[:400]}")

            try:
                call()
            except Unsatisfiable:
                # Nothing to violate (no parameters, or only a free-form path string): no negative case exists.
                assert mode == GenerationMode.NEGATIVE, operation.label
                unsatisfiable.append(operation.label)
    assert server_errors == []
    assert nonconforming == []
    # Operations with constrained inputs did get negative cases.
    assert not set(unsatisfiable) & {"POST /tasks", "PUT /tasks/{task_name}", "GET /executions", "GET /tasks"}
    assert calls >= len(operations) * 4  # the fuzzing really sent requests
