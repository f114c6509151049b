"""The public `/health` names each task the current settings refuse and what is wrong with it, without quoting its
config (paths, URLs, hosts: anonymous clients read /health); the authenticated `/tasks` keeps the detail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.control_api.conftest import RunningApi, answered
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]

SECRET_DIR = "payroll-exports-7f3a"
SECRET_HOST = "git.corp-internal-9c41.example.com"
SECRET_REPO = "finance/ledger-scripts"


def test_health_names_refused_tasks_without_quoting_their_config(
    api: RunningApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sources, backups = tmp_path / "sources", tmp_path / "backups"
    (sources / SECRET_DIR).mkdir(parents=True)
    backups.mkdir()
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(sources))
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(backups))
    backup = {"sources": [{"path": str(sources / SECRET_DIR), "name": "payroll"}],
              "backup_dir": str(backups / SECRET_DIR)}
    sync = {"project": "ledger", "upstream_repo": f"https://{SECRET_HOST}/{SECRET_REPO}.git",
            "docs_paths": ["docs"], "gitea_repo": "library/ledger"}
    with api.client() as client:
        for name, executor, config in (("payroll_backup", "config_backup_executor", backup),
                                       ("ledger_sync", "doc_sync_executor", sync)):
            created = client.post("/tasks", json=task_body(name, executor=executor, config=config))
            assert created.status_code == 201, created.text

        # The settings narrow: both tasks are refused from now on.
        monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path / "elsewhere"))
        monkeypatch.setenv("MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS", "gitlab.com")
        detail = {t["task_name"]: t["problem"] for t in client.get("/tasks").json()}
        assert SECRET_DIR in detail["payroll_backup"] and detail["payroll_backup"].startswith("config.sources.0.path")
        assert SECRET_HOST in detail["ledger_sync"] and detail["ledger_sync"].startswith("config.upstream_repo")

    with api.client(None) as anonymous:  # /health is public
        health = answered(lambda: anonymous.get("/health").json())
    refused = {row["task_name"]: row["problem"] for row in health["refused_tasks"]}
    assert set(refused) >= {"payroll_backup", "ledger_sync"}, refused
    assert refused["payroll_backup"].startswith("config.sources.0.path: refused by the current settings")
    assert refused["ledger_sync"].startswith("config.upstream_repo: refused by the current settings")
    for leaked in (SECRET_DIR, SECRET_HOST, SECRET_REPO, "ledger-scripts", str(tmp_path), "gitlab.com", "/"):
        assert all(leaked not in problem for problem in refused.values()), (leaked, refused)
    answer = json.dumps(health)  # the answer checked above, whole
    assert SECRET_DIR not in answer and SECRET_HOST not in answer and str(tmp_path) not in answer


@pytest.mark.parametrize(("problem", "shown"), [
    ("config.sources.0.path: '/srv/payroll' must resolve under /data", "config.sources.0.path"),
    ("config.upstream_repo: host 'git.corp.example' is not in the allowed hosts", "config.upstream_repo"),
    ("executor: cannot be loaded (ImportError)", "executor"),
    ("config: is 70000 bytes as JSON, over the limit of 65536", "config"),
    ("config." + "k" * 64 + ": x", "config." + "k" * 64),  # the longest key shown
    ("config." + "k" * 65 + ": x", "config"),  # one longer: not shown
    ("config.a.b.c.d.e.f.g: x", "config.a.b.c.d.e.f.g"),  # eight parts
    ("config.a.b.c.d.e.f.g.h: x", "config"),  # nine
    ("config./etc/shadow: Extra inputs are not permitted", "config"),  # a key of the config itself
    ("config.https://git.corp.example/x: Extra inputs are not permitted", "config"),
    ("config.payroll-2024: Extra inputs are not permitted", "config"),
    ("no separator at all", "config"),
])
def test_public_problem_names_the_field_only(problem: str, shown: str) -> None:
    from platform_monitoring.status import public_problem

    assert public_problem(problem) == f"{shown}: refused by the current settings (the authenticated task view says why)"
