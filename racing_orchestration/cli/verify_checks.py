"""`racing verify-checks [--day YYYY-MM-DD] [--json]`: do the recorded asset checks match the stored data?

Each asset check's latest evaluation recorded for the day, compared with a fresh evaluation of its rule over the race
database now (racing_orchestration/race_data/recorded_checks.py). Exit 0 when every recorded check matches, 1 on a
mismatch, 2 on bad input or a race database whose schema is behind the code. `--json` prints {"day", "checked", "mismatches": [{"check", "partition", "recorded",
"now"}]}, a shape scripts rely on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Mapping

from orchestration_core.cli_environment import instance_variables

EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2


def needs_instance_and_race_db(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    """The recorded checks are in the Dagster instance, the data they judge in the race database."""
    return [*instance_variables(env), "RACING_DATABASE_URL"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify-checks",
        help="compare every asset check's latest recorded result for a racing day with a fresh evaluation",
        description="For one racing day (default today in RACING_TIMEZONE), compares each asset check's latest "
        "evaluation recorded in the instance in $DAGSTER_HOME (race_cards' card checks, racing_day's completeness "
        "checks) with its rule evaluated now over the race database (RACING_DATABASE_URL). Checks with nothing "
        "recorded for the day are listed, not compared. Exit 0 when all match, 1 on a mismatch, 2 on a bad "
        "--day or a race database behind the code.",
    )
    parser.add_argument("--day", default=None, help="the racing day, YYYY-MM-DD (default: today)")
    parser.add_argument("--json", action="store_true", help='print {"day", "checked", "mismatches"} as JSON')
    parser.set_defaults(handler=run, needs=needs_instance_and_race_db)


def parse_day(text: str | None, now: dt.datetime, tz: str) -> dt.date:
    """The --day value, or today in `tz`; ValueError naming the expected form."""
    if text is None:
        from zoneinfo import ZoneInfo

        return now.astimezone(ZoneInfo(tz)).date()
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--day {text!r} is not a date (YYYY-MM-DD)") from None


def run(args: argparse.Namespace) -> int:
    import dagster as dg
    from tabulate import tabulate

    from orchestration_core.settings import platform_settings, racing_timezone, secret
    from racing_orchestration.race_data.recorded_checks import verify_day
    from racing_orchestration.race_db.migrations import SchemaBehindError
    from racing_orchestration.race_db.resource import RaceDatabase

    now, tz = dt.datetime.now(dt.UTC), racing_timezone()
    try:
        day = parse_day(args.day, now, tz)
    except ValueError as exc:
        print(f"racing verify-checks: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    race_db = RaceDatabase(url=secret(platform_settings().racing_database_url) or "")
    try:
        try:
            engine = race_db.engine()
        except SchemaBehindError as exc:  # says which revision and to run `racing db upgrade`
            print(f"racing verify-checks: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        with dg.DagsterInstance.get() as instance:
            verification = verify_day(instance, engine, day, now, tz)
    finally:
        race_db.dispose()
    if args.json:
        print(json.dumps(verification.to_json()))
    else:
        print(f"{day}: {verification.checked} recorded checks compared with the stored data")
        if verification.unrecorded:
            print(f"nothing recorded for the day: {', '.join(verification.unrecorded)}")
        if verification.mismatches:
            print(tabulate([[m.check, m.partition, m.recorded, m.now] for m in verification.mismatches],
                           headers=["check", "partition", "recorded", "now"]))
        else:
            print("every recorded check matches the stored data")
    return EXIT_MISMATCH if verification.mismatches else 0
