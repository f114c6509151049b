"""`maintenance` CLI: `maintenance db upgrade` (migrate the registry) and `maintenance seed` (first-start seeding)."""

from __future__ import annotations

import argparse
import sys

from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.database.migrate import current_revision, upgrade
from maintenance_jobs.seed import seed_registry
from orchestration_core.settings import platform_settings, secret


def _database_url(args: argparse.Namespace) -> str:
    url = args.database_url or secret(platform_settings().maintenance_database_url)
    if not url:
        raise SystemExit("MAINTENANCE_DATABASE_URL is not set (or pass --database-url)")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maintenance", description=__doc__)
    parser.add_argument("--database-url", help="registry URL (default: $MAINTENANCE_DATABASE_URL)")
    commands = parser.add_subparsers(dest="command", required=True)
    db = commands.add_parser("db", help="registry schema").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help="apply migrations up to the newest").set_defaults(handler=_db_upgrade)
    commands.add_parser("seed", help="insert the standard tasks if never seeded").set_defaults(handler=_seed)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
