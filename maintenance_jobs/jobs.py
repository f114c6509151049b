"""One op job per executor. Each op reports its result as output metadata and run tags (the audit trail)."""

# No `from __future__ import annotations`: Dagster reads op/sensor parameter types at definition time.

import datetime as dt
import json
from pathlib import Path
from typing import Any

import dagster as dg
from maintenance_jobs.executor_configs import (
    ConfigBackupConfig,
    ConfigRefused,
    DocSyncConfig,
    ExampleConfig,
    PluginRunConfig,
)
from maintenance_jobs.executors.config_backup import BackupRefused, run_backup
from maintenance_jobs.executors.doc_sync import GitCommandError, sync_docs, target_repo_url
from maintenance_jobs.executors.example import run_example
from maintenance_jobs.executors.plugins import PluginNotFound, load_plugin, run_plugin
from maintenance_jobs.executors.scrub import scrub
from maintenance_jobs.resources import GiteaResource
from maintenance_jobs.settings import MaintenanceSettings
from maintenance_jobs.tags import MAX_TAG_CHARS, TAG_OUTPUT, TAG_TASK, TAG_TRIGGERED_BY
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND, Outcome, record_outcome

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


@dg.op(description="Log a message, wait delay_seconds, return a message.")
def run_example_executor(context: dg.OpExecutionContext, config: ExampleConfig) -> str:
    _start(context)
    output = run_example(config, context.log)
    return _succeed(context, output, {"delay_seconds": config.delay_seconds}, 1)


@dg.op(description="Mirror upstream docs into Gitea, tag a dated snapshot, write .SYNC_INFO.md.")
def run_doc_sync_executor(context: dg.OpExecutionContext, config: DocSyncConfig, gitea: GiteaResource) -> str:
    _start(context)
    target = target_repo_url(gitea.base_url, config.gitea_repo)
    try:
        result = sync_docs(
            config,
            target_url=target,
            token=gitea.token,
            work_dir=Path(gitea.work_dir),
            now=dt.datetime.now(dt.UTC),
            log=context.log,
        )
    except (GitCommandError, ConfigRefused) as exc:  # already scrubbed / says which field
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
    }
    return _succeed(context, result.message, metadata, result.files)


@dg.op(description="Archive each source into backup_dir (atomically) and apply this task's retention.")
def run_config_backup_executor(context: dg.OpExecutionContext, config: ConfigBackupConfig) -> str:
    _start(context)
    try:
        result = run_backup(config, _task_name(context), dt.datetime.now(dt.UTC), context.log)
    except BackupRefused as exc:
        raise _fail(context, str(exc)) from None
    metadata = {
        "archives": [s.archive for s in result.sources if s.archive],
        "total_bytes": sum(s.size_bytes for s in result.sources),
        "total_files": sum(s.files for s in result.sources),
        "files_vanished": sum(s.files_vanished for s in result.sources),
        "deleted_archives": result.deleted,
        "sources": dg.MetadataValue.json(
            [{"name": s.name, "files": s.files, "bytes": s.size_bytes, "error": s.error} for s in result.sources]
        ),
    }
    if result.failed:
        ok = len(result.sources) - len(result.failed)
        record_outcome(context, Outcome.PARTIAL if ok else Outcome.FAILED, ok, len(result.failed), result.message)
        raise dg.Failure(description=result.message, metadata=metadata)
    return _succeed(context, result.message, metadata, len(result.sources))


@dg.op(description="Run a plug-in executor's `async execute(config, settings)`; its string is the output.")
def run_plugin_executor(context: dg.OpExecutionContext, config: PluginRunConfig) -> str:
    _start(context)
    try:
        plugin = load_plugin(config.executor)
        output = run_plugin(plugin, json.loads(config.config_json), MaintenanceSettings())
    except PluginNotFound as exc:
        raise _fail(context, str(exc)) from None
    except Exception as exc:  # a plug-in signals failure by raising anything
        raise _fail(context, f"{config.executor} failed: {type(exc).__name__}: {exc}") from exc
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


@dg.job(name="plugin_executor", tags=JOB_TAGS, description="Maintenance task run by a plug-in executor.")
def plugin_executor_job() -> None:
    run_plugin_executor()


MAINTENANCE_JOBS = [example_executor_job, doc_sync_executor_job, config_backup_executor_job, plugin_executor_job]
# Built-in executor name -> (job, op name); any other executor runs in the plug-in job.
BUILTIN_JOBS = {
    "example_executor": (example_executor_job, "run_example_executor"),
    "doc_sync_executor": (doc_sync_executor_job, "run_doc_sync_executor"),
    "config_backup_executor": (config_backup_executor_job, "run_config_backup_executor"),
}
PLUGIN_JOB = (plugin_executor_job, "run_plugin_executor")
