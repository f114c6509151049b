"""The `racing` console script. Each subcommand lives in its own module exposing `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping

from orchestration_core.cli_environment import (
    EXIT_MISSING_ENVIRONMENT,
    environment_missing,
    instance_variables,
    process_environment,
)

# Subcommand modules, in the order `racing --help` lists them.
SUBCOMMAND_MODULES: list[str] = ["scrape", "db", "sim", "cleanup", "audit", "check", "verify_checks"]


def needs_instance(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    """The variables of a command that reads the Dagster instance: DAGSTER_HOME and what its dagster.yaml reads."""
    return instance_variables(env)


def needs_instance_and_race_db(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    """`scrape`/`check`: the instance; with --in-process the job runs here, so the race database too."""
    return instance_variables(env) + (["RACING_DATABASE_URL"] if args.in_process else [])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="racing", description="Racing data orchestration on Dagster.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"racing_orchestration.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Each subcommand names the variables it needs (`needs`): checked before it touches any database, so a missing
    # one is one line naming it, not Dagster's config traceback.
    needs = getattr(args, "needs", None)
    if needs is not None and environment_missing(f"racing {args.command}", needs(args, process_environment())):
        return EXIT_MISSING_ENVIRONMENT
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
