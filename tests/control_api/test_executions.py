"""`/executions` over real HTTP: paging without overlaps, a cursor that survives deletion, filters, limits."""

from __future__ import annotations

import dagster as dg
import httpx
import pytest
from dagster._core.test_utils import create_run_for_test

from tests.maintenance_jobs.job_origins import job_origins
from tests.control_api.conftest import RunningApi

pytestmark = [pytest.mark.api, pytest.mark.integration]
S = dg.DagsterRunStatus


def maintenance_run(instance: dg.DagsterInstance, task: str = "nightly", service: str = "scheduler",
                    status: dg.DagsterRunStatus = S.SUCCESS, **tags: str) -> str:
    all_tags = {"orchestration/kind": "maintenance", "maintenance/task": task, "maintenance/service": service,
                "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
                "maintenance/priority": "50", **tags}
    origins = {}
    if status == S.QUEUED:  # queued runs must say where the daemon would find their job
        remote, python = job_origins("example_executor")
        origins = {"remote_job_origin": remote, "job_code_origin": python}
    return create_run_for_test(instance, job_name="example_executor", status=status, tags=all_tags, **origins).run_id


def page_through(api: RunningApi, limit: int, **params) -> list[list[str]]:
    """Follows the `Link: <...>; rel="next"` headers, as the old scheduler's clients page."""
    pages = []
    with api.client() as client:
        response = client.get("/executions", params={"limit": limit, **params})
        while True:
            assert response.status_code == 200, response.text
            pages.append([item["run_id"] for item in response.json()])
            if "next" not in response.links:
                assert "Link" not in response.headers
                return pages
            response = client.get(response.links["next"]["url"])


def next_cursor(response: httpx.Response) -> str | None:
    """The cursor of the next page's link (None on the last page)."""
    if "next" not in response.links:
        return None
    return dict(httpx.URL(response.links["next"]["url"]).params)["cursor"]


def test_45_runs_page_as_20_20_5_newest_first(api: RunningApi) -> None:
    created = [maintenance_run(api.instance) for _ in range(45)]
    create_run_for_test(api.instance, job_name="morning_scrape", tags={"orchestration/kind": "racing"})
    pages = page_through(api, 20)
    assert [len(p) for p in pages] == [20, 20, 5]
    flat = [run_id for page in pages for run_id in page]
    assert len(set(flat)) == 45 and flat == list(reversed(created))
    default = api.client().get("/executions")
    assert len(default.json()) == 20 and next_cursor(default)


def test_cursor_stays_valid_when_its_run_is_deleted(api: RunningApi) -> None:
    created = [maintenance_run(api.instance) for _ in range(12)]
    newest_first = list(reversed(created))
    with api.client() as client:
        first = client.get("/executions", params={"limit": 5})
        assert [i["run_id"] for i in first.json()] == newest_first[:5]
        api.instance.delete_run(first.json()[-1]["run_id"])  # e.g. the retention job removed it
        second = client.get("/executions", params={"limit": 5, "cursor": next_cursor(first)})
        assert [i["run_id"] for i in second.json()] == newest_first[5:10]
        third = client.get("/executions", params={"limit": 5, "cursor": next_cursor(second)})
        assert [i["run_id"] for i in third.json()] == newest_first[10:] and next_cursor(third) is None
        bad = client.get("/executions", params={"cursor": "not a cursor"})
        assert bad.status_code == 400 and bad.json()["field"] == "cursor"


def test_the_next_link_keeps_the_filters_and_limit(api: RunningApi) -> None:
    wanted = [maintenance_run(api.instance, "backup", "infra", S.SUCCESS) for _ in range(3)]
    maintenance_run(api.instance, "backup", "docs", S.SUCCESS)
    maintenance_run(api.instance, "backup", "infra", S.FAILURE)
    pages = page_through(api, 2, task_name="backup", service="infra", status="success")
    assert pages == [wanted[::-1][:2], wanted[::-1][2:]]
    with api.client() as client:
        first = client.get("/executions", params={"task_name": "backup", "service": "infra", "status": "success",
                                                  "limit": 2})
    link = first.headers["Link"]
    assert link.startswith("</executions?") and link.endswith('>; rel="next"')
    params = dict(httpx.URL(first.links["next"]["url"]).params)
    assert params == {"task_name": "backup", "service": "infra", "status": "success", "limit": "2",
                      "cursor": next_cursor(first)}
    ok = api.client().get("/openapi.json").json()["paths"]["/executions"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["type"] == "array"
    assert "Link" in ok["headers"]


def test_filters_by_task_service_and_status(api: RunningApi) -> None:
    instance = api.instance
    ok = maintenance_run(instance, "backup", "infra", S.SUCCESS)
    failed = maintenance_run(instance, "backup", "infra", S.FAILURE, **{"racing/error": "disk full"})
    timed_out = maintenance_run(instance, "backup", "infra", S.CANCELED, **{"maintenance/status": "timeout"})
    canceled = maintenance_run(instance, "backup", "infra", S.CANCELED, **{"maintenance/status": "canceled"})
    queued = maintenance_run(instance, "sync", "docs", S.QUEUED)
    started = maintenance_run(instance, "sync", "docs", S.STARTED)
    retry = maintenance_run(instance, "sync", "docs", S.SUCCESS, **{"dagster/retry_number": "2",
                                                                    "maintenance/output": "synced 3 files"})

    def ids(**params) -> list[str]:
        return [i["run_id"] for i in api.client().get("/executions", params=params).json()]

    assert ids(task_name="backup") == [canceled, timed_out, failed, ok]
    assert ids(service="docs") == [retry, started, queued]
    assert ids(status="pending") == [queued]
    assert ids(status="running") == [started]
    assert ids(status="success") == [retry, ok]
    assert ids(status="failed") == [failed]
    assert ids(status="timeout") == [timed_out]
    assert ids(status="canceled") == [canceled]
    assert ids(status="success", service="infra") == [ok]
    assert ids(task_name="nothing") == []
    items = {i["run_id"]: i for i in api.client().get("/executions").json()}
    assert items[failed]["error"] == "disk full" and items[failed]["status"] == "failed"
    assert items[retry]["retry_count"] == 2 and items[retry]["output"] == "synced 3 files"
    assert items[timed_out]["status"] == "timeout" and items[timed_out]["dagster_status"] == "CANCELED"
    with api.client() as client:
        assert client.get("/executions", params={"status": "exploded"}).status_code == 422
        assert client.get("/executions", params={"limit": 101}).status_code == 422
        assert client.get("/executions", params={"limit": 0}).status_code == 422
        assert len(client.get("/executions", params={"limit": 100}).json()) == 7


def test_a_real_run_reports_times_output_and_duration(api: RunningApi) -> None:
    from maintenance_jobs.jobs import example_executor_job

    result = example_executor_job.execute_in_process(
        run_config={"ops": {"run_example_executor": {"config": {"message": "ping", "delay_seconds": 0.2}}}},
        instance=api.instance,
        tags={"maintenance/task": "pinger", "maintenance/service": "scheduler", "maintenance/triggered_by": "manual"},
    )
    item = api.client().get("/executions", params={"task_name": "pinger"}).json()[0]
    assert item["run_id"] == result.run_id and item["status"] == "success"
    assert item["started_at"] and item["completed_at"] and item["duration_seconds"] >= 0.2
    assert item["output"] and "ping" in item["output"]


def test_cached_pages_stay_until_a_write_through_the_api(api_settings, pg_instance: dg.DagsterInstance) -> None:
    """With a cache, a repeated read is served from memory; a trigger or task write is visible at once."""

    from local_stack.stack import free_port
    from control_api.app import create_app
    from tests.control_api.conftest import API_KEY, serve
    from tests.task_rows import task_body

    app = create_app(api_settings.model_copy(update={"cache_seconds": 600}))
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {API_KEY}"},
                          timeout=30) as client:
            first = maintenance_run(pg_instance, task="pinger")
            assert [i["run_id"] for i in client.get("/executions").json()] == [first]
            enabled_before = client.get("/stats").json()["tasks_enabled"]
            maintenance_run(pg_instance, task="pinger")  # written behind the API's back: not seen for 600 s
            assert [i["run_id"] for i in client.get("/executions").json()] == [first]
            assert client.post("/tasks", json=task_body("pinger")).status_code == 201
            assert client.get("/stats").json()["tasks_enabled"] == enabled_before + 1
            triggered = client.post("/tasks/pinger/trigger").json()["run_id"]
            ids = [i["run_id"] for i in client.get("/executions").json()]
            assert ids[0] == triggered and ids[-1] == first and len(ids) == 3
            # The Link header is cached with its page: a cache hit answers the same body and the same link.
            hits = app.state.api.responses.hits
            pages = [client.get("/executions", params={"limit": 2}) for _ in range(2)]
            assert app.state.api.responses.hits > hits
            assert pages[0].content == pages[1].content and len(pages[0].json()) == 2
            assert pages[0].headers["Link"] == pages[1].headers["Link"]
            assert pages[0].links["next"]["url"].startswith("/executions?limit=2&cursor=")
            assert "Link" not in client.get("/executions", params={"limit": 3}).headers
            cache = app.state.api.responses
            assert cache.hits >= 1 and cache.misses >= 3
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_since_and_until_select_by_triggered_time_and_stay_in_the_link(api: RunningApi) -> None:
    import datetime as dt

    from tests.orchestration_core.audit.run_factory import backdate_runs

    runs = [maintenance_run(api.instance) for _ in range(6)]
    base = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
    for day, run_id in enumerate(runs):  # one run a day, 1 to 6 May
        backdate_runs(api.instance, [run_id], (base + dt.timedelta(days=day)).replace(tzinfo=None))
    since, until = "2026-05-02T00:00:00+00:00", "2026-05-05T12:00:00+12:00"  # until is 5 May 00:00 UTC
    pages = page_through(api, 2, since=since, until=until)
    assert pages == [[runs[3], runs[2]], [runs[1]]]
    with api.client() as client:
        first = client.get("/executions", params={"since": since, "until": until, "limit": 2})
        params = dict(httpx.URL(first.links["next"]["url"]).params)
        # The same instants (written in UTC).
        assert dt.datetime.fromisoformat(params["since"]) == dt.datetime.fromisoformat(since)
        assert dt.datetime.fromisoformat(params["until"]) == dt.datetime.fromisoformat(until)
        for bad in ({"since": "2026-05-02T00:00:00"}, {"until": "yesterday"}, {"since": "0001-01-01T00:00:00+05:00"},
                    {"until": "9999-12-31T23:59:00-05:00"}):
            response = client.get("/executions", params=bad)
            assert response.status_code == 422 and response.json()["field"] in bad, (bad, response.text)
        items = client.get("/executions", params={"limit": 100}).json()
        assert all(i["task_id"] is None for i in items)  # no task of that name in the registry
        from tests.task_rows import task_body

        task_id = client.post("/tasks", json=task_body("nightly")).json()["id"]
        items = client.get("/executions", params={"limit": 100}).json()
    assert len({i["id"] for i in items}) == 6 and all(i["task_id"] == task_id for i in items)
    assert all(i["metadata"] == {} and not i["recorded"] for i in items)  # none recorded yet


def test_task_history_answers_its_errors(api: RunningApi) -> None:
    from tests.task_rows import task_body

    with api.client() as client:
        assert client.get("/tasks/nothing/history").status_code == 404
        assert client.post("/tasks", json=task_body("every_minute", minute=-1, hour=-1)).status_code == 201
        too_many = client.get("/tasks/every_minute/history", params={"since": "2000-01-01T00:00:00Z"})
        assert too_many.status_code == 422 and "100 days" in too_many.json()["detail"]
        reversed_range = client.get("/tasks/every_minute/history", params={"since": "2030-01-02T00:00:00Z",
                                                                         "until": "2030-01-01T00:00:00Z"})
        assert reversed_range.status_code == 422 and reversed_range.json()["field"] == "since"
        future = client.get("/tasks/every_minute/history", params={"since": "2099-01-01T00:00:00Z"})
        assert future.status_code == 200 and future.json()["expected_runs"] == []  # nothing expected after now
        history = client.get("/tasks/every_minute/history").json()  # created just now: nothing expected yet
    assert history["counts"]["expected"] <= 1 and history["schedule"] == "* * * * *"
    assert history["live_runs_included"] and history["enabled"]
    spec = api.client().get("/openapi.json").json()["paths"]["/tasks/{task_name}/history"]["get"]
    assert {p["name"] for p in spec["parameters"]} == {"task_name", "since", "until"}
