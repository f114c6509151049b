"""Task validation: out-of-range fields, unknown executors and bad configs are rejected naming the field."""

from __future__ import annotations

import pytest

from maintenance_jobs.models import TaskValidationError, validate_task
from tests.task_rows import task_data

pytestmark = pytest.mark.unit

BACKUP = {"sources": [{"path": "/data/etc", "name": "etc"}], "backup_dir": "/backups"}
DOCS = {"project": "fastapi", "upstream_repo": "https://github.com/tiangolo/fastapi.git", "gitea_repo": "library/x"}


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"priority": 0}, "priority", "greater than or equal to 1"),
        ({"priority": 101}, "priority", "less than or equal to 100"),
        ({"minute": 60}, "minute", "less than or equal to 59"),
        ({"hour": 24}, "hour", "less than or equal to 23"),
        ({"hour": -2}, "hour", "greater than or equal to -1"),
        ({"day_of_month": 0}, "day_of_month", "-1 (any)"),
        ({"day_of_month": 32}, "day_of_month", "less than or equal to 31"),
        ({"month": 13}, "month", "less than or equal to 12"),
        ({"day_of_week": 7}, "day_of_week", "less than or equal to 6"),
        ({"day_of_month": 30, "month": 2}, "day_of_month", "never occurs in month 2"),
        ({"day_of_month": 31, "month": 4}, "day_of_month", "never occurs in month 4"),
        ({"timeout_seconds": 0}, "timeout_seconds", "greater than or equal to 1"),
        ({"max_retries": -1}, "max_retries", "greater than or equal to 0"),
        ({"task_name": "has space"}, "task_name", "letters, digits"),
        ({"task_name": ""}, "task_name", "letters, digits"),
        ({"executor": "no_such_executor"}, "executor", "unknown executor 'no_such_executor'"),
        ({"executor": "os.path"}, "executor", "not a valid executor name"),
        ({"config": {"message": "x", "typo_field": 1}}, "config.typo_field", "Extra inputs"),
        ({"config": {"delay_seconds": -5}}, "config.delay_seconds", "greater than or equal to 0"),
        ({"executor": "config_backup_executor", "config": {}}, "config.sources", "Field required"),
        ({"executor": "config_backup_executor", "config": {**BACKUP, "retention_days": 0}}, "config.retention_days", ">= 1"),
        (
            {"executor": "config_backup_executor", "config": {**BACKUP, "sources": [{"path": "/data/a", "name": "a__b"}]}},
            "config.sources.0.name",
            "no '__'",
        ),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "gitea_repo": "nope"}}, "config.gitea_repo", "owner/name"),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "docs_paths": ["../x"]}}, "config.docs_paths", "inside"),
        ({"executor": "disk_usage_executor", "config": {}}, "config.paths", "Field required"),
        ({"last_status": "success"}, "last_status", "read-only"),
        ({"colour": "red"}, "colour", "not a task field"),
    ],
)
def test_rejected_with_the_field_named(changes: dict, field: str, fragment: str) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(**changes))
    assert info.value.field == field
    assert fragment.replace(">= 1", "greater than or equal to 1") in info.value.message
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"day_of_month": 29, "month": 2},  # leap day is a real date
        {"day_of_week": 0, "hour": 9, "minute": 0},
        {"executor": "config_backup_executor", "config": BACKUP},
        {"executor": "doc_sync_executor", "config": {**DOCS, "docs_paths": ["/docs"]}},
        {"executor": "disk_usage_executor", "config": {"paths": ["/data"]}},
    ],
)
def test_accepted(changes: dict) -> None:
    spec = validate_task(task_data(**changes))
    assert spec.task_name == "nightly"
    if "docs_paths" in spec.config:
        assert validate_task(task_data(**changes)).config["docs_paths"] == ["/docs"]  # stored as given


DOC_SYNC_GIT_OPTIONS = [
    ("upstream_repo", "--upload-pack=touch /tmp/x"),
    ("upstream_repo", "-uhttps://github.com/x/y.git"),
    ("branch", "--orphan"),
    ("target_branch", "-D"),
    ("docs_paths", ["--output=/tmp/x"]),
    ("docs_paths", ["docs", "-x"]),
    ("gitea_repo", "--mirror/x"),
]


@pytest.mark.parametrize(("key", "value"), DOC_SYNC_GIT_OPTIONS)
def test_doc_sync_refuses_anything_git_could_read_as_an_option(key: str, value) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(executor="doc_sync_executor", config={**DOCS, key: value}))
    assert info.value.field == f"config.{key}"


@pytest.mark.parametrize(
    "upstream",
    [
        "file:///srv/repo.git",
        "/srv/repo.git",
        "../repo",
        "repo.git",
        "http://github.com/tiangolo/fastapi.git",
        "ssh://git@github.com/tiangolo/fastapi.git",
        "git@github.com:tiangolo/fastapi.git",
        "ext::sh -c touch% /tmp/x",
        "https::ext::sh",
        "https:///no-host",
        "https://github.com/x y.git",
    ],
)
def test_doc_sync_upstream_must_be_https(upstream: str) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(executor="doc_sync_executor", config={**DOCS, "upstream_repo": upstream}))
    assert info.value.field == "config.upstream_repo"


def test_doc_sync_host_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS", "GitHub.com, codeberg.org")
    accepted = validate_task(task_data(executor="doc_sync_executor", config=DOCS))  # hosts match in any case
    assert accepted.config["upstream_repo"] == "https://github.com/tiangolo/fastapi.git"
    with pytest.raises(TaskValidationError, match="allowed hosts") as info:
        validate_task(
            task_data(executor="doc_sync_executor", config={**DOCS, "upstream_repo": "https://evil.example/x.git"})
        )
    assert info.value.field == "config.upstream_repo"


def test_doc_sync_test_schemes_are_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    local = {**DOCS, "upstream_repo": "file:///srv/repo.git"}
    with pytest.raises(TaskValidationError):
        validate_task(task_data(executor="doc_sync_executor", config=local))
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES", "file")
    assert validate_task(task_data(executor="doc_sync_executor", config=local)).config["upstream_repo"] == (
        "file:///srv/repo.git")
    # Even then, an option stays an option.
    with pytest.raises(TaskValidationError):
        validate_task(task_data(executor="doc_sync_executor", config={**DOCS, "upstream_repo": "--upload-pack=x"}))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**BACKUP, "sources": [{"path": "/etc/shadow", "name": "shadow"}]}, "config.sources.0.path"),
        ({**BACKUP, "sources": [{"path": "/root/.ssh", "name": "ssh"}]}, "config.sources.0.path"),
        ({**BACKUP, "sources": [{"path": "/data/../etc", "name": "etc"}]}, "config.sources.0.path"),
        ({**BACKUP, "sources": [{"path": "data/x", "name": "rel"}]}, "config.sources.0.path"),
        ({**BACKUP, "sources": [{"path": "/database", "name": "prefix"}]}, "config.sources.0.path"),
        ({**BACKUP, "backup_dir": "/etc/cron.d"}, "config.backup_dir"),
        ({**BACKUP, "backup_dir": "../../.."}, "config.backup_dir"),
        ({**BACKUP, "backup_dir": "/backups/../etc"}, "config.backup_dir"),
        ({**BACKUP, "backup_dir": "/data/backups"}, "config.backup_dir"),  # a source root is not a target root
    ],
)
def test_backup_paths_must_resolve_under_the_configured_roots(config: dict, field: str) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(executor="config_backup_executor", config=config))
    assert info.value.field == field
    assert "MAINTENANCE_BACKUP_" in info.value.message or "absolute" in info.value.message


def test_backup_roots_follow_the_setting_and_symlinks(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, backups, outside = tmp_path / "sources", tmp_path / "backups", tmp_path / "outside"
    for folder in (sources, backups, outside):
        folder.mkdir()
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", f"/nowhere,{sources}")
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(backups))
    good = {"sources": [{"path": str(sources / "app"), "name": "app"}], "backup_dir": str(backups / "daily")}
    accepted = validate_task(task_data(executor="config_backup_executor", config=good)).config
    assert (accepted["sources"][0]["path"], accepted["backup_dir"]) == (str(sources / "app"), str(backups / "daily"))
    (sources / "escape").symlink_to(outside)
    (backups / "escape").symlink_to(outside)
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(executor="config_backup_executor",
                                config={**good, "sources": [{"path": str(sources / "escape"), "name": "x"}]}))
    assert info.value.field == "config.sources.0.path"
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(executor="config_backup_executor", config={**good, "backup_dir": str(backups / "escape")}))
    assert info.value.field == "config.backup_dir"


def test_seeded_tasks_are_valid_under_the_default_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from maintenance_jobs.seed import SEED_FILE

    for name in ("MAINTENANCE_BACKUP_SOURCE_ROOTS", "MAINTENANCE_BACKUP_TARGET_ROOTS",
                 "MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS", "MAINTENANCE_DOC_SYNC_TEST_SCHEMES"):
        monkeypatch.delenv(name, raising=False)
    import yaml

    tasks = yaml.safe_load(SEED_FILE.read_text())["tasks"]
    assert any(t["executor"] == "config_backup_executor" for t in tasks)
    for task in tasks:
        validate_task(task)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"task_name": "x\n"}, "task_name"),
        ({"task_name": "nightly\n"}, "task_name"),
        ({"executor": "disk_usage_executor\n", "config": {"paths": ["/data"]}}, "executor"),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "project": "fastapi\n"}}, "config.project"),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "gitea_repo": "library/x\n"}}, "config.gitea_repo"),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "branch": "main\n"}}, "config.branch"),
        ({"executor": "doc_sync_executor", "config": {**DOCS, "target_branch": "main\n"}}, "config.target_branch"),
        ({"executor": "config_backup_executor",
          "config": {**BACKUP, "sources": [{"path": "/data/etc", "name": "etc\n"}]}}, "config.sources.0.name"),
    ],
)
def test_a_trailing_newline_fails_every_name_check(changes: dict, field: str) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(**changes))
    assert info.value.field == field


def test_plugin_names_match_whole_strings() -> None:
    from maintenance_jobs.executors.plugins import PluginNotFound, load_plugin

    with pytest.raises(PluginNotFound, match="not a valid executor name"):
        load_plugin("disk_usage_executor\n")


def test_retention_pattern_matches_whole_file_names(tmp_path) -> None:
    import datetime as dt

    from maintenance_jobs.executors.config_backup import expired_archives

    (tmp_path / "t__s__20200101T000000Z.tar.gz\n").write_text("not an archive of ours")
    (tmp_path / "t__s__20200101T000000Z.tar.gz").write_text("ours")
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    assert [p.name for p in expired_archives(tmp_path, "t", "s", now, 30)] == ["t__s__20200101T000000Z.tar.gz"]


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"description": "\ud800"}, "description", "lone surrogates"),
        ({"service": "ok\udfff"}, "service", "lone surrogates"),
        ({"config": {"message": "\ud83d", "delay_seconds": 0}}, "config.message", "lone surrogates"),
        ({"config": {"message": "hi", "delay_seconds": float("nan")}}, "config.delay_seconds", "finite"),
        ({"executor": "disk_usage_executor", "config": {"paths": ["/data"], "x\ud800": 1}}, "config.x\ud800", "surrogates"),
        ({"executor": "disk_usage_executor", "config": {"paths": ["/data"], "limit": float("inf")}}, "config.limit",
         "finite"),
        ({"description": "a\x00b"}, "description", "NUL"),
    ],
)
def test_values_postgres_cannot_store_are_refused_by_the_registry_too(changes: dict, field: str, fragment: str) -> None:
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(**changes))
    assert info.value.field == field and fragment in info.value.message


# README "Limits": each field on its limit is stored, one over is refused naming the field. Literal lengths, so a
# changed constant in maintenance_jobs/limits.py fails here rather than moving the boundary along with the test.
# A config is measured as compact JSON in UTF-8: {"message":"","delay_seconds":0} is 32 bytes, each "é" 2 more.
@pytest.mark.parametrize(
    ("field", "value", "stored"),
    [
        ("description", "d" * 2_000, True),
        ("description", "d" * 2_001, False),
        ("service", "s" * 100, True),
        ("service", "s" * 101, False),
        ("created_by", "c" * 100, True),
        ("created_by", "c" * 101, False),
        ("task_name", "n" * 200, True),
        ("task_name", "n" * 201, False),
        ("config", {"message": "é" * 32_752, "delay_seconds": 0}, True),  # 65,536 bytes: 64 KiB exactly
        ("config", {"message": "é" * 32_752 + "x", "delay_seconds": 0}, False),  # 65,537 bytes
    ],
    ids=["description-2000", "description-2001", "service-100", "service-101", "created_by-100", "created_by-101",
         "task_name-200", "task_name-201", "config-65536-bytes", "config-65537-bytes"],
)
def test_field_and_config_size_limits(field: str, value, stored: bool) -> None:
    if stored:
        assert getattr(validate_task(task_data(**{field: value})), field) == value
        return
    with pytest.raises(TaskValidationError) as info:
        validate_task(task_data(**{field: value}))
    assert info.value.field == field
    if field == "config":
        assert info.value.message.endswith("is 65537 bytes as JSON, over the limit of 65536")
