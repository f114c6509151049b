"""orchestration_core/run_outcome.py: a run's outcome from its item counts, the tags that record it, and the outcome
the audit shows for a run that finished, failed or never tagged itself."""

from __future__ import annotations

import dagster as dg
import pytest

from maintenance_jobs.execution_history.recorder import failure_reason
from orchestration_core.run_outcome import (
    Outcome,
    classify_outcome,
    one_line,
    outcome_of,
    outcome_tags,
    record_outcome,
)

pytestmark = pytest.mark.unit
S = dg.DagsterRunStatus


@pytest.mark.parametrize(
    ("processed", "failed", "expected"),
    [
        (10, 0, Outcome.SUCCESS),
        (0, 0, Outcome.SUCCESS),  # nothing to do is not a failure
        (10, 1, Outcome.PARTIAL),
        (1, 1, Outcome.PARTIAL),  # one item each way: the boundary of both rules
        (1, 10, Outcome.PARTIAL),
        (0, 1, Outcome.FAILED),
        (0, 10, Outcome.FAILED),
        (10, -1, Outcome.SUCCESS),  # a negative count is no failure
        (-1, 1, Outcome.FAILED),
    ],
)
def test_outcome_from_item_counts(processed: int, failed: int, expected: Outcome) -> None:
    assert classify_outcome(processed, failed) is expected


def test_outcome_tags_are_strings_filterable_in_the_ui() -> None:
    assert outcome_tags(Outcome.PARTIAL, 12, 3) == {
        "racing/outcome": "partial", "racing/items_processed": "12", "racing/items_failed": "3"}


@pytest.mark.parametrize(("error", "tagged"), [(None, None), ("", None), ("timeout", "timeout"),
                                               ("x" * 500, "x" * 500), ("x" * 501, "x" * 500)])
def test_the_error_tag_is_there_only_with_an_error_and_at_most_500_characters(error, tagged) -> None:
    tags = outcome_tags(Outcome.FAILED, 0, 2, error)
    assert tags.get("racing/error") == tagged
    assert tags["racing/outcome"] == "failed"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("KeyError: 'x'", 500, "KeyError: 'x'"),
        ("line one\n  line two\t\tend ", 500, "line one line two end"),
        ("abcde", 5, "abcde"),  # exactly the limit: kept whole
        ("abcdef", 5, "abcd…"),  # one over: cut with an ellipsis, still the limit long
        ("a  b  c", 5, "a b c"),  # the limit counts the collapsed text
        ("", 5, ""),
    ],
)
def test_one_line(text: str, limit: int, expected: str) -> None:
    assert one_line(text, limit) == expected


def test_one_line_defaults_to_the_error_tags_500_characters() -> None:
    assert one_line("y" * 600) == "y" * 499 + "…"
    assert one_line("y" * 500) == "y" * 500


@pytest.mark.parametrize(
    ("status", "tags", "expected"),
    [
        (S.SUCCESS, {"racing/outcome": "partial"}, "partial"),
        (S.SUCCESS, {"racing/outcome": "failed"}, "failed"),
        (S.SUCCESS, {}, "success"),  # finished without tagging itself
        (S.FAILURE, {"racing/outcome": "success"}, "failed"),  # crashed after tagging: the status wins
        (S.FAILURE, {}, "failed"),
        (S.CANCELED, {"racing/outcome": "success"}, "canceled"),
        (S.STARTED, {}, "started"),
        (S.QUEUED, {}, "queued"),
    ],
)
def test_outcome_of_a_run(status: dg.DagsterRunStatus, tags: dict[str, str], expected: str) -> None:
    assert outcome_of(status, tags) == expected


# --- The reason a run failed and the tags a run writes, read back from a real (in-memory) instance -----------------


def _run(instance: dg.DagsterInstance, body) -> dg.DagsterRun:
    @dg.op
    def work(context) -> None:
        body(context)

    @dg.job
    def one_step() -> None:
        work()

    result = one_step.execute_in_process(instance=instance, raise_on_error=False)
    return instance.get_run_by_id(result.run_id)


def _raise(error: Exception):
    def body(context) -> None:
        del context
        raise error
    return body


def test_the_failure_reason_is_the_user_codes_error_on_one_line() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        run = _run(instance, _raise(ValueError("bad\n   input from\tTAB")))
        assert run.status == S.FAILURE
        assert failure_reason(instance, run.run_id) == "ValueError: bad input from TAB"


def test_a_long_failure_reason_is_cut_to_the_error_tags_length() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        run = _run(instance, _raise(RuntimeError("z" * 900)))
        reason = failure_reason(instance, run.run_id)
        assert reason == ("RuntimeError: " + "z" * 900)[:499] + "…"


def test_a_run_that_failed_outside_its_steps_gives_the_run_failures_message() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        run = _run(instance, lambda context: None)
        instance.report_run_failed(run, message="worker lost:\n  container exited 137")
        assert failure_reason(instance, run.run_id) == "worker lost: container exited 137"


def test_a_successful_run_has_no_failure_reason() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        run = _run(instance, lambda context: None)
        assert failure_reason(instance, run.run_id) is None


def test_record_outcome_tags_the_running_run() -> None:
    written = []
    with dg.DagsterInstance.ephemeral() as instance:
        run = _run(instance, lambda context: written.append(record_outcome(context, Outcome.PARTIAL, 5, 2, "one bad")))
        expected = {"racing/outcome": "partial", "racing/items_processed": "5", "racing/items_failed": "2",
                    "racing/error": "one bad"}
        assert written == [expected]
        assert {key: run.tags[key] for key in expected} == expected
