"""The `racing` console script. Each subcommand lives in its own module exposing `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import sys

from orchestration_core.settings import platform_settings

# Subcommand modules, in the order `racing --help` lists them.
SUBCOMMAND_MODULES: list[str] = ["scrape", "db", "sim", "cleanup", "audit", "check"]


def dagster_home_missing(command: str) -> bool:
    """True (after saying so on stderr) when DAGSTER_HOME is unset: commands that run jobs need the instance."""
    if platform_settings().dagster_home:
        return False
    print(f"racing {command}: DAGSTER_HOME is not set; point it at the folder holding dagster.yaml "
          "(`make run` uses .local/dagster_home)", file=sys.stderr)
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="racing", description="Racing data orchestration on Dagster.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"racing_orchestration.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
