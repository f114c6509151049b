"""`racing db upgrade|current`: apply and inspect the race database migrations."""

from __future__ import annotations

import argparse
import sys

from orchestration_core.cli_environment import not_set
from orchestration_core.settings import platform_settings, secret
from racing_orchestration.race_db.migrations import (
    current_revision,
    head_revision,
    schema_problem,
    upgrade,
)

URL_ENV = "RACING_DATABASE_URL"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("db", help="race database migrations")
    actions = parser.add_subparsers(dest="db_command", required=True)
    for name, handler, help_text in (
        ("upgrade", _upgrade, "apply migrations up to the code's revision"),
        ("current", _current, "print the database's revision (exit 1 when behind)"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--url", default=None, help=f"database URL (default: ${URL_ENV})")
        action.set_defaults(handler=handler)


def _url(args: argparse.Namespace) -> str | None:
    url = args.url or secret(platform_settings().racing_database_url)
    if not url:
        print(f"racing db {args.db_command}: no database URL: pass --url or set {URL_ENV} "
              f"({not_set(URL_ENV)})", file=sys.stderr)
    return url


def _upgrade(args: argparse.Namespace) -> int:
    if not (url := _url(args)):
        return 2
    before = current_revision(url)
    after = upgrade(url)
    if before == after:
        print(f"race database already at revision {after}")
    else:
        print(f"race database upgraded from {before or 'empty'} to {after}")
    return 0


def _current(args: argparse.Namespace) -> int:
    if not (url := _url(args)):
        return 2
    current = current_revision(url)
    print(current or "none")
    if problem := schema_problem(current, head_revision()):
        print(problem, file=sys.stderr)
        return 1
    return 0
