"""Init container of the code servers and the control API: wait until the migration Job has finished.

The Job (migrate.yaml) runs `dagster instance migrate`, `racing db upgrade` and `maintenance db upgrade` in that
order, so the task registry at its newest revision means all three are done. Polls every 5 s; exits 0 then. Run with
the user-code image, which has the project's migrations; reads MAINTENANCE_DATABASE_URL. No Kubernetes API rights
needed (waiting on the Job's status would need them).
"""

from __future__ import annotations

import os
import sys
import time

from alembic.script import ScriptDirectory

from maintenance_jobs.database.migrate import MIGRATIONS_DIR, current_revision


def schema_is_current(database_url: str) -> bool:
    """True when the database is at the newest migration; False when behind or unreachable."""
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    try:
        return current_revision(database_url) == head
    except Exception as error:  # not up yet, or no such database yet: keep waiting
        print(f"wait-for-schema: {type(error).__name__}: {error}", file=sys.stderr)
        return False


def main(interval_seconds: float = 5.0) -> int:
    url = os.environ["MAINTENANCE_DATABASE_URL"]
    while not schema_is_current(url):
        print("wait-for-schema: the migration Job has not finished; waiting", file=sys.stderr)
        time.sleep(interval_seconds)
    print("wait-for-schema: schema current", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
