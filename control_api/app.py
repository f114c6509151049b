"""The FastAPI app: routes, API-key middleware, error mapping (no stack traces out) and the metrics registry."""

from __future__ import annotations

import gc
import logging
import math
import threading
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter, multiprocess
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_api.auth import ApiKeyMiddleware, add_security_scheme
from control_api.config import ApiSettings, settings_from_env
from control_api.deps import ApiState, DagsterStorageNotSet
from control_api.docs_page import add_docs_routes
from control_api.executions import CursorError
from control_api.openapi_errors import add_error_responses
from control_api.routes.executions import router as executions_router
from control_api.routes.status import router as status_router
from control_api.routes.tasks import router as tasks_router
from maintenance_jobs.execution_history.task_view import InvalidRange
from maintenance_jobs.limits import MAX_AUTHORIZATION_HEADER_BYTES, MAX_NESTING_DEPTH, MAX_REQUEST_BODY_BYTES
from maintenance_jobs.registry import DuplicateTask, TaskNotFound, TaskValidationError
from maintenance_jobs.text_rules import json_nesting_over
from maintenance_jobs.trigger import TaskNotRunnable, TaskRefused
from orchestration_core.dagster_webserver import LaunchRejected, WebserverUnavailable
from platform_monitoring.catalog import CatalogUnavailable
from platform_monitoring.metrics import StorageCollector

log = logging.getLogger("control_api")


class RequestCounter:
    """Counts every response (401s included) by method, route template and status."""

    def __init__(self, app: ASGIApp, counter: Counter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status_code = 500

        async def remember(message: Message) -> None:
            nonlocal status_code
            if message["type"] == "http.response.start":
                status_code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, remember)
        finally:
            route = scope.get("route")
            # Route templates, never raw paths: task names must not become label values.
            self.counter.labels(scope["method"], getattr(route, "path", "unmatched"), str(status_code)).inc()


class RejectNulInUrl:
    """Postgres text cannot hold NUL: a %00 in the path or query is a client error (400), not a driver crash."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"]):
            response = _error(400, "NUL characters are not allowed in the URL", field="url")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class RequestLimits:
    """Refuse oversize requests before auth or any route runs: an Authorization header over
    MAX_AUTHORIZATION_HEADER_BYTES (431), a body over MAX_REQUEST_BODY_BYTES (413), whether it declares its
    Content-Length or arrives chunked (it is read up to the limit, then replayed to the app), and a body nesting
    arrays/objects deeper than MAX_NESTING_DEPTH (422)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        if any(name == b"authorization" and len(value) > MAX_AUTHORIZATION_HEADER_BYTES for name, value in headers):
            await _error(431, f"the Authorization header is over {MAX_AUTHORIZATION_HEADER_BYTES} bytes",
                         field="Authorization")(scope, receive, send)
            return
        too_large = _error(413, f"the request body is over {MAX_REQUEST_BODY_BYTES} bytes")
        declared = next((value for name, value in headers if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > MAX_REQUEST_BODY_BYTES:
            await too_large(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS") and declared is None:
            await self.app(scope, receive, send)
            return
        body, more = [], True
        size = 0
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.append(message.get("body", b""))
            size += len(body[-1])
            more = message.get("more_body", False)
            if size > MAX_REQUEST_BODY_BYTES:
                await too_large(scope, receive, send)
                return
        if json_nesting_over(b"".join(body), MAX_NESTING_DEPTH):
            # Refused before any parser runs: JSON nested this deep made the parsers and validators recurse past
            # Python's limit (a 500 and a 290 KB traceback per request). One log line, no traceback.
            log.warning("refused %s %s: body nests deeper than %d levels", scope["method"], scope["path"],
                        MAX_NESTING_DEPTH)
            await _error(422, f"the request body nests deeper than {MAX_NESTING_DEPTH} levels (arrays and objects)",
                         field="body")(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _error(status_code: int, detail: str, **extra: str) -> JSONResponse:
    # json_safe: a message or field may quote the client's input (e.g. a config key holding a lone surrogate).
    return JSONResponse(json_safe({"detail": detail, **extra}), status_code=status_code)


def json_safe(value: object) -> object:
    """`value` with what JSON cannot carry made printable: non-finite floats as text ("nan", "inf") and lone
    surrogates backslash-escaped. FastAPI echoes the bad input in its 422 detail; rendering NaN or "\\ud800" raised
    and turned a client error into a 500."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer (detail = the error list), made renderable whatever the input held, with `field`
        # naming the first parameter or body field at fault, as the other 422s do (openapi_errors.ErrorBody).
        errors = exc.errors()
        body: dict = {"detail": json_safe(jsonable_encoder(errors))}
        loc = errors[0].get("loc", ()) if errors else ()
        if len(loc) > 1 and loc[0] in ("body", "query", "path", "header"):
            body["field"] = json_safe(".".join(str(part) for part in loc[1:]))
        return JSONResponse(body, status_code=422)

    @app.exception_handler(TaskNotFound)
    async def not_found(_: Request, exc: TaskNotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(DuplicateTask)
    async def duplicate(_: Request, exc: DuplicateTask) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(TaskValidationError)
    async def invalid(_: Request, exc: TaskValidationError) -> JSONResponse:
        return _error(422, str(exc), field=exc.field)

    @app.exception_handler(TaskRefused)
    async def refused(_: Request, exc: TaskRefused) -> JSONResponse:
        # The row is stored but the settings refuse its config: a conflict the client resolves by changing the task.
        return _error(409, str(exc), field="config")

    @app.exception_handler(TaskNotRunnable)
    async def not_runnable(_: Request, exc: TaskNotRunnable) -> JSONResponse:
        # A deployment setting is missing: the service cannot do this now; nothing was launched.
        return _error(503, str(exc))

    @app.exception_handler(DagsterStorageNotSet)
    async def no_dagster_storage(_: Request, exc: DagsterStorageNotSet) -> JSONResponse:
        # A deployment setting is missing: the pages over runs cannot answer until it is set.
        return _error(503, str(exc))

    @app.exception_handler(WebserverUnavailable)
    async def webserver_down(_: Request, exc: WebserverUnavailable) -> JSONResponse:
        return _error(503, f"cannot launch runs now: {exc}")

    @app.exception_handler(CatalogUnavailable)
    async def no_catalog(request: Request, exc: CatalogUnavailable) -> JSONResponse:
        # The webserver has not answered since this process started: what exists is unknown, not empty.
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return _error(503, "schedules and sensors are unknown now: the Dagster webserver has not listed them; "
                           "try again later")

    @app.exception_handler(LaunchRejected)
    async def launch_rejected(_: Request, exc: LaunchRejected) -> JSONResponse:
        return _error(502, f"the Dagster webserver refused the launch: {exc}")

    @app.exception_handler(InvalidRange)
    async def invalid_range(_: Request, exc: InvalidRange) -> JSONResponse:
        return _error(422, str(exc), field=exc.field)

    @app.exception_handler(CursorError)
    async def bad_cursor(_: Request, exc: CursorError) -> JSONResponse:
        return _error(400, str(exc), field="cursor")

    @app.exception_handler(sa.exc.DataError)
    async def rejected_value(request: Request, exc: sa.exc.DataError) -> JSONResponse:
        # Backstop: input validation should have caught it, but a value the database refuses is still bad input.
        log.warning("value rejected by the database on %s %s: %s", request.method, request.url.path, exc.orig)
        return _error(422, "a value was rejected by the database (e.g. out of range or an invalid character)")

    @app.exception_handler(sa.exc.OperationalError)
    async def database_down(request: Request, exc: sa.exc.OperationalError) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error("error %s: database unavailable on %s %s: %s", error_id, request.method, request.url.path, exc)
        return _error(503, "database unavailable, try again later", error_id=error_id)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        # The trace goes to the log under an id; the client gets the id only (no trace, no URLs, no secrets).
        error_id = uuid.uuid4().hex[:12]
        log.exception("error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error", error_id=error_id)


def catalog_at_start(catalog: Callable[[], object], freeze_heap: bool) -> None:
    """Ask the webserver for the catalog of schedules, sensors and jobs, then (`freeze_heap`) move everything the
    start-up created out of the garbage collector's sight.

    The process holds the heap of its imports (FastAPI, pydantic, SQLAlchemy), nearly all of it alive until it exits,
    and a full collection scans it all, during which this worker answers nothing (the one-in-a-hundred slow request
    of bench/api_latency.py). Frozen (`gc.freeze`), it is left out of every later collection; objects freed by reference
    counting are still freed, only a reference cycle among them that dies later is kept. Off for in-process apps
    (tests), whose heap is the test runner's.
    """
    try:
        catalog()
    except CatalogUnavailable:
        pass  # logged by the catalog; asked again by the first request that needs it
    if freeze_heap:
        gc.collect()
        gc.freeze()
        log.info("start-up heap frozen: %d objects out of the garbage collector's scans", gc.get_freeze_count())


def create_app(settings: ApiSettings, freeze_startup_heap: bool = False) -> FastAPI:
    state = ApiState(settings)
    metrics_registry = CollectorRegistry(auto_describe=False)
    # Under `--workers N` every worker counts its own requests into PROMETHEUS_MULTIPROC_DIR and /metrics (served by
    # any one worker) sums them; registering the counter itself would expose just the serving worker's share.
    multiprocess_dir = settings.prometheus_multiproc_dir
    requests = Counter("maintenance_api_requests", "Requests served by the control API",
                       ["method", "route", "status"], registry=None if multiprocess_dir else metrics_registry)
    if multiprocess_dir:
        multiprocess.MultiProcessCollector(metrics_registry, path=multiprocess_dir)
    state.metrics_registry = metrics_registry
    metrics_registry.register(StorageCollector(
        dagster=lambda: state.dagster,
        config=lambda: state.instance_config,
        registry=lambda: state.registry,
        racing=lambda: state.racing,
        catalog=lambda: state.catalog(),
        heartbeat_max_age_seconds=settings.heartbeat_max_age_seconds,
        code_servers=settings.code_servers,
    ))

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        # Ask the webserver for the schedules and sensors now, so the first /health lists them within its deadline
        # instead of reporting that probe timed out.
        threading.Thread(target=catalog_at_start, args=(state.catalog, freeze_startup_heap), name="catalog",
                         daemon=True).start()
        yield
        state.close()

    app = FastAPI(
        title="Maintenance control API",
        version="1.0.0",
        description="The maintenance scheduler's REST API over the task registry and Dagster's storage.",
        lifespan=lifespan,
        redoc_url=None,  # one docs page (/docs) is enough surface
        docs_url=None,  # served by add_docs_routes with local assets
    )
    add_docs_routes(app, app.title)
    app.state.api = state
    _install_error_handlers(app)
    app.include_router(tasks_router)
    app.include_router(executions_router)
    app.include_router(status_router)

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            app.openapi_schema = add_error_responses(add_security_scheme(schema, settings.public_paths))
        return app.openapi_schema

    app.openapi = openapi
    app.add_middleware(RejectNulInUrl)
    app.add_middleware(ApiKeyMiddleware, api_key=settings.api_key, public_paths=settings.public_paths)
    app.add_middleware(RequestLimits)
    app.add_middleware(RequestCounter, counter=requests)
    return app


def app_from_env() -> FastAPI:
    """The app of one `maintenance-api --workers N` worker process (uvicorn imports it by name)."""
    # --insecure-dev reaches workers as _MAINTENANCE_API_INSECURE_DEV.
    return create_app(settings_from_env(), freeze_startup_heap=True)
