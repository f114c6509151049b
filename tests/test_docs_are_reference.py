"""Docs, docstrings and comments describe the system, not the sessions that built it (issue 44, item 5).

A run of the suite, a CI job, a working session's "stop", a commit hash: each is history, and the history is in
`git log`. What a reader needs is the reason and the latest figure. This test reads README.md, BENCHMARKS.md,
RELIABILITY.md and docs/**, the comments and docstrings of every tracked *.py file, and the comment lines
of the Makefile, .ci/run, deploy/** and every YAML and shell file; BENCHMARKS.md stays a reference of at most 400
lines.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MAX_LINES = 400
# This file quotes refused phrases in its own table.
SELF = Path(__file__).resolve().relative_to(REPO_ROOT).as_posix()
DOCS = ("README.md", "BENCHMARKS.md", "RELIABILITY.md", "SECURITY.md")

# A count that follows "run"/"runs"/"stop" as a quantity ("run 3 times", "runs 5 at once") is not history.
_QUANTITY = (
    r"(?:times?|at once|at a time|in parallel|concurrently|side by side|per\b|each|workers?|processes|threads|steps?"
    r"|tests?|jobs?|races?|checkpoints?|requests?|rows?|days?|hours?|h\b|minutes?|min\b|seconds?|s\b|ms\b|%|x\b|×)"
)
_NUMBERS = r"\d+(?:\s*(?:-|–|to|and|,)\s*\d+)*"
HISTORY_PATTERNS = {
    "a run, CI job or stop of a past session": re.compile(
        rf"(?<![-\w/.=])(?:[Rr]uns?|CI|[Ss]tops?)\s+{_NUMBERS}\b(?!\s*{_QUANTITY})(?!\.\d)"
    ),
    "a commit hash": re.compile(r"(?<![-\w/.#:=@])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![-\w/])"),
    "a session's history": re.compile(
        r"\b(?:(?:the )?(?:last|previous|this|next) (?:stop|audit|session)|before the fix|after the fix)\b",
        re.IGNORECASE,
    ),
}

# Each row: (phrase, refused?). The pattern must tell these apart; a new false alarm gets a row here.
PHRASES = [
    ("the suite's run 70", True),
    ("(run 40, BENCHMARKS.md \"Test suite\")", True),
    ("Run 51: a T-15's first run failed", True),
    ("runs 65-73", True),
    ("runs 47 and 48", True),
    ("green there in runs\n    46, 48 and 49", True),
    ("in runs 52-64, before", True),
    ("CI 38", True),
    ("CI 36 and runs 45-46", True),
    ("Stop 43: run workers forked", True),
    ("stop 38's main", True),
    ("it took 205 s on 4ff82fa", True),
    ("After freezing the start-up heap (b2abfbb)", True),
    ("fixed in 5e93fca", True),
    ("a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9", True),
    ("new inputs of the kinds the last audit found", True),
    ("raised CheckError before the fix", True),
    ("the previous stop's CI log", True),
    ("run 3 times", False),
    ("runs 5 at once", False),
    ("Steps run 8 at a time", False),
    ("dagster/retry_number", False),
    ("RUN 1", False),
    ("RUN pip install -r requirements.lock", False),
    ("bench/cleanup.py --runs 2000 --kept 200", False),
    ("a run 1 second later", False),
    ("it runs 2 workers", False),
    ("stops Postgres for 30 s", False),
    ("the run stops 5 minutes before the jump", False),
    ("race_id 0b7a5e1c-6c0f-4e58-9a57-0d4d8f1c2b3a", False),
    ("--hash=sha256:0b7a5e1c6c0f4e58", False),
    ("a decade of deadbeef", False),
    ("retry 1,000,000 times", False),
    ("the run's tags", False),
    ("a CI job runs the suite", False),
    ("python 3.11 runs 2.5x faster", False),
]


def history_mentions(text: str) -> list[tuple[str, str]]:
    """(kind, matched text) for each history mention in text."""
    return [(kind, m.group(0)) for kind, pattern in HISTORY_PATTERNS.items() for m in pattern.finditer(text)]


def python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python module."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    found.append((body[0].lineno, body[0].value.value))
    return found


def hash_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of each `#` comment line of a Makefile, shell script, Dockerfile or YAML file."""
    return [(n, line) for n, line in enumerate(source.splitlines(), 1) if line.lstrip().startswith("#")]


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.splitlines() if (REPO_ROOT / p).is_file()]


def scanned_prose() -> dict[str, list[tuple[int, str]]]:
    """Each scanned file and its prose: docs whole, code by its comments and docstrings."""
    prose: dict[str, list[tuple[int, str]]] = {}
    for path in tracked_files():
        text_of = (REPO_ROOT / path).read_text
        if path in DOCS or (
            path.startswith("docs/") and path.endswith(".md")
        ):
            prose[path] = list(enumerate(text_of(encoding="utf-8").splitlines(), 1))
        elif path.endswith(".py") and path != SELF:
            prose[path] = python_prose(text_of(encoding="utf-8"))
        elif path in ("Makefile", ".ci/run") or path.endswith((".yml", ".yaml", ".sh")) or (
            path.startswith("deploy/") and not path.endswith((".json", ".lock", ".png"))
        ):
            prose[path] = hash_comments(text_of(encoding="utf-8", errors="replace"))
    return prose


@pytest.mark.parametrize(("phrase", "refused"), PHRASES)
def test_the_pattern_tells_history_from_quantities(phrase: str, refused: bool) -> None:
    assert bool(history_mentions(phrase)) is refused, history_mentions(phrase)


def test_docs_comments_and_docstrings_hold_no_session_history() -> None:
    prose = scanned_prose()
    assert "README.md" in prose and "BENCHMARKS.md" in prose and "Makefile" in prose
    found = [
        f"{path}:{line}: {kind}: {match!r}"
        for path, chunks in sorted(prose.items())
        for line, text in chunks
        for kind, match in history_mentions(text)
    ]
    assert not found, f"{len(found)} history mentions (say the reason and the figure; history is in git log):\n" + (
        "\n".join(found)
    )


def test_benchmarks_is_a_reference_of_at_most_400_lines() -> None:
    lines = (REPO_ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").count("\n")
    assert lines <= BENCHMARKS_MAX_LINES, f"BENCHMARKS.md has {lines} lines"


def test_every_benchmark_script_has_a_section() -> None:
    text = (REPO_ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO_ROOT / "bench").glob("*.py")) if f"bench/{p.name}" not in text]
    assert not missing, f"bench scripts BENCHMARKS.md does not describe: {missing}"
