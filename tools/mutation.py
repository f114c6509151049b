"""Mutation testing of the decision modules with mutmut (`make mutation`, `make mutation MODULE=path/to/module.py`).

Each module runs on its own: a fresh `mutants/` copy, mutmut told to mutate only that file (and, where a module also
holds code only the Postgres tier reaches, only its decision functions), with the fast test files that state its
behaviour. One mutant at a time (`--max-children 1`): the machine is shared. The table gives, per module, the mutants
killed, survived, timed out and with no test, how many survivors tests/mutation_equivalents.md explains, and the score:
killed (timeouts count as killed, as mutmut counts them) over all mutants. The bar is 90% in every module, every
survivor either killed by a test or listed as an equivalent, and equivalents under 5% of the module's mutants; the exit
status is 1 when a module misses it.

mutmut runs the tests inside `mutants/`, which must come first on sys.path: the editable install maps the packages to
the checkout, and a checkout import would make every mutant look untested. mutmut puts `mutants/` first itself; this
script imports nothing of the project before it does, and a run whose mutants are all "no tests" fails.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = REPO_ROOT / "tests" / "mutation_equivalents.md"
SCORE_BAR = 90.0
EQUIVALENTS_CAP = 5.0  # per cent of a module's mutants that may be listed as equivalent

# What mutmut's exit codes mean (mutmut.stats.status_by_exit_code); anything else is "suspicious".
STATUS_BY_EXIT_CODE = {
    1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 2: "interrupted", None: "not checked",
    34: "skipped", 35: "suspicious", 36: "timeout", 37: "type check", -24: "timeout", 24: "timeout", 152: "timeout",
    255: "timeout", -11: "segfault", -9: "segfault",
}


@dataclass(frozen=True)
class Target:
    """A decision module: the fast test files that state its behaviour, and (when the file also holds code only the
    Postgres tier reaches) the functions whose mutants count."""

    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    marker: str = ""  # e.g. "unit": only these tests of files that also hold Postgres-backed ones
    # The tests need Postgres (SQL decisions): one embedded server for the module's whole run, which every mutant's
    # test session reaches through TEST_DATABASE_URL instead of starting its own.
    postgres: bool = False


# Smallest and most central first: `make mutation` runs them in this order.
TARGETS: dict[str, Target] = {
    "orchestration_core/audit/cleanup.py": Target(
        tests=("tests/orchestration_core/audit/test_cleanup_rules.py",
               "tests/orchestration_core/audit/test_cleanup_history.py::test_history_unrecorded"),
        functions=("reindex_due", "cleanup_cutoff", "parent_run_id_of", "failed_retention_cutoff", "_utc",
                   "keep_reason", "_keep_reason", "history_unrecorded", "_parent_is_kept"),
    ),
    "orchestration_core/tag_numbers.py": Target(tests=("tests/orchestration_core/test_tag_numbers.py",)),
    # failure_reason reads the event log, and its query's order and limit change only what it costs: its mutants
    # would be equivalents past the 5% allowed. tests/orchestration_core/test_run_outcome.py still states its answers.
    "orchestration_core/run_outcome.py": Target(
        tests=("tests/orchestration_core/test_run_outcome.py",),
        functions=("classify_outcome", "outcome_tags", "one_line", "record_outcome", "outcome_of"),
    ),
    "racing_orchestration/checkpoints/windows.py": Target(
        tests=("tests/racing_orchestration/checkpoints/test_checkpoint_sensors.py",
               "tests/racing_orchestration/checkpoints/test_checkpoint_launch_ahead.py",
               "tests/racing_orchestration/checkpoints/test_checkpoint_jobs.py"),
        marker="unit",
    ),
    "racing_orchestration/tab/models.py": Target(
        tests=("tests/racing_orchestration/tab/test_parsers.py", "tests/racing_orchestration/tab/test_storable_payloads.py",
               "tests/racing_orchestration/tab/test_showable_errors.py"),
        marker="unit",
    ),
    # The git-facing and path rules; the pydantic models' validators call them (decorated methods mutmut leaves alone).
    "maintenance_jobs/executor_configs.py": Target(
        tests=("tests/maintenance_jobs/test_executor_configs.py",),
        functions=("_not_an_option", "check_branch", "check_docs_path", "check_gitea_repo", "check_under_roots"),
    ),
    "maintenance_jobs/dispatch.py": Target(tests=("tests/maintenance_jobs/test_dispatch.py",)),
    "maintenance_jobs/schedule.py": Target(
        tests=("tests/maintenance_jobs/test_schedule.py", "tests/maintenance_jobs/test_execution_history_units.py")),
    "maintenance_jobs/text_rules.py": Target(
        tests=("tests/maintenance_jobs/test_text_rules.py", "tests/maintenance_jobs/test_label_characters.py",
               "tests/orchestration_core/test_unshowable.py")),
    "maintenance_jobs/execution_history/tag_values.py": Target(
        tests=("tests/maintenance_jobs/test_tag_values.py", "tests/maintenance_jobs/test_execution_history_units.py")),
    # system_resolver is the host's DNS (getaddrinfo), not a rule: the tests replace it, as production's seam allows.
    "maintenance_jobs/upstream_urls.py": Target(
        tests=("tests/maintenance_jobs/test_upstream_urls.py",),
        functions=("check_host_name", "check_upstream_url", "is_public_address", "pin_public_host",
                   "PinnedHost.curl_resolve"),
    ),
    # card_facts, lock_card_day and record_card_checks read and lock the race database (the Postgres tier).
    "racing_orchestration/race_data/card_checks.py": Target(
        tests=("tests/racing_orchestration/race_data/test_card_rules.py",),
        functions=("runners_due", "_race_list", "card_checks", "check_evaluations", "checks_while_scraping"),
    ),
    "orchestration_core/run_config_rules.py": Target(tests=("tests/orchestration_core/test_run_config_rules.py",)),
    # The unshowable class itself is one module-level regex, which mutmut does not mutate (it mutates functions):
    # text_rules.py refuses it, showable.py escapes it.
    "racing_orchestration/tab/showable.py": Target(
        tests=("tests/racing_orchestration/tab/test_showable_errors.py", "tests/orchestration_core/test_unshowable.py"),
        marker="unit"),
    # Who may claim a row and which rows a tick picks up again: SQL, held to its rules on Postgres.
    "racing_orchestration/race_db/checkpoints.py": Target(
        tests=("tests/racing_orchestration/race_db/test_checkpoint_ledger.py",), postgres=True),
    # What a since/until range, a filter and the paging cursor select from the history, which skips touch a range,
    # and how the recorded-through mark moves. Writing a run's summary is the recorder's (test_execution_history.py).
    "maintenance_jobs/execution_history/store.py": Target(
        tests=("tests/maintenance_jobs/test_execution_history_ranges.py",),
        functions=("HistoryFilter.where", "newest_rows", "task_rows", "record_skip", "skips_between",
                   "recorded_through", "advance_recorded_through"),
        postgres=True,
    ),
    # The run-storage side of the same ranges, and which runs count as not recorded yet (the items' tags and the
    # storage lookup are not range decisions).
    "maintenance_jobs/execution_history/run_storage.py": Target(
        tests=("tests/maintenance_jobs/test_execution_history_ranges.py",),
        functions=("_naive", "_tagged", "_maintenance_runs", "_not_yet_recorded", "live_rows", "existing_run_ids",
                   "unrecorded_ended_runs"),
        postgres=True,
    ),
}


@dataclass
class ModuleResult:
    module: str
    killed: int = 0
    survived: int = 0
    timeout: int = 0
    no_tests: int = 0
    other: int = 0
    equivalent: int = 0
    unexplained: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.killed + self.survived + self.timeout + self.no_tests + self.other

    @property
    def score(self) -> float:
        """Killed or timed out, in per cent of all mutants; 0 when there are none."""
        return 100.0 * (self.killed + self.timeout) / self.total if self.total else 0.0

    @property
    def passes(self) -> bool:
        return (self.total > 0 and self.score >= SCORE_BAR and not self.unexplained
                and 100.0 * self.equivalent / self.total < EQUIVALENTS_CAP)


def mutant_function(mutant: str) -> str:
    """The function (or `Class.method`) a mutant id changes: `pkg.mod.x_name__mutmut_3` -> `name`,
    `pkg.mod.xǁCls ǁmeth__mutmut_1` -> `Cls.meth`."""
    mangled = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    if "ǁ" in mangled:
        _, cls, method = mangled.split("ǁ")
        return f"{cls}.{method}"
    return mangled.removeprefix("x_")


def module_prefix(module: str) -> str:
    """The dotted prefix of a module's mutant ids: `a/b/c.py` -> `a.b.c.`."""
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".") + "."


def selected(mutant: str, functions: tuple[str, ...]) -> bool:
    return not functions or any(fnmatch.fnmatchcase(mutant_function(mutant), f) for f in functions)


def listed_equivalents(text: str) -> set[str]:
    """Mutant ids in tests/mutation_equivalents.md: each entry's heading is `## <mutant id>`."""
    return set(re.findall(r"^##\s+`?([\w.ǁ]+__mutmut_\d+)`?\s*$", text, flags=re.MULTILINE))


def summarize(module: str, exit_codes: dict[str, int | None], functions: tuple[str, ...], equivalents: set[str],
              seconds: float = 0.0) -> ModuleResult:
    result = ModuleResult(module=module, seconds=seconds)
    unexplained = []
    for mutant, code in sorted(exit_codes.items()):
        if not selected(mutant, functions):
            continue
        status = STATUS_BY_EXIT_CODE.get(code, "suspicious")
        if status == "killed":
            result.killed += 1
        elif status == "timeout":
            result.timeout += 1
        elif status == "no tests":
            result.no_tests += 1
        elif status == "survived":
            result.survived += 1
            if mutant in equivalents:
                result.equivalent += 1
            else:
                unexplained.append(mutant)
        else:
            result.other += 1
    result.unexplained = tuple(unexplained)
    return result


COLUMNS = ("module", "killed", "survived", "timeout", "no tests", "equivalent", "score", "time")


def table(results: list[ModuleResult]) -> str:
    rows = [COLUMNS] + [
        (r.module, str(r.killed), str(r.survived), str(r.timeout), str(r.no_tests), str(r.equivalent),
         f"{r.score:.1f}%", f"{r.seconds / 60:.1f} min")
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


@contextlib.contextmanager
def postgres_for(target: Target) -> Iterator[dict[str, str]]:
    """The child's environment: for a Postgres module, with TEST_DATABASE_URL naming a server started for it."""
    if not target.postgres or os.environ.get("TEST_DATABASE_URL"):
        yield dict(os.environ)
        return
    # The parent only: the child imports the project from mutants/ (see the module's docstring).
    from local_stack.embedded_postgres import psycopg2_url, temporary_embedded_postgres

    with temporary_embedded_postgres("racing-mutation-pg-") as server:
        yield {**os.environ, "TEST_DATABASE_URL": psycopg2_url(server.get_uri())}


def run_module(module: str, python: str) -> ModuleResult:
    """mutmut over one module in a child process of its own (mutmut keeps its config and state per process)."""
    target = TARGETS[module]
    shutil.rmtree(REPO_ROOT / "mutants", ignore_errors=True)
    started = time.monotonic()
    with postgres_for(target) as env:
        subprocess.run([python, __file__, "--mutmut-child", module], cwd=REPO_ROOT, check=False, env=env)
    seconds = time.monotonic() - started
    meta = REPO_ROOT / "mutants" / (module + ".meta")
    exit_codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    equivalents = listed_equivalents(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else set()
    return summarize(module, exit_codes, target.functions, equivalents, seconds)


def mutmut_child(module: str) -> None:
    """Runs inside the child: mutmut's config from pyproject.toml, narrowed to this module and its tests."""
    import mutmut.configuration as configuration

    target = TARGETS[module]
    config = configuration._load_config()
    config.only_mutate = [module]
    config.pytest_add_cli_args_test_selection = list(target.tests) + (["-m", target.marker] if target.marker else [])
    configuration._config = config
    from mutmut.__main__ import cli

    prefix = module_prefix(module)
    names = [f"{prefix}x_{f}__mutmut_*" if "." not in f else
             f"{prefix}xǁ{f.split('.')[0]}ǁ{f.split('.')[1]}__mutmut_*" for f in target.functions]
    cli(["run", "--max-children", "1", *names])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="paths of decision modules (default: all, in TARGETS' order)")
    parser.add_argument("--mutmut-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mutmut_child:
        mutmut_child(args.mutmut_child)
        return 0
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"not a decision module: {', '.join(unknown)} (tools/mutation.py TARGETS lists them)")
    results = []
    for module in args.modules or list(TARGETS):
        results.append(run_module(module, sys.executable))
        print(table(results[-1:]), flush=True)
    print("\n" + table(results))
    for r in results:
        if not r.total:
            print(f"{r.module}: mutmut tested no mutant (its output above says why: a failing clean run, a bad path)")
        if r.total and r.no_tests == r.total:
            print(f"{r.module}: every mutant has no test: the tests imported the checkout, not mutants/")
        for mutant in r.unexplained:
            print(f"survived, not in tests/mutation_equivalents.md: {mutant}  (mutmut show {mutant})")
    return 0 if all(r.passes for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
