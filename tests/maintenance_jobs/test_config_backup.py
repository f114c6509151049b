"""Config backup on real files: archives, excludes, atomic writes, per-task retention, refusals, vanishing sources."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import tarfile
from pathlib import Path

import dagster as dg
import pytest

from maintenance_jobs.executor_configs import BackupSource, ConfigBackupConfig
from maintenance_jobs.executors.config_backup import (
    BackupRefused,
    archive_name,
    is_excluded,
    run_backup,
)
from maintenance_jobs.jobs import config_backup_executor_job
from maintenance_jobs.tags import TAG_TASK

pytestmark = pytest.mark.executor

NOW = dt.datetime(2025, 6, 1, 3, 5, tzinfo=dt.UTC)
LOG = logging.getLogger("config_backup_test")


@pytest.fixture(autouse=True)
def backup_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Production roots are /data and /backups; these tests read and write under their own tmp folder.
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path))
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "docker-data"
    files = {
        "app/config.yml": "a: 1\n",
        "app/cache/blob.bin": "cache",
        "app/logs/run.log": "log",
        "db/settings.json": "{}",
        "top.log": "log",
        "cache/top-level-cache.txt": "kept: */cache/* needs a parent directory",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def backup_config(source: Path, backup_dir: Path, **changes) -> ConfigBackupConfig:
    data = {
        "sources": [{"path": str(source), "name": "docker-data", "excludes": ["*/cache/*", "*.log"]}],
        "backup_dir": str(backup_dir),
        "compress": True,
        "retention_days": 30,
    }
    return ConfigBackupConfig.model_validate({**data, **changes})


def members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


@pytest.mark.parametrize(
    ("relative", "patterns", "excluded"),
    [
        ("app/cache/blob.bin", ["*/cache/*"], True),
        ("cache/x", ["*/cache/*"], False),  # top-level: the glob wants a parent directory
        ("app/logs/run.log", ["*.log"], True),  # matched by name
        ("app/config.yml", ["*.log", "*/cache/*"], False),
        ("deep/a/b/c.tmp", ["deep/*"], True),  # * crosses /
    ],
)
def test_is_excluded(relative: str, patterns: list[str], excluded: bool) -> None:
    assert is_excluded(relative, patterns) is excluded


@pytest.mark.parametrize("compress", [True, False])
def test_archive_with_excludes_sizes_and_counts(source: Path, tmp_path: Path, compress: bool) -> None:
    backups = tmp_path / "backups"
    result = run_backup(backup_config(source, backups, compress=compress), "nightly", NOW, LOG)
    (only,) = result.sources
    archive = Path(only.archive)
    assert archive.name == f"nightly__docker-data__20250601T030500Z.tar{'.gz' if compress else ''}"
    assert members(archive) == [
        "docker-data/app/config.yml",
        "docker-data/cache/top-level-cache.txt",
        "docker-data/db/settings.json",
    ]
    assert only.files == 3 and only.size_bytes == archive.stat().st_size > 0
    with tarfile.open(archive) as tar:
        assert tar.extractfile("docker-data/app/config.yml").read() == b"a: 1\n"
    assert [p.name for p in backups.iterdir()] == [archive.name]  # no temp file left behind
    assert "backed up 1/1 sources, 3 files" in result.message


def test_retention_deletes_only_this_tasks_expired_archives(source: Path, tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    backups.mkdir()
    old = NOW - dt.timedelta(days=31)
    recent = NOW - dt.timedelta(days=29)
    keep = [
        archive_name("nightly", "docker-data", recent, True),  # inside retention
        archive_name("other", "docker-data", old, True),  # another task
        archive_name("nightly__x", "docker-data", old, True),  # a task whose name starts like ours
        archive_name("nightly", "unrelated", old, True),  # not one of our sources
        "nightly__docker-data__notes.txt",  # not an archive name
    ]
    expired = [archive_name("nightly", "docker-data", old, True), archive_name("nightly", "docker-data", old, False)]
    for name in keep + expired:
        (backups / name).write_bytes(b"x")
    result = run_backup(backup_config(source, backups), "nightly", NOW, LOG)
    assert sorted(result.deleted) == sorted(expired)
    remaining = sorted(p.name for p in backups.iterdir())
    assert remaining == sorted(keep + [Path(result.sources[0].archive).name])


def test_refuses_missing_source_and_backup_dir_inside_source(source: Path, tmp_path: Path) -> None:
    with pytest.raises(BackupRefused, match="'docker-data'.*does not exist"):
        run_backup(backup_config(tmp_path / "missing", tmp_path / "b"), "t", NOW, LOG)
    with pytest.raises(BackupRefused, match="inside source 'docker-data'"):
        run_backup(backup_config(source, source / "app" / "backups"), "t", NOW, LOG)
    with pytest.raises(BackupRefused, match="inside source"):
        run_backup(backup_config(source, source), "t", NOW, LOG)
    assert not (source / "app" / "backups").exists()  # refused before writing anything
    assert not (tmp_path / "b").exists()


def test_a_file_vanishing_mid_way_is_skipped_and_counted(source: Path, tmp_path: Path) -> None:
    (source / "app" / "zz-rotated.yml").write_text("x")  # listed with config.yml, deleted before it is read

    def vanish(path: Path) -> None:
        if path.name == "config.yml":
            (source / "app" / "zz-rotated.yml").unlink()

    result = run_backup(backup_config(source, tmp_path / "backups"), "nightly", NOW, LOG, on_file=vanish)
    (only,) = result.sources
    assert only.error is None and only.files == 3 and only.files_vanished == 1
    assert "docker-data/app/zz-rotated.yml" not in members(Path(only.archive))


def test_a_source_vanishing_mid_way_fails_without_partial_archive(source: Path, tmp_path: Path) -> None:
    other = tmp_path / "etc-stack"
    other.mkdir()
    (other / "stack.yml").write_text("services: {}\n")
    backups = tmp_path / "backups"
    config = backup_config(
        source,
        backups,
        sources=[{"path": str(other), "name": "stack"}, {"path": str(source), "name": "docker-data"}],
    )
    old = archive_name("nightly", "docker-data", NOW - dt.timedelta(days=90), True)
    backups.mkdir()
    (backups / old).write_bytes(b"old")

    def vanish(path: Path) -> None:
        if path.name == "config.yml":
            shutil.rmtree(source)  # the whole source disappears after its first file

    result = run_backup(config, "nightly", NOW, LOG, on_file=vanish)
    stack, docker = result.sources
    assert stack.error is None and stack.files == 1
    assert docker.error is not None and "FileNotFoundError" in docker.error and docker.archive is None
    names = sorted(p.name for p in backups.iterdir())
    # The failed source left neither a final nor a temp archive, and its old archive was NOT pruned.
    assert names == sorted([old, Path(stack.archive).name])
    assert "backed up 1/2 sources" in result.message and "failed: docker-data" in result.message


def test_op_reports_metadata_and_fails_the_run_when_a_source_fails(source: Path, tmp_path: Path) -> None:
    config = backup_config(source, tmp_path / "backups").model_dump()
    with dg.instance_for_test() as instance:
        ok = config_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_config_backup_executor": {"config": config}}},
            instance=instance,
            tags={TAG_TASK: "backup_docker_configs_daily"},
        )
        output = next(e for e in ok.all_events if e.event_type_value == "STEP_OUTPUT")
        metadata = output.event_specific_data.metadata
        assert metadata["total_files"].value == 3 and metadata["total_bytes"].value > 0
        (archive,) = metadata["archives"].value
        assert Path(archive).name.startswith("backup_docker_configs_daily__docker-data__")

        refused = {**config, "backup_dir": str(source / "inside")}
        failed = config_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_config_backup_executor": {"config": refused}}},
            instance=instance,
            tags={TAG_TASK: "backup_docker_configs_daily"},
            raise_on_error=False,
        )
        assert not failed.success
        tags = instance.get_run_by_id(failed.run_id).tags
        assert tags["racing/outcome"] == "failed" and "inside source" in tags["racing/error"]


def test_backup_source_names_are_validated() -> None:
    with pytest.raises(ValueError):
        BackupSource(path="/x", name="../escape")


def test_a_symlink_planted_later_under_a_root_is_refused_at_run_time(source: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"  # not under the roots (tmp_path)
    outside.mkdir()
    (outside / "shadow").write_text("secret")
    link = tmp_path / "current"
    link.symlink_to(source)  # at write time it points inside the root: accepted
    backups = tmp_path / "backups"
    config = backup_config(link, backups)
    link.unlink()
    link.symlink_to(outside)  # swapped afterwards
    with pytest.raises(BackupRefused, match="sources.0.path"):
        run_backup(config, "nightly", NOW, LOG)
    assert not backups.exists()  # refused before writing anything

    backups.mkdir()
    target_link = tmp_path / "backup-link"
    target_link.symlink_to(backups)
    config = backup_config(source, target_link)
    target_link.unlink()
    target_link.symlink_to(outside)
    with pytest.raises(BackupRefused, match="backup_dir"):
        run_backup(config, "nightly", NOW, LOG)
    assert sorted(p.name for p in outside.iterdir()) == ["shadow"]


def test_roots_from_the_run_workers_environment_apply_at_run_time(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = backup_config(source, tmp_path / "backups")  # written while the roots allowed it
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", "/data")
    with pytest.raises(BackupRefused, match="MAINTENANCE_BACKUP_SOURCE_ROOTS"):
        run_backup(config, "nightly", NOW, LOG)
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path))
    monkeypatch.setenv("MAINTENANCE_BACKUP_TARGET_ROOTS", "/backups")
    with pytest.raises(BackupRefused, match="MAINTENANCE_BACKUP_TARGET_ROOTS"):
        run_backup(config, "nightly", NOW, LOG)
    assert not (tmp_path / "backups").exists()


def test_files_with_more_than_one_hard_link_are_skipped_unless_the_task_opts_in(source: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"  # not under the roots: a hard link reaches it anyway
    outside.mkdir()
    (outside / "shadow").write_text("root:secret-hash:19000")
    (source / "app" / "innocent.yml").hardlink_to(outside / "shadow")
    (source / "app" / "twin.yml").hardlink_to(source / "app" / "config.yml")  # even inside the source: a second name
    result = run_backup(backup_config(source, tmp_path / "backups"), "nightly", NOW, LOG)
    (archive,) = [Path(s.archive) for s in result.sources]
    # config.yml is skipped with its twin: both names are links to one file.
    assert members(archive) == ["docker-data/cache/top-level-cache.txt", "docker-data/db/settings.json"]
    assert result.sources[0].hard_links_skipped == ["app/config.yml", "app/innocent.yml", "app/twin.yml"]
    assert "skipped 3 hard-linked files" in result.message
    with tarfile.open(archive) as tar:
        contents = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    assert not any(b"secret-hash" in content for content in contents)

    opted_in = run_backup(backup_config(source, tmp_path / "backups2", include_hard_links=True), "nightly", NOW, LOG)
    assert "docker-data/app/innocent.yml" in members(Path(opted_in.sources[0].archive))
    assert opted_in.sources[0].hard_links_skipped == []


def test_archive_names_too_long_for_the_file_system_are_refused_before_writing(source: Path, tmp_path: Path) -> None:
    from maintenance_jobs.models import TaskValidationError, validate_task

    long_task = "t" * 200
    config = backup_config(source, tmp_path / "backups")
    with pytest.raises(TaskValidationError) as info:
        validate_task({"task_name": long_task, "service": "s", "executor": "config_backup_executor",
                       "config": config.model_dump()})
    assert info.value.field == "config.sources.0.name" and "over the limit of 255" in info.value.message
    with pytest.raises(BackupRefused, match="over the limit of 255"):
        run_backup(config, long_task, NOW, LOG)
    assert not (tmp_path / "backups").exists()
    # Just inside the limit: written.
    fits = "t" * (255 - len(".__docker-data__20250101T000000Z.tar.gz.abcdefgh.partial"))
    assert run_backup(config, fits, NOW, LOG).sources[0].archive


@pytest.mark.parametrize("swap", ["source_to_etc", "long_name"])
def test_a_run_refused_at_start_records_why(source: Path, tmp_path: Path, swap: str) -> None:
    """Whichever layer refuses a run (the config rules under the worker's settings, or the backup's own checks),
    the run ends failed with an outcome tag and a one-line error, which /executions shows."""
    task = "backup_docker_configs_daily"
    if swap == "source_to_etc":
        link = tmp_path / "current"
        link.symlink_to(source)
        config = backup_config(link, tmp_path / "backups").model_dump()
        link.unlink()
        link.symlink_to("/etc")
        expected = "config_backup_executor config refused: sources.0.path:"
    else:
        config = backup_config(source, tmp_path / "backups").model_dump()
        task = "t" * 220
        expected = "sources.0.name: archive file names of source 'docker-data' would be"
    with dg.instance_for_test() as instance:
        failed = config_backup_executor_job.execute_in_process(
            run_config={"ops": {"run_config_backup_executor": {"config": config}}},
            instance=instance, tags={TAG_TASK: task}, raise_on_error=False,
        )
        tags = instance.get_run_by_id(failed.run_id).tags
    assert not failed.success
    assert tags["racing/outcome"] == "failed" and tags["racing/error"].startswith(expected), tags
    assert "\n" not in tags["racing/error"]
    assert not (tmp_path / "backups").exists()


@pytest.mark.parametrize("swapped_in", ["new_file", "hard_link_outside"])
@pytest.mark.parametrize("single_file", [False, True], ids=["in-a-folder", "single-file-source"])
def test_a_file_swapped_between_its_check_and_its_open_is_not_archived(
        source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped_in: str, single_file: bool) -> None:
    """The file checked (lstat) is replaced at the same path by another inode before the backup opens it: the
    descriptor's identity differs from the checked one, so its content is never archived (a file in a folder is
    skipped and counted as vanished; a single-file source fails)."""
    import os
    import sys

    target = source / "app" / "config.yml"
    outside = tmp_path.parent / f"{tmp_path.name}-outside"  # not under the roots (tmp_path)
    outside.mkdir()
    (outside / "shadow").write_text("outside secret")
    real_lstat = os.lstat
    swaps = []

    def lstat_then_swap(path, *args, **kwargs):
        status = real_lstat(path, *args, **kwargs)
        # Once, right after the check of the file that the archiving step itself makes (earlier checks of the
        # source's path, before archiving starts, see the file as it is then).
        if Path(path) == target and not swaps and sys._getframe(1).f_code.co_name == "_add_entry":
            replacement = target.with_name(".swap")
            if swapped_in == "new_file":
                replacement.write_text("swapped-in content")
            else:
                os.link(outside / "shadow", replacement)
            os.replace(replacement, target)
            swaps.append(real_lstat(target).st_ino)
            assert swaps[0] != status.st_ino  # same path, another inode
        return status

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    config = backup_config(target if single_file else source, tmp_path / "backups", include_hard_links=True)
    result = run_backup(config, "nightly", NOW, LOG)
    monkeypatch.undo()
    (only,) = result.sources
    assert swaps, "the backup never checked the file"
    if single_file:
        assert only.archive is None and only.error is not None and "changed while it was read" in only.error
        assert not [p for p in (tmp_path / "backups").iterdir()]  # no archive, no partial file
        return
    assert only.error is None and only.files_vanished == 1 and only.files == 2
    archived = members(Path(only.archive))
    assert "docker-data/app/config.yml" not in archived and archived == ["docker-data/cache/top-level-cache.txt",
                                                                         "docker-data/db/settings.json"]
