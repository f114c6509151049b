"""tools/mutation.py: what a module's mutmut results add up to, and which survivors the equivalents file explains."""

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("mutation_tool", REPO_ROOT / "tools" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mutation  # its dataclasses look their module up there while it loads
spec.loader.exec_module(mutation)

M = "orchestration_core.audit.cleanup."


@pytest.mark.parametrize(
    ("mutant", "function"),
    [
        (M + "x_keep_reason__mutmut_15", "keep_reason"),
        (M + "x__keep_reason__mutmut_3", "_keep_reason"),
        (M + "x__utc__mutmut_1", "_utc"),
        (M + "xǁLatestSuccessesǁis_latest__mutmut_2", "LatestSuccesses.is_latest"),
        (M + "xǁLatestSuccessesǁ__init____mutmut_1", "LatestSuccesses.__init__"),
    ],
)
def test_mutant_function(mutant: str, function: str) -> None:
    assert mutation.mutant_function(mutant) == function


@pytest.mark.parametrize(
    ("module", "prefix"),
    [("orchestration_core/audit/cleanup.py", "orchestration_core.audit.cleanup."),
     ("maintenance_jobs/schedule.py", "maintenance_jobs.schedule."),
     ("maintenance_jobs/execution_history/__init__.py", "maintenance_jobs.execution_history.")],
)
def test_module_prefix(module: str, prefix: str) -> None:
    assert mutation.module_prefix(module) == prefix


def test_equivalents_are_read_from_the_headings_only() -> None:
    text = (f"# Equivalent mutants\n\n## {M}x__utc__mutmut_5\n\n```diff\n-a\n+b\n```\n"
            f"Compared only with other aware times.\n\n## `{M}x_cleanup_cutoff__mutmut_12`\n\n"
            f"Mentions {M}x_keep_reason__mutmut_1 in prose, which lists nothing.\n")
    assert mutation.listed_equivalents(text) == {M + "x__utc__mutmut_5", M + "x_cleanup_cutoff__mutmut_12"}


def test_summary_counts_each_status_and_only_the_selected_functions() -> None:
    codes = {
        M + "x_keep_reason__mutmut_1": 1,  # killed
        M + "x_keep_reason__mutmut_2": 3,  # killed (pytest internal error)
        M + "x_keep_reason__mutmut_3": 36,  # timeout
        M + "x_keep_reason__mutmut_4": 0,  # survived, listed as equivalent
        M + "x_keep_reason__mutmut_5": 0,  # survived, unexplained
        M + "x_keep_reason__mutmut_6": 33,  # no tests
        M + "x_keep_reason__mutmut_7": None,  # not checked
        M + "x_prune_successful_runs__mutmut_1": 0,  # not a selected function: not counted
    }
    result = mutation.summarize("orchestration_core/audit/cleanup.py", codes, ("keep_reason",),
                                {M + "x_keep_reason__mutmut_4"})
    assert (result.killed, result.timeout, result.survived, result.equivalent, result.no_tests, result.other) == (
        2, 1, 2, 1, 1, 1)
    assert result.total == 7
    assert result.unexplained == (M + "x_keep_reason__mutmut_5",)
    assert result.score == pytest.approx(300 / 7)
    assert not result.passes


def test_no_function_list_counts_every_mutant_of_the_module() -> None:
    codes = {M + "x_a__mutmut_1": 1, M + "xǁCǁm__mutmut_1": 1}
    assert mutation.summarize("m.py", codes, (), set()).killed == 2


@pytest.mark.parametrize(
    ("killed", "equivalent", "unexplained", "no_tests", "passes"),
    [
        (90, 4, 0, 6, True),  # 90% exactly, every survivor explained, equivalents 4%: the bar
        (89, 4, 0, 7, False),  # 89%
        (90, 0, 1, 9, False),  # 90%, but a survivor nobody explained
        (95, 5, 0, 0, False),  # equivalents 5%: not under the cap
        (96, 4, 0, 0, True),
        (0, 0, 0, 0, False),  # no mutant at all is no evidence
    ],
)
def test_the_bar(killed: int, equivalent: int, unexplained: int, no_tests: int, passes: bool) -> None:
    """At least 90% killed, every survivor killed or listed as an equivalent, equivalents under 5%."""
    codes = {f"{M}x_f__mutmut_{i}": 1 for i in range(killed)}
    codes |= {f"{M}x_g__mutmut_{i}": 0 for i in range(equivalent + unexplained)}
    codes |= {f"{M}x_h__mutmut_{i}": 33 for i in range(no_tests)}
    listed = {f"{M}x_g__mutmut_{i}" for i in range(equivalent)}
    assert mutation.summarize("m.py", codes, (), listed).passes is passes


def test_table_shows_each_figure_of_a_module() -> None:
    result = mutation.ModuleResult(module="orchestration_core/audit/cleanup.py", killed=76, survived=4, timeout=1,
                                   no_tests=0, equivalent=3, seconds=90)
    header, row = mutation.table([result]).splitlines()
    assert header.split() == ["module", "killed", "survived", "timeout", "no", "tests", "equivalent", "score", "time"]
    assert row.split() == ["orchestration_core/audit/cleanup.py", "76", "4", "1", "0", "3", "95.1%", "1.5", "min"]


def test_every_target_names_test_files_that_exist() -> None:
    for module, target in mutation.TARGETS.items():
        assert (REPO_ROOT / module).is_file(), module
        assert target.tests, module
        for test_file in target.tests:
            assert (REPO_ROOT / test_file.partition("::")[0]).is_file(), test_file


def test_a_module_without_postgres_runs_with_the_callers_environment_unchanged(monkeypatch) -> None:
    monkeypatch.delenv("TEST_DATABASE_URL", raising=False)
    with mutation.postgres_for(mutation.Target(tests=("t.py",))) as env:
        assert "TEST_DATABASE_URL" not in env


def test_a_server_the_caller_names_is_used_instead_of_starting_one(monkeypatch) -> None:
    monkeypatch.setenv("TEST_DATABASE_URL", "postgresql+psycopg2://u@127.0.0.1:1/postgres")
    with mutation.postgres_for(mutation.Target(tests=("t.py",), postgres=True)) as env:
        assert env["TEST_DATABASE_URL"] == "postgresql+psycopg2://u@127.0.0.1:1/postgres"


@pytest.mark.integration
def test_a_postgres_module_gets_one_server_for_its_run_and_it_is_gone_after(monkeypatch) -> None:
    import sqlalchemy as sa

    monkeypatch.delenv("TEST_DATABASE_URL", raising=False)
    with mutation.postgres_for(mutation.Target(tests=("t.py",), postgres=True)) as env:
        engine = sa.create_engine(env["TEST_DATABASE_URL"])
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        engine.dispose()
    engine = sa.create_engine(env["TEST_DATABASE_URL"], connect_args={"connect_timeout": 2})
    with pytest.raises(sa.exc.OperationalError):
        engine.connect()
    engine.dispose()
