"""`maintenance` CLI: `maintenance db upgrade` (migrate the registry), `maintenance seed` (first-start seeding) and
`maintenance history TASK --since 30d` (each run the task's schedule expected: ran and how it ended, or missed and
why) and `maintenance restore-postgres DUMP` (check a Postgres backup's checksum and pg_restore it into the database
its name says, with that database's URL from the deployment's settings)."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.database.migrate import current_revision, upgrade
from maintenance_jobs.executor_configs import POSTGRES_DATABASES
from maintenance_jobs.executors.postgres_backup import (
    DATABASE_SETTINGS,
    PostgresBackupRefused,
    RestoreRefused,
    database_of,
    database_urls,
    restore_dump,
)
from maintenance_jobs.execution_history.task_view import InvalidRange, TaskHistory, bounded, task_history
from maintenance_jobs.registry import TaskNotFound, get_task
from maintenance_jobs.seed import prepare_registry, seed_registry
from maintenance_jobs.settings import maintenance_timezone
from orchestration_core.cli_environment import (
    EXIT_MISSING_ENVIRONMENT,
    DAGSTER_HOME,
    environment_missing,
    instance_variables,
    not_set,
    process_environment,
)
from orchestration_core.settings import platform_settings, secret

_RELATIVE = re.compile(r"(?P<amount>[0-9]{1,5})(?P<unit>[mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


URL_ENV = "MAINTENANCE_DATABASE_URL"


def _database_url(args: argparse.Namespace) -> str:
    url = args.database_url or secret(platform_settings().maintenance_database_url)
    if not url:
        print(f"maintenance {args.command}: {not_set(URL_ENV)} (or pass --database-url)", file=sys.stderr)
        raise SystemExit(EXIT_MISSING_ENVIRONMENT)
    return url


def _db_upgrade(args: argparse.Namespace) -> int:
    url = _database_url(args)
    upgrade(url)
    print(f"maintenance registry at revision {current_revision(url)}")
    return 0


def _seed(args: argparse.Namespace) -> int:
    url = _database_url(args)
    upgrade(url)
    inserted = seed_registry(registry_engine(url))
    print(f"seeded: {', '.join(inserted)}" if inserted else "registry already seeded; nothing inserted")
    return 0


def parse_moment(text: str, now: dt.datetime, timezone: str) -> dt.datetime:
    """`30d`/`12h`/`90m`/`2w` before now, `now`, a date (midnight in `timezone`) or an ISO time (without an offset:
    in `timezone`)."""
    text = text.strip()
    if text == "now":
        return now
    if match := _RELATIVE.fullmatch(text):
        return now - dt.timedelta(**{_UNITS[match["unit"]]: int(match["amount"])})
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use 30d, 12h, 90m, 2w, now, a date (2025-06-01) or a time (2025-06-01T03:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=ZoneInfo(timezone))


def render_history(history: TaskHistory, only_problems: bool = False) -> str:
    """The per-task history as text: one line per expected run, then the runs not for an expected minute."""
    counts = history.counts
    ran = ", ".join(f"{counts[s]} {s}" for s in ("success", "failed", "timeout", "canceled") if counts.get(s))
    lines = [
        f"task {history.task_name} (id {history.task_id}), schedule '{history.schedule}' in {history.timezone}"
        + ("" if history.enabled else " (disabled)"),
        f"from {history.expected_from.astimezone(ZoneInfo(history.timezone)).isoformat(timespec='minutes')} "
        f"to {history.until.astimezone(ZoneInfo(history.timezone)).isoformat(timespec='minutes')}: "
        f"{counts['expected']} expected, {counts['ran']} ran ({ran or 'none'}), {counts['missed']} missed"
        + (f", {counts['running']} running" if counts["running"] else "")
        + (f", {counts['due']} due" if counts["due"] else ""),
    ]
    if not history.live_runs_included:
        lines.append("(runs not recorded yet are not shown: set DAGSTER_HOME to read Dagster's run storage too)")
    lines.append("")
    lines.append(f"{'scheduled for':<22} {'outcome':<8} {'status':<9} {'tries':>5} {'duration':>9}  run / reason")
    for expected in history.expected_runs:
        if only_problems and expected.outcome == "ran" and expected.status == "success":
            continue
        last = expected.executions[-1] if expected.executions else None
        duration = f"{last.duration_seconds:.1f}s" if last and last.duration_seconds is not None else "-"
        detail = expected.reason or ""
        if last is not None:
            detail = last.run_id + (" (run pruned)" if last.run_pruned else "")
            if last.error and expected.status != "success":
                detail += f": {last.error.splitlines()[0][:100]}"
        lines.append(f"{expected.scheduled_for.isoformat(timespec='minutes'):<22} {expected.outcome:<8} "
                     f"{expected.status or '-':<9} {expected.attempts:>5} {duration:>9}  {detail}")
    if history.other_runs:
        lines += ["", "runs not for an expected minute:"]
        zone = ZoneInfo(history.timezone)
        for item in history.other_runs:
            lines.append(f"{item.triggered_at.astimezone(zone).isoformat(timespec='minutes'):<22} "
                         f"{item.triggered_by or '-':<8} {item.status:<9} {item.run_id}"
                         + (" (run pruned)" if item.run_pruned else ""))
    return "\n".join(lines)


def _history(args: argparse.Namespace) -> int:
    url = _database_url(args)
    # DAGSTER_HOME is optional here (without it the history leaves out runs not recorded yet); once it is set, the
    # instance's own variables must be too, or Dagster ends the command in a config traceback.
    environment = process_environment()
    if environment.get(DAGSTER_HOME) and environment_missing(f"maintenance {args.command}",
                                                             instance_variables(environment)):
        return EXIT_MISSING_ENVIRONMENT
    prepare_registry(url)
    timezone = maintenance_timezone()
    now = dt.datetime.now(dt.UTC)
    try:
        since = bounded(parse_moment(args.since, now, timezone), "--since")
        until = bounded(parse_moment(args.until, now, timezone), "--until")
    except (argparse.ArgumentTypeError, InvalidRange) as exc:
        print(f"maintenance history: {exc}", file=sys.stderr)
        return 2
    engine = registry_engine(url)
    try:
        task = get_task(engine, args.task_name)
    except TaskNotFound as exc:
        print(f"maintenance history: {exc}", file=sys.stderr)
        return 2
    instance = None
    if platform_settings().dagster_home:
        import dagster as dg

        instance = dg.DagsterInstance.get()
    try:
        history = task_history(engine, instance, task, since, until, now, timezone, platform_settings().dagster_ui_url)
    except InvalidRange as exc:
        print(f"maintenance history: {exc}", file=sys.stderr)
        return 2
    finally:
        if instance is not None:
            instance.dispose()
    print(history.model_dump_json(indent=2) if args.json else render_history(history, args.only_problems))
    return 0


EXIT_RESTORE_FAILED = 1


def _restore_postgres(args: argparse.Namespace) -> int:
    """Restore a dump of the Postgres backup into one of the deployment's databases (its URL from the settings:
    never from the command line, where other users of the host could read a password)."""
    dump = Path(args.dump)
    database = args.into or database_of(dump)
    if database is None:
        print(f"maintenance restore-postgres: {dump.name} is not named <task>__<database>__<time>.dump; "
              "pass --into", file=sys.stderr)
        return EXIT_RESTORE_FAILED
    url = database_urls()[database]
    if not url:
        print(f"maintenance restore-postgres: {not_set(DATABASE_SETTINGS[database])}", file=sys.stderr)
        raise SystemExit(EXIT_MISSING_ENVIRONMENT)
    try:
        restore_dump(dump, url, clean=args.clean)
    except (RestoreRefused, PostgresBackupRefused, OSError) as exc:
        print(f"maintenance restore-postgres: {exc}", file=sys.stderr)
        return EXIT_RESTORE_FAILED
    print(f"restored {dump.name} into {database}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maintenance", description=__doc__)
    parser.add_argument("--database-url", help="registry URL (default: $MAINTENANCE_DATABASE_URL)")
    commands = parser.add_subparsers(dest="command", required=True)
    db = commands.add_parser("db", help="registry schema").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help="apply migrations up to the newest").set_defaults(handler=_db_upgrade)
    commands.add_parser("seed", help="insert the standard tasks if never seeded").set_defaults(handler=_seed)
    history = commands.add_parser("history", help="each run a task's schedule expected: ran (how it ended) or missed")
    history.add_argument("task_name")
    history.add_argument("--since", default="30d", help="30d, 12h, 2w, a date or an ISO time (default: 30d)")
    history.add_argument("--until", default="now", help="the end of the range (default: now)")
    history.add_argument("--json", action="store_true", help="the same answer as GET /tasks/{name}/history")
    history.add_argument("--only-problems", action="store_true", help="leave out expected runs that succeeded")
    history.set_defaults(handler=_history)
    restore = commands.add_parser("restore-postgres",
                                  help="check a Postgres backup's sha256 and pg_restore it (README \"Backup and "
                                  "restore of Postgres\")")
    restore.add_argument("dump", help="a .dump file of the postgres_backup_executor (its .sha256 beside it)")
    restore.add_argument("--into", choices=POSTGRES_DATABASES,
                         help="the database to restore into (default: the one in the file name); its URL is the "
                         "deployment's setting")
    restore.add_argument("--clean", action="store_true",
                         help="drop the dump's objects in the database first (pg_restore --clean --if-exists)")
    restore.set_defaults(handler=_restore_postgres)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
