"""Pure logic of the control API: auth decisions, status mapping, cursors, limits, heartbeats, buckets, settings."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import dagster as dg
import pytest

from control_api.__main__ import main
from control_api.auth import add_security_scheme, check_authorization
from control_api.config import (
    ApiConfigError,
    ApiSettings,
    api_key_from_env,
    public_paths_from_env,
    read_key_file,
    settings_from_env,
)
from control_api.executions import CursorError, decode_cursor, encode_cursor, execution_status
from platform_monitoring.metrics import histogram_buckets
from platform_monitoring.schedulers import next_cron_time
from platform_monitoring.status import heartbeat_ages, maintenance_limit, scheduler_running

pytestmark = pytest.mark.unit
S = dg.DagsterRunStatus
KEY = "k" * 32


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, 401),
        ("", 401),
        (f"Basic {KEY}", 401),
        ("Bearer ", 401),
        ("Bearer wrong-key-xxxxxxxx", 403),
        (f"Bearer {KEY}x", 403),
        (f"Bearer {KEY}", None),
        (f"bearer {KEY}", None),
    ],
)
def test_check_authorization(header, expected) -> None:
    assert check_authorization(header, KEY) == expected


@pytest.mark.parametrize(
    ("status", "tags", "expected"),
    [
        (S.QUEUED, {}, "pending"),
        (S.NOT_STARTED, {}, "pending"),
        (S.STARTING, {}, "pending"),
        (S.STARTED, {}, "running"),
        (S.CANCELING, {}, "running"),
        (S.SUCCESS, {}, "success"),
        (S.FAILURE, {}, "failed"),
        (S.CANCELED, {}, "canceled"),
        (S.CANCELED, {"maintenance/status": "timeout"}, "timeout"),
        (S.FAILURE, {"maintenance/status": "timeout"}, "timeout"),
        # A status tag is only read once the run has finished.
        (S.STARTED, {"maintenance/status": "timeout"}, "running"),
        (S.FAILURE, {"maintenance/status": "bogus"}, "failed"),
    ],
)
def test_execution_status(status, tags, expected) -> None:
    assert execution_status(status, tags) == expected


def test_cursor_is_the_run_id_and_its_creation_in_integer_microseconds() -> None:
    # Clients hand cursors back (the Link header), across API restarts: the form is fixed, and exact to the microsecond.
    created = dt.datetime(2026, 3, 1, 12, 30, 5, 123457, tzinfo=dt.UTC)
    cursor = encode_cursor("0b7a5e1c-6c0f-4e58-9a57-0d4d8f1c2b3a", created)
    assert cursor == "0b7a5e1c-6c0f-4e58-9a57-0d4d8f1c2b3a:1772368205123457"
    assert decode_cursor("0b7a5e1c-6c0f-4e58-9a57-0d4d8f1c2b3a:1772368205123457") == (
        "0b7a5e1c-6c0f-4e58-9a57-0d4d8f1c2b3a", created)
    # Naive timestamps (as Postgres run storage returns them) are UTC.
    assert decode_cursor(encode_cursor("r1", created.replace(tzinfo=None)))[1] == created


@pytest.mark.parametrize(
    "cursor", ["", "abc", "run:12.5", "run:-1", "a b:1", "run:" + "9" * 18, "x" * 300 + ":1", "run:1\n", "run\n:1"]
)
def test_malformed_cursor_names_the_parameter(cursor) -> None:
    with pytest.raises(CursorError, match="cursor"):
        decode_cursor(cursor)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ([{"key": "orchestration/kind", "value": "maintenance", "limit": 3}], 3),
        ([{"key": "racing/race_id", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}], 5),
        ([], 5),
    ],
)
def test_maintenance_limit(limits, expected) -> None:
    assert maintenance_limit(limits) == expected


def test_heartbeat_freshness() -> None:
    beats = {"SENSOR": SimpleNamespace(timestamp=1000.0), "QUEUED_RUN_COORDINATOR": SimpleNamespace(timestamp=950.0)}
    ages = heartbeat_ages(beats, now=1030.0)
    assert ages == {"QUEUED_RUN_COORDINATOR": 80.0, "SENSOR": 30.0}
    assert scheduler_running(ages, max_age=90)
    assert not scheduler_running(ages, max_age=60)
    assert not scheduler_running({"SENSOR": 1.0}, max_age=90)  # the queue daemon is missing


def test_histogram_buckets_are_cumulative() -> None:
    buckets = dict(histogram_buckets([0.5, 3, 3, 45, 9000]))
    assert buckets["1.0"] == 1 and buckets["5.0"] == 3 and buckets["60.0"] == 4
    assert buckets["7200.0"] == 4 and buckets["+Inf"] == 5


def test_next_cron_time_in_the_schedule_timezone() -> None:
    # 02:00 Auckland (NZDT, +13) on 2026-01-10 is 13:00 UTC the day before.
    after = dt.datetime(2026, 1, 9, 12, 0, tzinfo=dt.UTC)
    assert next_cron_time("0 2 * * *", "Pacific/Auckland", after) == dt.datetime(2026, 1, 9, 13, 0, tzinfo=dt.UTC)
    assert next_cron_time(["0 3 * * *", "30 12 * * *"], "UTC", after) == dt.datetime(2026, 1, 9, 12, 30, tzinfo=dt.UTC)


def test_settings_refuse_to_start_without_a_key() -> None:
    with pytest.raises(ApiConfigError, match="SCHEDULER_API_KEY"):
        ApiSettings(registry_url="postgresql+psycopg2://x/y")
    with pytest.raises(ApiConfigError, match="at least 8"):
        ApiSettings(registry_url="postgresql+psycopg2://x/y", api_key="short")
    assert ApiSettings(registry_url="postgresql+psycopg2://x/y", insecure_dev=True).api_key is None


def test_key_sources(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SCHEDULER_API_KEY", "from-env-123456")
    monkeypatch.delenv("SCHEDULER_API_KEY_FILE", raising=False)
    assert api_key_from_env() == "from-env-123456"
    key_file = tmp_path / "key"
    key_file.write_text("  from-file-123456\n")
    key_file.chmod(0o600)
    monkeypatch.setenv("SCHEDULER_API_KEY_FILE", str(key_file))
    assert api_key_from_env() == "from-file-123456"
    with pytest.raises(ApiConfigError, match="empty"):
        (tmp_path / "empty").write_text("\n")
        (tmp_path / "empty").chmod(0o600)
        api_key_from_env(str(tmp_path / "empty"))
    with pytest.raises(ApiConfigError, match="cannot read API key file"):
        api_key_from_env(str(tmp_path / "missing"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660], ids=oct)
def test_a_key_file_others_can_read_or_write_is_refused(tmp_path, mode: int) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file-123456\n")
    key_file.chmod(mode)
    with pytest.raises(ApiConfigError, match=r"accessible to group or others.*chmod 600") as raised:
        read_key_file(key_file)
    assert str(key_file) in str(raised.value)
    assert "from-file-123456" not in str(raised.value)
    key_file.chmod(0o400)
    assert read_key_file(key_file) == "from-file-123456"


@pytest.mark.parametrize("key", [" from-env-123456", "from-env-123456\n", "from-env-123456 ", "\tfrom-env-123456"])
def test_a_key_with_surrounding_whitespace_is_refused(monkeypatch, key: str) -> None:
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", "postgresql+psycopg2://localhost/none")
    monkeypatch.setenv("SCHEDULER_API_KEY", key)
    monkeypatch.delenv("SCHEDULER_API_KEY_FILE", raising=False)
    with pytest.raises(ApiConfigError, match="SCHEDULER_API_KEY has leading or trailing whitespace"):
        settings_from_env()
    monkeypatch.setenv("SCHEDULER_API_KEY", key.strip())
    assert settings_from_env().api_key == "from-env-123456"


def test_public_paths_are_configurable(monkeypatch) -> None:
    monkeypatch.setenv("SCHEDULER_API_PUBLIC_PATHS", "/health, /metrics")
    assert public_paths_from_env() == frozenset({"/health", "/metrics"})


def test_cli_refuses_to_start_without_a_key(monkeypatch, capsys) -> None:
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", "postgresql+psycopg2://localhost/none")
    monkeypatch.delenv("SCHEDULER_API_KEY", raising=False)
    monkeypatch.delenv("SCHEDULER_API_KEY_FILE", raising=False)
    assert main(["--port", "1"]) == 2
    assert "--insecure-dev" in capsys.readouterr().err


def test_openapi_declares_bearer_auth_except_on_public_paths() -> None:
    schema = {"paths": {"/tasks": {"get": {"responses": {}}}, "/health": {"get": {"responses": {}}}}}
    add_security_scheme(schema, frozenset({"/health"}))
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert schema["paths"]["/tasks"]["get"]["security"] == [{"apiKey": []}]
    assert "security" not in schema["paths"]["/health"]["get"]


def test_stats_counts_use_the_executions_status_mapping() -> None:
    from platform_monitoring.status import count_by_execution_status

    rows = [("SUCCESS", None, 4), ("FAILURE", None, 2), ("FAILURE", "timeout", 1), ("CANCELED", "timeout", 2),
            ("CANCELED", "canceled", 1), ("QUEUED", None, 3), ("STARTED", None, 1), ("STARTING", None, 1)]
    assert count_by_execution_status(rows) == {"pending": 4, "running": 1, "success": 4, "failed": 2,
                                               "timeout": 3, "canceled": 1}


@pytest.mark.parametrize(("raw", "expected"), [(None, 1.0), ("", 1.0), ("0", 0.0), ("2.5", 2.5)])
def test_cache_seconds_from_env(monkeypatch, raw: str | None, expected: float) -> None:
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", "postgresql+psycopg2://localhost/none")
    monkeypatch.setenv("SCHEDULER_API_KEY", "from-env-123456")
    if raw is None:
        monkeypatch.delenv("MAINTENANCE_API_CACHE_SECONDS", raising=False)
    else:
        monkeypatch.setenv("MAINTENANCE_API_CACHE_SECONDS", raw)
    assert settings_from_env().cache_seconds == expected


@pytest.mark.parametrize("raw", ["soon", "-1", "nan"])
def test_bad_cache_seconds_name_the_variable(monkeypatch, raw: str) -> None:
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", "postgresql+psycopg2://localhost/none")
    monkeypatch.setenv("SCHEDULER_API_KEY", "from-env-123456")
    monkeypatch.setenv("MAINTENANCE_API_CACHE_SECONDS", raw)
    with pytest.raises(ApiConfigError, match="MAINTENANCE_API_CACHE_SECONDS"):
        settings_from_env()


def test_json_safe_makes_any_validation_detail_renderable() -> None:
    import json

    from control_api.app import json_safe

    detail = [{"loc": ["body", "priority"], "input": float("nan"), "ctx": {"x": [float("-inf"), "\ud800"]}}]
    with pytest.raises((ValueError, UnicodeEncodeError)):
        json.dumps(detail, allow_nan=False, ensure_ascii=False).encode()
    text = json.dumps(json_safe(detail), allow_nan=False, ensure_ascii=False).encode()
    assert json.loads(text) == [{"loc": ["body", "priority"], "input": "nan", "ctx": {"x": ["-inf", "\\ud800"]}}]


def test_the_recorded_through_mark_is_read_again_after_its_seconds(monkeypatch) -> None:
    from types import SimpleNamespace

    from control_api import executions

    reads = iter([dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 2, tzinfo=dt.UTC)])
    monkeypatch.setattr(executions.store, "recorded_through", lambda conn: next(reads))
    now = [100.0]
    cache = executions.RecordedThroughCache(seconds=5, clock=lambda: now[0])
    conn = SimpleNamespace(engine=SimpleNamespace(url="postgresql://registry"))
    assert cache.get(conn).day == 1
    now[0] += 4.9
    assert cache.get(conn).day == 1  # served from memory: an older mark only widens the run-storage side
    now[0] += 0.2
    assert cache.get(conn).day == 2
