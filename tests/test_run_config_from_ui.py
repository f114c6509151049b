"""Run config from the UI, GraphQL or the CLI is data: it cannot choose the deployment's endpoints, secrets or folders,
and no op config value is read from the run's environment.

Anyone who reaches the webserver may launch any job with any run config (SECURITY.md). Dagster lets run config set
every op config field and every resource field, and resolves `{"env": NAME}` for string and number fields inside the
run worker. These tests walk every job of both code locations and probe each place run config reaches.
"""

from __future__ import annotations

import dagster as dg
import pytest

# Names of resource fields that carry an endpoint, a secret or a folder today or would in a future resource; each is
# probed on every resource of every job (a resource that takes none refuses them all).
ENDPOINT_FIELDS = ("base_url", "url", "token", "database_url", "path", "work_dir", "base_dir", "timezone",
                   "from_email", "user_agent", "timeout_seconds", "max_attempts")


def _all_jobs() -> list[dg.JobDefinition]:
    from maintenance_jobs.definitions import defs as maintenance_defs
    from racing_orchestration.definitions import defs as racing_defs

    jobs = []
    for defs in (racing_defs, maintenance_defs):
        jobs.extend(defs.resolve_all_job_defs())
    return jobs


JOBS = {job.name: job for job in _all_jobs()}


def _errors_at(job: dg.JobDefinition, run_config: dict, path: str) -> list[str]:
    """The config errors Dagster's launch-time validation reports at `path` (other ops' missing config aside)."""
    try:
        dg.validate_run_config(job, run_config)
    except dg.DagsterInvalidConfigError as exc:
        return [error.message for error in exc.errors if path in error.message]
    return []


def _op_config_string_fields(job: dg.JobDefinition) -> list[tuple[str, str, object]]:
    """(op, field, Field) for each op-config field of `job`, from the run config schema the launchpad shows."""
    fields = []
    ops = job.run_config_schema.config_type.fields.get("ops")
    if ops is None:
        return fields
    for op_name, op_field in ops.config_type.fields.items():
        config = op_field.config_type.fields.get("config")
        if config is None or not hasattr(config.config_type, "fields"):
            continue
        for name, field in config.config_type.fields.items():
            fields.append((op_name, name, field))
    return fields


# Sorted: the schema's order varies between processes, and pytest-xdist workers must collect the same list.
OP_FIELDS = sorted((job_name, op, field) for job_name, job in JOBS.items()
                   for op, field, _ in _op_config_string_fields(job))


@pytest.mark.unit
def test_the_probe_reaches_every_configurable_op() -> None:
    # The walk below must see the ops run config can reach, or the env probe would pass by probing nothing.
    ops = {(job, op) for job, op, _ in OP_FIELDS}
    for expected in [("pre_race_t60", "take_odds_snapshot"), ("post_race_t5", "check_race_result"),
                     ("morning_scrape", "plan_scrape_combinations"), ("morning_scrape", "scrape_combination"),
                     ("cleanup_job_runs", "prune_old_successful_runs"), ("doc_sync_executor", "run_doc_sync_executor"),
                     ("config_backup_executor", "run_config_backup_executor"),
                     ("plugin_executor", "run_plugin_executor"), ("example_executor", "run_example_executor")]:
        assert expected in ops, expected
    assert len(OP_FIELDS) >= 30


@pytest.mark.unit
@pytest.mark.parametrize(("job_name", "op", "field"), OP_FIELDS, ids=[f"{j}:{o}.{f}" for j, o, f in OP_FIELDS])
def test_no_op_config_value_is_read_from_the_environment(job_name: str, op: str, field: str, monkeypatch) -> None:
    # `{"env": "GITEA_TOKEN"}` in a string field put the token into the run's tags, log and /executions. The variable
    # is set here as in a run worker: an unset one fails Dagster's own resolution and would hide the hole.
    monkeypatch.setenv("GITEA_TOKEN", "canary-token-1234")
    for value in ({"env": "GITEA_TOKEN"}, [{"env": "GITEA_TOKEN"}]):  # a scalar field, and a list's items
        run_config = {"ops": {op: {"config": {field: value}}}}
        errors = _errors_at(JOBS[job_name], run_config, f"root:ops:{op}:config:{field}")
        assert errors, f"{job_name}: ops.{op}.config.{field} accepts {value!r}"
        assert not any("canary-token" in error for error in errors)


RESOURCE_PROBES = sorted((job_name, key, name) for job_name, job in JOBS.items() for key in job.resource_defs
                         for name in ENDPOINT_FIELDS)


@pytest.mark.unit
@pytest.mark.parametrize(("job_name", "key", "name"), RESOURCE_PROBES,
                         ids=[f"{j}:{k}.{n}" for j, k, n in RESOURCE_PROBES])
def test_run_config_cannot_configure_a_resource(job_name: str, key: str, name: str) -> None:
    # `resources.gitea.config.base_url: "ext::sh -c …"` ran a command in the run worker with GITEA_TOKEN in its
    # environment; `tab_client.base_url` pointed a scrape anywhere; `race_export.path` and the IO manager's `base_dir`
    # wrote (and read back pickles) in any folder the run could write.
    # Refused as a field the resource does not have: "missing required entry" for another field (Dagster's answer to
    # a partial override) would pass this probe while the whole override is still accepted.
    run_config = {"resources": {key: {"config": {name: "ext::sh -c id;#"}}}}
    errors = _errors_at(JOBS[job_name], run_config, f"root:resources:{key}:config")
    assert any(f'unexpected config entry "{name}"' in error for error in errors), (
        f"{job_name}: resources.{key}.config.{name} is a field run config can set")


@pytest.mark.unit
def test_the_resource_probe_covers_the_resources_that_carry_endpoints() -> None:
    keys = {key for _, key, _ in RESOURCE_PROBES}
    assert {"tab_client", "race_db", "race_export", "gitea", "maintenance_registry", "io_manager"} <= keys
