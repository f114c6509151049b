"""The control API probed as an attacker with a valid key would, over real HTTP against Postgres: every refusal is
a clear 4xx naming the field, and after it nothing was stored, changed or launched."""

from __future__ import annotations

import concurrent.futures
import json
import logging
from pathlib import Path

import httpx
import pytest

from control_api.app import create_app
from tests.control_api.conftest import RunningApi, answered, serve
from local_stack.stack import free_port
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]

JSON = {"Content-Type": "application/json"}
DOC_SYNC = {"project": "fastapi", "upstream_repo": "https://github.com/tiangolo/fastapi.git",
            "docs_paths": ["docs"], "gitea_repo": "library/docs-fastapi"}


def stored_names(client: httpx.Client) -> list[str]:
    return sorted(task["task_name"] for task in client.get("/tasks").json())


@pytest.mark.parametrize(
    "upstream",
    [
        "https://127.0.0.1:5432/x.git",
        "https://[::1]/x.git",
        "https://0x7f000001/x.git",
        "https://2130706433/x.git",
        "https://169.254.169.254/latest/meta-data",
        "https://10.0.0.8/x.git",
        "https://192.168.1.2/x.git",
        "https://[fd00::5]/x.git",
        "https://postgres:5432/x.git",
        "https://metadata.google.internal/x",
        "https://github.com:99999/x.git",
        "https://github.com:-1/x.git",
        "https://github.com:8443/x.git",
        "https://user:s3cretpw@github.com/x.git",
        "https://ghp_s3cretpw@github.com/x.git",
    ],
)
def test_inward_and_credentialed_upstreams_are_refused_and_nothing_is_stored(api: RunningApi, upstream: str) -> None:
    with api.client() as client:
        before = stored_names(client)
        posted = client.post("/tasks", json=task_body("sync", executor="doc_sync_executor",
                                                      config={**DOC_SYNC, "upstream_repo": upstream}))
        assert posted.status_code == 422, posted.text
        assert posted.json()["field"] == "config.upstream_repo"
        assert "s3cretpw" not in posted.text  # the refusal does not echo credentials back
        assert stored_names(client) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("priority", True),
        ("priority", 5.0),
        ("priority", "5"),
        ("enabled", "yes"),
        ("enabled", 1),
        ("max_retries", False),
        ("timeout_seconds", "60"),
        ("minute", 1.5),
    ],
)
def test_types_are_strict(api: RunningApi, field: str, value: object) -> None:
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("strict", **{field: value}))
        assert posted.status_code == 422 and posted.json()["field"] == field, posted.text
        assert client.get("/tasks/strict").status_code == 404
        assert client.post("/tasks", json=task_body("strict")).status_code == 201
        before = client.get("/tasks/strict").json()
        put = client.put("/tasks/strict", json={field: value})
        assert put.status_code == 422 and put.json()["field"] == field, put.text
        assert client.get("/tasks/strict").json() == before


def test_executor_config_types_are_strict(api: RunningApi) -> None:
    backup = {"sources": [{"path": "/data", "name": "d"}], "backup_dir": "/backups/x", "compress": "yes"}
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("b", executor="config_backup_executor", config=backup))
        assert posted.status_code == 422 and posted.json()["field"] == "config.compress", posted.text
        delay = client.post("/tasks", json=task_body("e", config={"message": "x", "delay_seconds": "5"}))
        assert delay.status_code == 422 and delay.json()["field"] == "config.delay_seconds", delay.text
        assert "b" not in stored_names(client) and "e" not in stored_names(client)


@pytest.mark.parametrize(("config", "field"), [
    ({"databases": ["postgres"]}, "config.databases"),  # a database of the server that is not one of the three
    ({"backup_dir": "/etc/cron.d"}, "config.backup_dir"),  # outside the backup root
    ({"database_url": "postgresql://evil@elsewhere/db"}, "config.database_url"),  # URLs only from the settings
])
def test_a_postgres_backup_naming_another_database_or_folder_is_refused(api: RunningApi, config: dict,
                                                                        field: str) -> None:
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("pg", executor="postgres_backup_executor", config=config))
        assert posted.status_code == 422 and posted.json()["field"] == field, posted.text
        assert "pg" not in stored_names(client)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("service", "backups\u202egnp.exe"),  # right-to-left override
        ("service", "ok\u2066hidden\u2069"),  # isolates
        ("description", "line one\nline two"),
        ("description", "\x1b[31mred\x1b[0m"),  # a terminal escape into the CLI's table
        ("description", "nul\u0085next"),  # C1 next line
        ("created_by", "alice\u200f"),
        ("description", "para\u2029graph"),
    ],
)
def test_control_and_bidi_characters_are_refused_in_labels(api: RunningApi, field: str, value: str) -> None:
    with api.client() as client:
        posted = client.post("/tasks", json=task_body("label", **{field: value}))
        assert posted.status_code == 422 and posted.json()["field"] == field, posted.text
        assert "bidirectional" in posted.text
        assert "label" not in stored_names(client)


def _nested(depth: int, leaf: str = "1") -> str:
    """JSON text nesting objects and arrays `depth` levels deep around `leaf` (built as text: json.dumps itself
    recurses)."""
    opening = "".join('{"k":' if level % 2 == 0 else "[" for level in range(depth))
    closing = "".join("}" if level % 2 == 0 else "]" for level in reversed(range(depth)))
    return opening + leaf + closing


def _body(name: str, **raw_fields: str) -> str:
    """A task body as JSON text, with some fields given as raw JSON text."""
    plain = {k: v for k, v in task_body(name).items() if k not in raw_fields}
    text = json.dumps(plain)[:-1]
    return text + "".join(f', "{key}": {value}' for key, value in raw_fields.items()) + "}"


@pytest.mark.parametrize(
    "body",
    [
        lambda: _body("deep", description=_nested(500, '"x"')),
        lambda: _body("deep", service=_nested(960, '"x"')),
        lambda: _body("deep", config='{"message": ' + _nested(960) + "}"),
        lambda: _body("deep", config=_nested(32)),  # 33 levels, one over the 32: the task object is level 1
        lambda: _nested(5000),
        lambda: _body("deep", description='"' + "[" * 1900 + '"'),  # brackets inside a string do not count...
    ],
    ids=["description_500", "service_960", "config_960", "config_one_over", "bare_5000", "string"],
)
def test_deep_nesting_is_refused_before_any_recursion_with_one_log_line(
    api: RunningApi, body, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    in_string = request.node.callspec.id == "string"
    with api.client() as client, caplog.at_level(logging.INFO):
        before = stored_names(client)
        posted = client.post("/tasks", content=body(), headers=JSON)
        assert posted.status_code == (201 if in_string else 422), posted.text[:500]
        if in_string:  # ...so that body is accepted
            assert posted.status_code == 201, posted.text[:500]
            return
        assert posted.json()["field"] == "body" and "32 levels" in posted.json()["detail"]
        assert client.post("/tasks", json=task_body("ok")).status_code == 201
        put = client.put("/tasks/ok", content='{"config": ' + _nested(900) + "}", headers=JSON)
        assert put.status_code == 422
        assert stored_names(client) == sorted([*before, "ok"])
    refusals = [r for r in caplog.records if "nests deeper" in r.getMessage()]
    assert len(refusals) == 2 and all(r.exc_info is None for r in refusals)
    assert not any("Traceback" in r.getMessage() or r.exc_info for r in caplog.records)


def test_nesting_within_the_limit_is_accepted(api: RunningApi) -> None:
    with api.client() as client:
        # task object (1) -> config (2) -> 30 more levels = 32: at the limit, accepted by the API, then refused
        # by the executor config for its own reason (an example task has no such key), not by depth.
        posted = client.post("/tasks", content=_body("deep", config='{"message": "x", "x": ' + _nested(30) + "}"),
                             headers=JSON)
        assert posted.status_code == 422 and posted.json()["field"] == "config.x", posted.text


def test_renames_racing_renames_and_creates_answer_409_never_500(api: RunningApi) -> None:
    statuses: list[int] = []
    with api.client() as client:
        for i in range(4):
            assert client.post("/tasks", json=task_body(f"racer{i}")).status_code == 201

    def rename(i: int, attempt: int) -> int:
        with api.client() as client:
            if i == 3:
                return client.post("/tasks", json=task_body(f"prize{attempt}")).status_code
            return client.put(f"/tasks/racer{i}", json={"task_name": f"prize{attempt}"}).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for attempt in range(40):
            statuses += list(pool.map(lambda i: rename(i, attempt), range(4)))
            with api.client() as client:  # put the racers back for the next round
                for task in client.get("/tasks").json():
                    if task["task_name"].startswith("prize"):
                        winner = task["task_name"]
                        client.delete(f"/tasks/{winner}")
                names = stored_names(client)
                for i in range(4):
                    if f"racer{i}" not in names:
                        assert client.post("/tasks", json=task_body(f"racer{i}")).status_code == 201
    assert 500 not in statuses
    assert set(statuses) <= {200, 201, 409}
    assert statuses.count(409) > 0  # the race did happen


SEED_BACKUP = "backup_docker_configs_daily"
SEED_SYNC = "sync_fastapi_docs_monthly"


def test_narrowed_settings_report_the_tasks_they_refuse_and_everything_else_keeps_working(
    api: RunningApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with api.client() as client:
        seeded = stored_names(client)  # the first request migrates and seeds under the default settings
        assert SEED_BACKUP in seeded and SEED_SYNC in seeded
        assert client.get("/tasks").json()[0]["problem"] is None
        assert client.post("/tasks", json=task_body("plain")).status_code == 201

        monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path / "sources"))
        monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(tmp_path / "backups"))
        monkeypatch.setenv("MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS", "gitlab.com")
        listed = client.get("/tasks")
        assert listed.status_code == 200, listed.text
        problems = {task["task_name"]: task["problem"] for task in listed.json()}
        assert problems[SEED_BACKUP].startswith("config.sources.0.path: '/data' must resolve under")
        assert "not in the allowed hosts" in problems[SEED_SYNC]
        assert problems["plain"] is None
        assert client.get("/stats").status_code == 200
        health = answered(lambda: client.get("/health").json())  # its registry probe may overrun on a loaded host
        refused = {row["task_name"]: row["problem"] for row in health["refused_tasks"]}
        assert SEED_BACKUP in refused and SEED_SYNC in refused and "plain" not in refused

        # Such a task is never launched by hand either, and can be disabled, fixed or deleted.
        trigger = client.post(f"/tasks/{SEED_BACKUP}/trigger")
        assert trigger.status_code == 409 and "refused by the current settings" in trigger.json()["detail"]
        assert api.instance.get_runs() == []
        disabled = client.put(f"/tasks/{SEED_BACKUP}", json={"enabled": False})
        assert disabled.status_code == 200 and disabled.json()["enabled"] is False, disabled.text
        assert SEED_BACKUP not in {row["task_name"] for row in client.get("/health").json()["refused_tasks"]}
        renamed = client.put(f"/tasks/{SEED_SYNC}", json={"description": "kept while the config is fixed"})
        assert renamed.status_code == 200 and renamed.json()["problem"] is not None
        still_bad = client.put(f"/tasks/{SEED_SYNC}", json={"config": DOC_SYNC})  # a new config is checked
        assert still_bad.status_code == 422 and still_bad.json()["field"] == "config.upstream_repo"
        (tmp_path / "sources").mkdir()
        fixed = client.put(f"/tasks/{SEED_BACKUP}", json={"config": {
            "sources": [{"path": str(tmp_path / "sources"), "name": "docker-data"}],
            "backup_dir": str(tmp_path / "backups" / "configs")}})
        assert fixed.status_code == 200 and fixed.json()["problem"] is None, fixed.text
        assert client.delete(f"/tasks/{SEED_SYNC}").status_code == 200


def test_a_registry_first_seeded_under_narrowed_settings_stores_refused_seeds_disabled(
    api_settings, pg_instance, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path))
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS", "gitlab.com")
    server, thread = serve(create_app(api_settings), free_port())
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        with httpx.Client(base_url=base, headers={"Authorization": "Bearer test-key-0123456789abcdef"}) as client:
            listed = client.get("/tasks")
            assert listed.status_code == 200, listed.text
            rows = {task["task_name"]: task for task in listed.json()}
            for name in (SEED_BACKUP, SEED_SYNC):
                assert rows[name]["enabled"] is False and rows[name]["problem"], rows[name]
            assert client.get("/stats").status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_metrics_scrapes_share_one_rendering(api_settings, pg_instance) -> None:
    """Sixty anonymous scrapers at once cost one rendering of /metrics (its collectors query the databases), so
    they cannot take the API's threads from authenticated clients."""
    app = create_app(api_settings.model_copy(update={"metrics_cache_seconds": 60}))
    server, thread = serve(app, free_port())
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        def scrape(_: int) -> int:
            with httpx.Client(base_url=base, timeout=30) as anonymous:
                return anonymous.get("/metrics").status_code

        with concurrent.futures.ThreadPoolExecutor(max_workers=60) as pool:
            assert set(pool.map(scrape, range(60))) == {200}
        cache = app.state.api.metrics_cache
        assert cache.misses == 1 and cache.hits >= 59
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_backup_refused_at_start_shows_its_error_in_executions(
    api: RunningApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backup whose source became a symlink to /etc after the task was written: the run is refused by the
    worker's config check, and /executions says why (before: `error: null`, no outcome tag)."""
    from maintenance_jobs.jobs import config_backup_executor_job
    from maintenance_jobs.tags import TAG_SERVICE, TAG_TASK

    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path))
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(tmp_path))
    (tmp_path / "source").mkdir()
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "source")
    config = {"sources": [{"path": str(link), "name": "configs"}], "backup_dir": str(tmp_path / "backups")}
    link.unlink()
    link.symlink_to("/etc")
    result = config_backup_executor_job.execute_in_process(
        run_config={"ops": {"run_config_backup_executor": {"config": config}}}, instance=api.instance,
        tags={TAG_TASK: "nightly_configs", TAG_SERVICE: "backups"}, raise_on_error=False,
    )
    assert not result.success
    with api.client() as client:
        (execution,) = client.get("/executions", params={"task_name": "nightly_configs"}).json()
    assert execution["status"] == "failed"
    assert execution["error"].startswith("config_backup_executor config refused: sources.0.path: ")
    assert "must resolve under" in execution["error"] and not (tmp_path / "backups").exists()
