"""A key sent in the query string never reaches uvicorn's access log (the log config `maintenance-api` runs with)."""

from __future__ import annotations

import logging

import httpx
import pytest
from fastapi import FastAPI

from control_api.access_log import ACCESS_LOGGER, DropQueryString, uvicorn_log_config
from local_stack.stack import free_port
from tests.control_api.conftest import API_KEY, serve

pytestmark = pytest.mark.unit


def _access_record(path: str) -> logging.LogRecord:
    # What uvicorn's h11/httptools protocols log: (client_addr, method, full_path, http_version, status_code).
    return logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                             ("127.0.0.1:5000", "GET", path, "1.1", 200), None)


@pytest.mark.parametrize("path", [f"/executions?api_key={API_KEY}", f"/tasks?limit=5&token={API_KEY}&x=1",
                                  f"/health?{API_KEY}"])
def test_the_filter_drops_the_query_string_from_access_records(path: str) -> None:
    record = _access_record(path)
    assert DropQueryString().filter(record)
    message = record.getMessage()
    assert API_KEY not in message
    assert f"GET {path.split('?')[0]} HTTP/1.1" in message


def test_a_real_server_logs_no_query_string(tmp_path) -> None:
    app = FastAPI()

    @app.get("/executions")
    def executions() -> list[int]:
        return []

    log_file = tmp_path / "access.log"
    log_config = uvicorn_log_config()
    log_config["handlers"]["access"] = {"formatter": "access", "class": "logging.FileHandler",
                                        "filename": str(log_file)}
    port = free_port()
    server, thread = serve(app, port, log_config=log_config, log_level="info", access_log=True)
    try:
        for query in (f"api_key={API_KEY}", f"cursor=abc&secret={API_KEY}"):
            assert httpx.get(f"http://127.0.0.1:{port}/executions?{query}", timeout=10).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/nowhere?k={API_KEY}", timeout=10).status_code == 404
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        logging.getLogger(ACCESS_LOGGER).handlers.clear()  # the FileHandler; other tests log no access lines
    logged = log_file.read_text()
    assert logged.count('"GET /executions HTTP/1.1" 200') == 2, logged
    assert '"GET /nowhere HTTP/1.1" 404' in logged
    assert API_KEY not in logged and "?" not in logged
