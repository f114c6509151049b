"""The task endpoints over real HTTP against Postgres: CRUD, errors that name the field, trigger → a Dagster run."""

from __future__ import annotations

import dagster as dg
import httpx
import pytest

from control_api.app import create_app
from control_api.config import ApiSettings
from tests.control_api.conftest import API_KEY, RunningApi, answered, answered_health, serve
from tests.task_rows import task_body
from local_stack.stack import free_port

pytestmark = [pytest.mark.api, pytest.mark.integration]


def test_crud_cycle(api: RunningApi) -> None:
    with api.client() as client:
        created = client.post("/tasks", json=task_body("nightly", service="backups"))
        assert created.status_code == 201, created.text
        assert created.json()["task_name"] == "nightly" and created.json()["id"] > 0
        assert client.get("/tasks/nightly").json()["hour"] == 4
        names = [t["task_name"] for t in client.get("/tasks", params={"service": "backups"}).json()]
        assert names == ["nightly"]
        updated = client.put("/tasks/nightly", json={"priority": 60, "enabled": False})
        assert updated.status_code == 200, updated.text
        assert updated.json()["priority"] == 60 and updated.json()["enabled"] is False
        assert updated.json()["hour"] == 4  # untouched fields stay
        disabled = [t["task_name"] for t in client.get("/tasks", params={"enabled": "false"}).json()]
        assert "nightly" in disabled
        enabled = [t["task_name"] for t in client.get("/tasks", params={"enabled": "true"}).json()]
        assert "nightly" not in enabled
        assert client.delete("/tasks/nightly").json() == {"deleted": "nightly"}
        assert client.get("/tasks/nightly").status_code == 404
        assert client.delete("/tasks/nightly").status_code == 404


def test_duplicate_unknown_and_invalid_input(api: RunningApi) -> None:
    with api.client() as client:
        assert client.post("/tasks", json=task_body("dup")).status_code == 201
        duplicate = client.post("/tasks", json=task_body("dup"))
        assert duplicate.status_code == 409 and "dup" in duplicate.json()["detail"]
        assert client.put("/tasks/nope", json={"priority": 3}).status_code == 404
        assert client.post("/tasks/nope/trigger").status_code == 404
        # Schema-level errors name the field (FastAPI's detail list).
        bad_priority = client.post("/tasks", json=task_body("p", priority=500))
        assert bad_priority.status_code == 422
        assert bad_priority.json()["detail"][0]["loc"][-1] == "priority"
        unknown_field = client.post("/tasks", json={**task_body("u"), "colour": "red"})
        assert unknown_field.status_code == 422 and unknown_field.json()["detail"][0]["loc"][-1] == "colour"
        # Registry-level errors (executor config, day never occurring) name the field too.
        bad_config = client.post("/tasks", json=task_body("c", config={"message": "x", "delay_seconds": "soon"}))
        assert bad_config.status_code == 422 and bad_config.json()["field"] == "config.delay_seconds"
        bad_executor = client.post("/tasks", json=task_body("e", executor="no_such_executor", config={}))
        assert bad_executor.status_code == 422 and bad_executor.json()["field"] == "executor"
        feb30 = client.put("/tasks/dup", json={"month": 2, "day_of_month": 30})
        assert feb30.status_code == 422 and feb30.json()["field"] == "day_of_month"
        null_priority = client.put("/tasks/dup", json={"priority": None})
        assert null_priority.status_code == 422 and null_priority.json()["field"] == "priority"
        # Renaming onto a taken name is a conflict.
        assert client.post("/tasks", json=task_body("other")).status_code == 201
        assert client.put("/tasks/other", json={"task_name": "dup"}).status_code == 409
        malformed = client.post("/tasks", content=b'{"task_name": ', headers={"Content-Type": "application/json"})
        assert malformed.status_code == 422 and "JSON" in malformed.text
        assert client.get("/tasks", params={"enabled": "maybe"}).status_code == 422
        # Postgres cannot store NUL: a client error naming the field, not a driver crash.
        nul = client.post("/tasks", json=task_body("n", description="a\x00b"))
        assert nul.status_code == 422 and nul.json()["field"] == "description"
        nul_config = client.put("/tasks/dup", json={"config": {"message": "\x00", "delay_seconds": 0}})
        assert nul_config.status_code == 422 and nul_config.json()["field"] == "config.message"
        assert client.get("/tasks", params={"service": "a\x00"}).status_code == 400
        # Nothing was lost on the way: the first task is unchanged.
        assert client.get("/tasks/dup").json()["priority"] == 50


def test_trigger_launches_a_real_run_that_appears_in_executions(api: RunningApi) -> None:
    with api.client() as client:
        client.post("/tasks", json=task_body("pinger", service="infra", priority=10))
        triggered = client.post("/tasks/pinger/trigger")
        assert triggered.status_code == 200, triggered.text
        run_id = triggered.json()["run_id"]
        assert triggered.json()["dagster_url"] == f"http://dagster.test/runs/{run_id}"
        run = api.instance.get_run_by_id(run_id)
        assert run is not None and run.job_name == "example_executor"
        assert run.status == dg.DagsterRunStatus.QUEUED  # submitted to the queue (limit of 5 applies)
        assert run.tags["maintenance/triggered_by"] == "manual" and run.tags["orchestration/kind"] == "maintenance"
        assert run.run_config == {"ops": {"run_example_executor": {"config": {"message": "hi", "delay_seconds": 0}}}}
        items = client.get("/executions", params={"task_name": "pinger"}).json()
        assert [i["run_id"] for i in items] == [run_id]
        item = items[0]
        assert (item["status"], item["service"], item["priority"], item["triggered_by"]) == (
            "pending", "infra", 10, "manual")


def test_unexpected_errors_return_an_id_and_no_details(registry_url: str) -> None:
    # A storage URL whose driver does not exist: opening it raises an error that is not a database outage.
    broken = "nosuchdriver://dagster:hunter2@db:5432/dagster"
    app = create_app(ApiSettings(registry_url=registry_url, api_key=API_KEY, dagster_database_url=broken))
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        import httpx

        headers = {"Authorization": f"Bearer {API_KEY}"}
        response = httpx.get(f"http://127.0.0.1:{port}/executions", headers=headers)
        assert response.status_code == 500
        body = response.json()
        assert body["detail"] == "internal error" and len(body["error_id"]) == 12
        assert "hunter2" not in response.text and "Traceback" not in response.text
        health = httpx.get(f"http://127.0.0.1:{port}/health")
        assert health.status_code == 503 and "hunter2" not in health.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_health_is_503_when_the_registry_database_is_unreachable(pg_instance: dg.DagsterInstance,
                                                                  dagster_database_url: str) -> None:
    unreachable = "postgresql+psycopg2://nobody:secret-pw@127.0.0.1:1/registry"
    app = create_app(ApiSettings(registry_url=unreachable, api_key=API_KEY, dagster_database_url=dagster_database_url))
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        import httpx

        answers = []

        def ask() -> dict:
            answers.append(httpx.get(f"http://127.0.0.1:{port}/health", timeout=30))
            return answers[-1].json()

        # Asked again while a probe overran its 0.8 s deadline (at load ~20: "dagster_storage": "timed out").
        body = answered(ask)
        assert all(answer.status_code == 503 and "secret-pw" not in answer.text for answer in answers)
        assert body["registry_database"].startswith("unreachable") and body["dagster_storage"] == "ok", body
        tasks = httpx.get(f"http://127.0.0.1:{port}/tasks", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
        assert tasks.status_code == 503 and "secret-pw" not in tasks.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_health_is_200_with_daemon_heartbeat_ages(api: RunningApi) -> None:
    import time

    from dagster._daemon.types import DaemonHeartbeat

    # Every daemon this instance's configuration runs must beat (no sensor has ticked: the heartbeats decide).
    for daemon in api.instance.get_required_daemon_types():
        api.instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - 5, daemon, None, None))
    body = answered_health(api)  # asked again while a probe overran its 0.8 s deadline on a loaded host
    assert body["status"] == "ok" and body["scheduler_running"] is True and body["daemon_problems"] == []
    assert 4 <= body["daemon_heartbeat_age_seconds"]["SENSOR"] < 60
    stats = api.client().get("/stats").json()
    assert stats["scheduler_running"] is True and stats["concurrent_limit"] == 5


def test_trigger_without_a_reachable_webserver_is_503_and_launches_nothing(api_settings, pg_instance) -> None:

    from local_stack.stack import free_port
    from control_api.app import create_app
    from tests.control_api.conftest import serve

    settings = api_settings.model_copy(update={"dagster_webserver_url": f"http://127.0.0.1:{free_port()}"})
    server, thread = serve(create_app(settings), free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {API_KEY}"},
                          timeout=30) as client:
            assert client.post("/tasks", json=task_body("pinger")).status_code == 201
            answer = client.post("/tasks/pinger/trigger")
            assert answer.status_code == 503
            assert "cannot launch runs now" in answer.json()["detail"]
        assert pg_instance.get_runs() == []
    finally:
        server.should_exit = True
        thread.join(timeout=10)


DOC_SYNC = {"project": "fastapi", "upstream_repo": "https://github.com/tiangolo/fastapi.git",
            "docs_paths": ["docs"], "gitea_repo": "library/docs-fastapi"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("upstream_repo", "--upload-pack=touch /tmp/x"),
        ("upstream_repo", "file:///etc"),
        ("upstream_repo", "/srv/repo.git"),
        ("branch", "--orphan"),
        ("target_branch", "-D"),
        ("docs_paths", ["-x"]),
        ("gitea_repo", "-o/x"),
    ],
)
def test_doc_sync_configs_git_could_misread_are_refused_on_post_and_put(api: RunningApi, key: str, value) -> None:
    bad = {**DOC_SYNC, key: value}
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("sync", executor="doc_sync_executor", config=bad))
        assert posted.status_code == 422 and posted.json()["field"] == f"config.{key}", posted.text
        assert client.get("/tasks/sync").status_code == 404  # nothing stored
        assert client.post("/tasks", json=task_body("sync", executor="doc_sync_executor", config=DOC_SYNC)).status_code == 201
        put = client.put("/tasks/sync", json={"config": bad})
        assert put.status_code == 422 and put.json()["field"] == f"config.{key}", put.text
        assert client.get("/tasks/sync").json()["config"]["upstream_repo"] == DOC_SYNC["upstream_repo"]


BACKUP = {"sources": [{"path": "/data", "name": "docker-data"}], "backup_dir": "/backups/configs"}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**BACKUP, "sources": [{"path": "/etc/shadow", "name": "shadow"}]}, "config.sources.0.path"),
        ({**BACKUP, "sources": [{"path": "/root/.ssh", "name": "ssh"}]}, "config.sources.0.path"),
        ({**BACKUP, "backup_dir": "/etc/cron.d"}, "config.backup_dir"),
        ({**BACKUP, "backup_dir": "../../.."}, "config.backup_dir"),
    ],
)
def test_backup_paths_outside_the_roots_are_refused_on_post_and_put(api: RunningApi, config: dict, field: str) -> None:
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("backup", executor="config_backup_executor", config=config))
        assert posted.status_code == 422 and posted.json()["field"] == field, posted.text
        assert client.get("/tasks/backup").status_code == 404
        created = client.post("/tasks", json=task_body("backup", executor="config_backup_executor", config=BACKUP))
        assert created.status_code == 201, created.text
        put = client.put("/tasks/backup", json={"config": config})
        assert put.status_code == 422 and put.json()["field"] == field, put.text
        assert client.get("/tasks/backup").json()["config"] == BACKUP  # unchanged


def refused_field(response: httpx.Response) -> str:
    """The field a 422 names: `field` of registry errors, the last `loc` entry of FastAPI's schema errors."""
    body = response.json()
    return body["field"] if "field" in body else body["detail"][0]["loc"][-1]


def test_a_trailing_newline_passes_no_name_check(api: RunningApi) -> None:
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("x\n"))
        assert posted.status_code == 422 and refused_field(posted) == "task_name", posted.text
        before = client.get("/tasks").json()
        assert not any(t["task_name"].startswith("x") for t in before)  # nothing stored
        assert client.post("/tasks", json=task_body("x")).status_code == 201
        renamed = client.put("/tasks/x", json={"task_name": "x\n"})
        assert renamed.status_code == 422 and refused_field(renamed) == "task_name"
        assert [t["task_name"] for t in client.get("/tasks").json() if t["task_name"].startswith("x")] == ["x"]
        assert client.get("/executions", params={"status": "success\n"}).status_code == 422
        cursor = client.get("/executions", params={"cursor": "run:1\n"})
        assert cursor.status_code == 400 and cursor.json()["field"] == "cursor"


def _raw(client: httpx.Client, method: str, url: str, fields: str) -> httpx.Response:
    """A request whose JSON body is written by hand (`fields` spliced into a valid task body)."""
    import json

    body = json.dumps(task_body("bad"))[:-1] + ", " + fields + "}"
    return client.request(method, url, content=body.encode(), headers={"Content-Type": "application/json"})


BAD_JSON_FIELDS = [  # (the field spliced in, the field the 422 names)
    ('"description": "\\ud800"', "description"),
    ('"service": "\\udfff"', "service"),
    ('"description": "ok \\ud800 ok"', "description"),
    ('"config": {"message": "\\ud83d", "delay_seconds": 0}', "config.message"),
    ('"created_by": "\\ud800"', "created_by"),
    ('"priority": NaN', "priority"),
    ('"priority": Infinity', "priority"),
    ('"minute": -Infinity', "minute"),
    ('"timeout_seconds": NaN', "timeout_seconds"),
    ('"config": {"message": "hi", "delay_seconds": NaN}', "config.delay_seconds"),
    ('"config": {"message": "hi", "delay_seconds": Infinity}', "config.delay_seconds"),
    ('"config": {"message": "hi", "delay_seconds": 0, "x\\ud800": 1}', "config.x\\ud800"),  # named, escaped
]


@pytest.mark.parametrize(("fields", "field"), BAD_JSON_FIELDS)
def test_lone_surrogates_and_non_finite_numbers_are_422_naming_the_field_and_store_nothing(
        api: RunningApi, fields: str, field: str) -> None:
    with api.client() as client:
        before = client.get("/tasks").json()
        posted = _raw(client, "POST", "/tasks", fields)
        assert posted.status_code == 422 and refused_field(posted) == field, posted.text
        assert posted.json()["detail"] and "internal error" not in posted.text
        assert client.get("/tasks").json() == before  # nothing stored

        assert client.post("/tasks", json=task_body("keep")).status_code == 201
        stored = client.get("/tasks/keep").json()
        # PUT with the same bad field alone.
        put = client.request("PUT", "/tasks/keep", content=("{" + fields + "}").encode(),
                             headers={"Content-Type": "application/json"})
        assert put.status_code == 422 and refused_field(put) == field, put.text
        assert put.json()["detail"] and "internal error" not in put.text
        assert client.get("/tasks/keep").json() == stored  # nothing changed


def test_triggering_doc_sync_without_gitea_settings_is_a_clear_answer_not_a_500(
    api: RunningApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITEA_URL", raising=False)
    monkeypatch.delenv("GITEA_TOKEN", raising=False)
    with api.client() as client:
        assert client.post("/tasks", json=task_body("sync", executor="doc_sync_executor", config=DOC_SYNC)).status_code == 201
        answer = client.post("/tasks/sync/trigger")
        assert answer.status_code == 503, answer.text
        assert "GITEA_URL, GITEA_TOKEN" in answer.json()["detail"] and "'sync'" in answer.json()["detail"]
        monkeypatch.setenv("GITEA_URL", "http://gitea:3000")
        monkeypatch.setenv("GITEA_TOKEN", "")  # compose passes ${GITEA_TOKEN:-}: empty counts as missing
        answer = client.post("/tasks/sync/trigger")
        assert answer.status_code == 503 and "needs GITEA_TOKEN," in answer.json()["detail"]
    assert api.instance.get_runs() == []


def test_size_limits(api: RunningApi) -> None:
    # README "Limits", as literals: a body over 1 MiB is 413, an Authorization header over 8 KiB is 431, a description
    # over 2,000 characters, a service over 100 and a config over 64 KiB as JSON are 422 naming the field.
    mib, kib = 1024 * 1024, 1024
    too_big_config = {"message": "m" * 64 * kib, "delay_seconds": 0}
    with api.client() as client:
        before = client.get("/tasks").json()
        too_big = client.post("/tasks", json=task_body("big", description="x" * mib))
        assert too_big.status_code == 413 and "1048576" in too_big.json()["detail"]

        def chunks():
            body = b'{"task_name": "big", "description": "' + b"x" * (mib + 10) + b'"}'
            for start in range(0, len(body), 64 * kib):
                yield body[start:start + 64 * kib]

        chunked = client.post("/tasks", content=chunks(), headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413  # no Content-Length: counted as it arrives
        for field, value in [("description", "x" * 2_001), ("service", "s" * 101), ("config", too_big_config)]:
            answer = client.post("/tasks", json=task_body("long", **{field: value}))
            assert answer.status_code == 422 and refused_field(answer) == field, answer.text
        assert client.get("/tasks").json() == before  # nothing stored
        assert client.post("/tasks", json=task_body("long", description="x" * 2_000)).status_code == 201
        stored = client.get("/tasks/long").json()
        for field, value in [("description", "x" * 2_001), ("config", too_big_config)]:
            answer = client.put("/tasks/long", json={field: value})
            assert answer.status_code == 422 and refused_field(answer) == field, answer.text
        assert client.get("/tasks/long").json() == stored  # nothing changed

    on_the_limit = "Bearer " + "k" * (8 * kib - 7)  # 8,192 bytes
    with api.client(None) as anonymous:
        assert anonymous.get("/health", headers={"Authorization": on_the_limit}).status_code == 200
        for path in ("/tasks", "/health"):  # one byte over, refused before authentication, public paths too
            answer = anonymous.get(path, headers={"Authorization": on_the_limit + "k"})
            assert answer.status_code == 431 and "Authorization" in answer.json()["detail"], (path, answer.text)


def test_pages_over_runs_are_503_naming_the_setting_when_dagsters_database_is_not_set(registry_url: str,
                                                                                       monkeypatch) -> None:
    monkeypatch.delenv("DAGSTER_POSTGRES_URL", raising=False)
    app = create_app(ApiSettings(registry_url=registry_url, api_key=API_KEY))
    assert app.state.api.settings.dagster_database_url is None
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        import httpx

        response = httpx.get(f"http://127.0.0.1:{port}/executions", headers={"Authorization": f"Bearer {API_KEY}"},
                             timeout=30)
        assert response.status_code == 503 and "DAGSTER_POSTGRES_URL is not set" in response.json()["detail"]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
