"""One op job per executor. Each op reports its result as output metadata and run tags (the audit trail)."""

# No `from __future__ import annotations`: Dagster reads op/sensor parameter types at definition time.

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg
from pydantic import BaseModel, ValidationError

from maintenance_jobs.executor_configs import (
    ConfigBackupConfig,
    ConfigRefused,
    DocSyncConfig,
    ExampleConfig,
    POSTGRES_BACKUP_ASSET_PREFIX,
    PluginRunConfig,
    PostgresBackupConfig,
)
from maintenance_jobs.executors.config_backup import BackupRefused, run_backup
from maintenance_jobs.executors.doc_sync import GitCommandError, sync_docs, target_repo_url
from maintenance_jobs.executors.example import run_example
from maintenance_jobs.executors.plugins import PluginNotFound, load_plugin, run_plugin, validate_plugin_config
from maintenance_jobs.executors.postgres_backup import run_postgres_backup
from maintenance_jobs.executors.scrub import scrub
from maintenance_jobs.resources import GiteaResource
from maintenance_jobs.settings import MaintenanceSettings
from maintenance_jobs.tags import MAX_TAG_CHARS, TAG_OUTPUT, TAG_TASK, TAG_TRIGGERED_BY
from orchestration_core.run_config_rules import literal_config_schema
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND, Outcome, one_line, record_outcome

# Job-level tag: even a run launched by hand from the UI counts against the limit of 5 maintenance runs.
JOB_TAGS = {TAG_KIND: KIND_MAINTENANCE}


def _task_name(context: dg.OpExecutionContext) -> str:
    return context.run.tags.get(TAG_TASK) or context.job_name


def _start(context: dg.OpExecutionContext) -> None:
    # Run retries copy the parent's tags; mark the retry so the audit trail says why this run exists.
    if context.run.parent_run_id and context.run.tags.get(TAG_TRIGGERED_BY) != "retry":
        context.instance.add_run_tags(context.run_id, {TAG_TRIGGERED_BY: "retry"})


def _succeed(context: dg.OpExecutionContext, output: str, metadata: dict[str, Any], processed: int) -> str:
    context.add_output_metadata({"message": output, **metadata})
    context.instance.add_run_tags(context.run_id, {TAG_OUTPUT: output[:MAX_TAG_CHARS]})
    record_outcome(context, Outcome.SUCCESS, processed, 0)
    return output


def _fail(context: dg.OpExecutionContext, error: str, metadata: dict[str, Any] | None = None) -> dg.Failure:
    record_outcome(context, Outcome.FAILED, 0, 1, error)
    return dg.Failure(description=error, metadata=metadata or {})


def refusal(executor: str, exc: ValidationError) -> str:
    """ "<executor> config refused: <field>: <message>" for the first error of a config validation."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "config"
    return one_line(f"{executor} config refused: {field}: {error['msg'].removeprefix('Value error, ')}")


ConfigT = TypeVar("ConfigT", bound=BaseModel)


def _config(context: dg.OpExecutionContext, model: type[ConfigT], executor: str) -> ConfigT:
    # Validated here, not by Dagster before the body: a refusal must be recorded (outcome tag, error) like any other
    # failure, whichever rule refused it (the run worker's own settings may be narrower than the API's).
    try:
        return model.model_validate(context.op_config)
    except ValidationError as exc:
        raise _fail(context, refusal(executor, exc)) from None


@contextmanager
def _every_failure_recorded(context: dg.OpExecutionContext, executor: str) -> Iterator[None]:
    """Any error the executor did not expect still ends with an outcome tag and a one-line error."""
    try:
        yield
    except (dg.Failure, dg.RetryRequested):
        raise
    except Exception as exc:
        raise _fail(context, one_line(f"{executor} failed: {type(exc).__name__}: {exc}")) from exc


@dg.op(description="Log a message, wait delay_seconds, return a message.",
       config_schema=literal_config_schema(ExampleConfig))
def run_example_executor(context: dg.OpExecutionContext) -> str:
    _start(context)
    config = _config(context, ExampleConfig, "example_executor")
    with _every_failure_recorded(context, "example_executor"):
        output = run_example(config, context.log)
    return _succeed(context, output, {"delay_seconds": config.delay_seconds}, 1)


@dg.op(description="Mirror upstream docs into Gitea, tag a dated snapshot, write .SYNC_INFO.md.",
       config_schema=literal_config_schema(DocSyncConfig))
def run_doc_sync_executor(context: dg.OpExecutionContext, gitea: GiteaResource) -> str:
    _start(context)
    config = _config(context, DocSyncConfig, "doc_sync_executor")
    with _every_failure_recorded(context, "doc_sync_executor"):
        try:
            target = target_repo_url(gitea.base_url, config.gitea_repo)
            result = sync_docs(
                config,
                target_url=target,
                token=gitea.token,
                work_dir=Path(gitea.work_dir),
                now=dt.datetime.now(dt.UTC),
                log=context.log,
            )
        except (GitCommandError, ConfigRefused) as exc:  # already one scrubbed line / says which field
            raise _fail(context, str(exc)) from None
    metadata = {
        "project": result.project,
        "upstream": scrub(config.upstream_repo),
        "target": scrub(target, [gitea.token]),
        "upstream_commit": result.upstream_commit,
        "target_commit": result.target_commit,
        "changed": result.changed,
        "files": result.files,
        "snapshot_tag": result.tag or "",
        "paths": list(result.paths),
        "left_out": list(result.skipped),
    }
    return _succeed(context, result.message, metadata, result.files)


@dg.op(description="Archive each source into backup_dir (atomically) and apply this task's retention.",
       config_schema=literal_config_schema(ConfigBackupConfig))
def run_config_backup_executor(context: dg.OpExecutionContext) -> str:
    _start(context)
    config = _config(context, ConfigBackupConfig, "config_backup_executor")
    with _every_failure_recorded(context, "config_backup_executor"):
        try:
            result = run_backup(config, _task_name(context), dt.datetime.now(dt.UTC), context.log)
        except BackupRefused as exc:
            raise _fail(context, one_line(str(exc))) from None
    metadata = {
        "archives": [s.archive for s in result.sources if s.archive],
        "total_bytes": sum(s.size_bytes for s in result.sources),
        "total_files": sum(s.files for s in result.sources),
        "files_vanished": sum(s.files_vanished for s in result.sources),
        "hard_links_skipped": sum(len(s.hard_links_skipped) for s in result.sources),
        "deleted_archives": result.deleted,
        "sources": dg.MetadataValue.json(
            [{"name": s.name, "files": s.files, "bytes": s.size_bytes, "error": s.error,
              "hard_links_skipped": s.hard_links_skipped[:100]} for s in result.sources]
        ),
    }
    if result.failed:
        ok = len(result.sources) - len(result.failed)
        record_outcome(context, Outcome.PARTIAL if ok else Outcome.FAILED, ok, len(result.failed), result.message)
        raise dg.Failure(description=result.message, metadata=metadata)
    return _succeed(context, result.message, metadata, len(result.sources))


@dg.op(description="pg_dump -Fc of the deployment's databases into backup_dir (atomically, with a sha256 file), "
       "then this task's retention.",
       config_schema=literal_config_schema(PostgresBackupConfig))
def run_postgres_backup_executor(context: dg.OpExecutionContext) -> str:
    _start(context)
    config = _config(context, PostgresBackupConfig, "postgres_backup_executor")
    with _every_failure_recorded(context, "postgres_backup_executor"):
        try:
            result = run_postgres_backup(config, _task_name(context), dt.datetime.now(dt.UTC), context.log)
        except ConfigRefused as exc:  # PostgresBackupRefused included: says which field or setting
            raise _fail(context, one_line(str(exc))) from None
    for dump in result.dumps:
        if dump.error is None:
            context.log_event(dg.AssetMaterialization(
                asset_key=[POSTGRES_BACKUP_ASSET_PREFIX, dump.database],
                description=f"pg_dump of the {dump.database} database",
                metadata={"path": dump.dump or "", "sha256": dump.sha256 or "", "bytes": dump.size_bytes},
            ))
    metadata = {
        "dumps": [d.dump for d in result.dumps if d.dump],
        "total_bytes": sum(d.size_bytes for d in result.dumps),
        "deleted_files": result.deleted,
        "databases": dg.MetadataValue.json(
            [{"database": d.database, "bytes": d.size_bytes, "sha256": d.sha256, "error": d.error}
             for d in result.dumps]
        ),
    }
    if result.failed:
        ok = len(result.dumps) - len(result.failed)
        record_outcome(context, Outcome.PARTIAL if ok else Outcome.FAILED, ok, len(result.failed), result.message)
        raise dg.Failure(description=result.message, metadata=metadata)
    return _succeed(context, result.message, metadata, len(result.dumps))


@dg.op(description="Run a plug-in executor's `async execute(config, settings)`; its string is the output.",
       config_schema=literal_config_schema(PluginRunConfig))
def run_plugin_executor(context: dg.OpExecutionContext) -> str:
    _start(context)
    config = _config(context, PluginRunConfig, "plugin_executor")
    try:
        plugin = load_plugin(config.executor)
        plugin_config = json.loads(config.config_json)
        validate_plugin_config(plugin, plugin_config)  # under this worker's settings (e.g. its allowed roots)
    except PluginNotFound as exc:
        raise _fail(context, str(exc)) from None
    except ValidationError as exc:
        raise _fail(context, refusal(config.executor, exc)) from None
    except Exception as exc:  # not JSON, or a plug-in whose import fails
        raise _fail(context, one_line(f"{config.executor} cannot start: {type(exc).__name__}: {exc}")) from exc
    try:
        output = run_plugin(plugin, plugin_config, MaintenanceSettings())
    except Exception as exc:  # a plug-in signals failure by raising anything
        raise _fail(context, one_line(f"{config.executor} failed: {type(exc).__name__}: {exc}")) from exc
    return _succeed(context, output, {"executor": config.executor}, 1)


@dg.job(name="example_executor", tags=JOB_TAGS, description="Maintenance task: example_executor.")
def example_executor_job() -> None:
    run_example_executor()


@dg.job(name="doc_sync_executor", tags=JOB_TAGS, description="Maintenance task: doc_sync_executor.")
def doc_sync_executor_job() -> None:
    run_doc_sync_executor()


@dg.job(name="config_backup_executor", tags=JOB_TAGS, description="Maintenance task: config_backup_executor.")
def config_backup_executor_job() -> None:
    run_config_backup_executor()


@dg.job(name="postgres_backup_executor", tags=JOB_TAGS, description="Maintenance task: postgres_backup_executor.")
def postgres_backup_executor_job() -> None:
    run_postgres_backup_executor()


@dg.job(name="plugin_executor", tags=JOB_TAGS, description="Maintenance task run by a plug-in executor.")
def plugin_executor_job() -> None:
    run_plugin_executor()


MAINTENANCE_JOBS = [example_executor_job, doc_sync_executor_job, config_backup_executor_job,
                    postgres_backup_executor_job, plugin_executor_job]
# Built-in executor name -> (job, op name); any other executor runs in the plug-in job.
BUILTIN_JOBS = {
    "example_executor": (example_executor_job, "run_example_executor"),
    "doc_sync_executor": (doc_sync_executor_job, "run_doc_sync_executor"),
    "config_backup_executor": (config_backup_executor_job, "run_config_backup_executor"),
    "postgres_backup_executor": (postgres_backup_executor_job, "run_postgres_backup_executor"),
}
PLUGIN_JOB = (plugin_executor_job, "run_plugin_executor")
