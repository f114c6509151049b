"""`racing audit` reads run tags that whoever launched the run chose: numbers are clamped and no control or bidi
character of a tag reaches the terminal."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from orchestration_core.audit.queries import recent_runs
from racing_orchestration.cli import main
from racing_orchestration.cli.audit import shown_cells
from tests.orchestration_core.audit.run_factory import RunFactory

UNSHOWABLE = ["\x1b", "\x07", "\x00", "\x9b", "\u202e", "\u2066", "\u200f", "\u2028"]


@pytest.mark.unit
@pytest.mark.parametrize("character", UNSHOWABLE)
def test_every_text_cell_is_shown_escaped_and_numbers_stay(character: str) -> None:
    [row] = shown_cells([["race", f"{character}[2J end", 7, None]])
    assert character not in row[1] and row[1].endswith("[2J end") and row[2:] == [7, None] and row[0] == "race"


@pytest.mark.unit
def test_a_long_cell_is_not_cut() -> None:
    assert shown_cells([["x" * 5000]]) == [["x" * 5000]]


@pytest.mark.integration
def test_hostile_tags_are_clamped_and_escaped(pg_instance: dg.DagsterInstance, postgres_dagster_home: Path,
                                              capsys) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202eevil"
    RunFactory(pg_instance).recorded(dg.DagsterRunStatus.SUCCESS, tags={
        "racing/outcome": hostile,
        "dagster/retry_number": "9" * 400,
        "racing/items_processed": "9" * 5000,  # int() refuses more than 4300 digits
        "racing/items_failed": "-" + "9" * 30,
    })
    [run] = recent_runs(pg_instance, 10, None)
    # Clamped to the readers' bounds (orchestration_core/tag_numbers.py): a million retries, a billion items, never < 0.
    assert run.retry_number == 1_000_000
    assert (run.items_processed, run.items_failed) == (1_000_000_000, 0)
    assert main(["audit", "--limit", "10"]) == 0
    out = capsys.readouterr().out
    assert not any(character in out for character in UNSHOWABLE)
    assert "\\x1b]0;owned\\x07" in out and "\\u202eevil" in out and "1000000" in out
    # Escaped before the layout: every line of the table is as wide as its header's rule.
    header, rule, *rows = out.strip().splitlines()
    assert all(len(row) <= len(rule) for row in rows), out
