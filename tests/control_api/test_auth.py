"""The auth matrix over EVERY route: no key → 401, wrong key → 403, right key → through; public routes open."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest

from local_stack.embedded_postgres import drop_database, ensure_database
from local_stack.stack import free_port
from control_api.app import create_app
from control_api.config import DEFAULT_PUBLIC_PATHS, ApiSettings
from maintenance_jobs.database.migrate import upgrade
from tests.control_api.conftest import API_KEY, RunningApi, _dispose_storage_pools, serve
from tests.task_rows import task_body
from tests.conftest import pooled_postgres_storage

pytestmark = [pytest.mark.api, pytest.mark.integration]

# Built without touching a database (everything opens lazily), only to enumerate the routes.
_APP = create_app(ApiSettings(registry_url="postgresql+psycopg2://unused@127.0.0.1:1/x", api_key=API_KEY))


def _flatten(routes) -> list:
    flat = []
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI keeps included routers as one entry
        flat += _flatten(included.routes) if included is not None else [route]
    return flat


ROUTES = sorted(
    (method, route.path)
    for route in _flatten(_APP.routes)
    for method in (route.methods or set()) - {"HEAD", "OPTIONS"}
)
PROTECTED = [r for r in ROUTES if r[1] not in DEFAULT_PUBLIC_PATHS]
PUBLIC = [r for r in ROUTES if r[1] in DEFAULT_PUBLIC_PATHS]


@pytest.fixture(scope="module")
def shared_api(postgres_server_url: str, dagster_database_url: str, dagster_webserver_url: str) -> Iterator[RunningApi]:
    name = f"auth_{uuid.uuid4().hex[:10]}"
    registry_url = ensure_database(postgres_server_url, name)
    upgrade(registry_url)
    overrides = {"storage": pooled_postgres_storage(dagster_database_url)}
    with dg.instance_for_test(overrides=overrides) as instance:
        instance.wipe()
        settings = ApiSettings(registry_url=registry_url, api_key=API_KEY, dagster_database_url=dagster_database_url,
                               dagster_webserver_url=dagster_webserver_url)
        app = create_app(settings)
        server, thread = serve(app, free_port())
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield RunningApi(f"http://127.0.0.1:{port}", app, instance, registry_url)
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            _dispose_storage_pools(instance)
    drop_database(postgres_server_url, name)


def _request(api: RunningApi, method: str, path: str, key: str | None, **headers: str):
    url = re.sub(r"\{task_name\}", "auth_task", path)
    body = task_body("auth_task") if (method, path) == ("POST", "/tasks") else {"priority": 40}
    with api.client(key) as client:
        if method in ("POST", "PUT"):
            return client.request(method, url, json=body, headers=headers)
        return client.request(method, url, headers=headers)


def test_every_route_is_classified() -> None:
    paths = {path for _, path in ROUTES}
    assert {"/tasks", "/tasks/{task_name}", "/tasks/{task_name}/trigger", "/executions", "/stats", "/schedulers",
            "/health", "/metrics", "/docs", "/openapi.json"} <= paths
    assert {path for _, path in PUBLIC} == {"/health", "/metrics", "/docs", "/docs/oauth2-redirect", "/openapi.json",
                                           "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css", "/docs/favicon.png"}


@pytest.mark.parametrize(("method", "path"), PROTECTED, ids=[f"{m} {p}" for m, p in PROTECTED])
def test_protected_route_matrix(shared_api: RunningApi, method: str, path: str) -> None:
    missing = _request(shared_api, method, path, None)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert _request(shared_api, method, path, None, Authorization=f"Basic {API_KEY}").status_code == 401
    assert _request(shared_api, method, path, "wrong-key-0000000000000000").status_code == 403
    # A prefix of the right key is still wrong.
    assert _request(shared_api, method, path, API_KEY[:-1]).status_code == 403
    if method == "DELETE" or path != "/tasks":
        _request(shared_api, "POST", "/tasks", API_KEY)  # make sure the task the route names exists
    allowed = _request(shared_api, method, path, API_KEY)
    assert allowed.status_code not in (401, 403), allowed.text
    assert allowed.status_code < 500, allowed.text


@pytest.mark.parametrize(("method", "path"), PUBLIC, ids=[f"{m} {p}" for m, p in PUBLIC])
def test_public_routes_need_no_key(shared_api: RunningApi, method: str, path: str) -> None:
    response = _request(shared_api, method, path, None)
    assert response.status_code in (200, 503), response.text


def test_unknown_paths_reveal_nothing_without_a_key(shared_api: RunningApi) -> None:
    assert _request(shared_api, "GET", "/admin", None).status_code == 401
    assert _request(shared_api, "GET", "/admin", API_KEY).status_code == 404


def test_public_list_is_configurable(registry_url: str) -> None:
    app = create_app(ApiSettings(registry_url=registry_url, api_key=API_KEY, public_paths=frozenset({"/health"})))
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        import httpx

        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/docs").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/openapi.json").status_code == 401
    finally:
        server.should_exit = True
        thread.join(timeout=10)
