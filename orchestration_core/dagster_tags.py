"""Dagster's run tag keys the project reads and writes, declared here as the project's own strings.

They are Dagster's documented system tags (`dagster/run_key`, `dagster/retry_number`, ...), but the only Python names
Dagster gives them live in its private `dagster._core.storage.tags`; importing from there would put the project's
sensors, jobs and audit pages on a private module (issue #44 keeps those imports to orchestration_core/
dagster_internals.py). The values are Dagster 1.13's, and tests prove them through Dagster's own behaviour, so an
upgrade that renames one fails a test instead of silently reading a tag nobody writes:
tests/orchestration_core/test_dagster_tags.py runs Dagster's sensor daemon (a RunRequest's run key lands under
RUN_KEY_TAG) and its run-retry daemon (the failed run gets WILL_RETRY_TAG and AUTO_RETRY_RUN_ID_TAG; the retry
carries RETRY_NUMBER_TAG, PARENT_RUN_ID_TAG and ROOT_RUN_ID_TAG, and none of the parent's
TAGS_TO_MAYBE_OMIT_ON_RETRY that Dagster's retry can show).
"""

from __future__ import annotations

_PREFIX = "dagster/"

# The run key of the RunRequest a sensor or schedule made the run from (Dagster skips a key any run already has).
RUN_KEY_TAG = f"{_PREFIX}run_key"
# Run groups: a re-execution names the run it re-executes and the group's first run.
PARENT_RUN_ID_TAG = f"{_PREFIX}parent_run_id"
ROOT_RUN_ID_TAG = f"{_PREFIX}root_run_id"
# Run retries (dagster.yaml `run_retries`): a retry's number, counted against `dagster/max_retries`; on a failed run,
# whether the retry daemon will retry it, and the run id of the retry once made.
RETRY_NUMBER_TAG = f"{_PREFIX}retry_number"
WILL_RETRY_TAG = f"{_PREFIX}will_retry"
AUTO_RETRY_RUN_ID_TAG = f"{_PREFIX}auto_retry_run_id"

# The failed run's tags a retry does not copy: they describe the failed run or its retry bookkeeping (run metrics,
# the failure reason, resume and retry markers) or its backfill (Dagster keeps those only while the backfill is
# still requested).
TAGS_TO_MAYBE_OMIT_ON_RETRY = frozenset({
    ".dagster/run_metrics",
    f"{_PREFIX}run_metrics",
    f"{_PREFIX}failure_reason",
    RETRY_NUMBER_TAG,
    f"{_PREFIX}is_resume_retry",
    WILL_RETRY_TAG,
    AUTO_RETRY_RUN_ID_TAG,
    f"{_PREFIX}backfill",
    f"{_PREFIX}parent_backfill_id",
    f"{_PREFIX}root_backfill_id",
})
