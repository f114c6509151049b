"""First-start seeding of the registry from `seed_tasks.yaml`.

Seeding happens once per registry: the first time, every seed task whose name is free is inserted and the fact is
recorded in `maintenance_registry_meta`. Later starts insert nothing, so an operator's edits and deletions stand.

A seed task added to the file after registries already exist is listed in `LATER_SEEDS`: each registry is offered it
once (inserted if its name is free), and the offer is recorded under `seed_offered:<name>`, so a registry seeded before
it existed gets it on its next start, and an operator who deletes it afterwards keeps it deleted.
"""

from __future__ import annotations

import logging
from pathlib import Path

import sqlalchemy as sa
import yaml
from sqlalchemy.dialects.postgresql import insert

from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.database.migrate import upgrade
from maintenance_jobs.database.tables import registry_meta, scheduled_tasks
from maintenance_jobs.models import TaskSpec, TaskValidationError, config_problem, validate_task

log = logging.getLogger(__name__)
SEED_FILE = Path(__file__).resolve().parent / "seed_tasks.yaml"
SEEDED_KEY = "seeded_at"
OFFERED_KEY_PREFIX = "seed_offered:"
# Seed tasks added after the first release, offered once to registries seeded before them (names in seed_tasks.yaml).
LATER_SEEDS = ("backup_postgres_nightly",)
_SEED_LOCK_ID = 0x6D61696E75


def load_seed_tasks(path: Path = SEED_FILE) -> list[TaskSpec]:
    """The seed file's tasks, validated like any other task except for settings-dependent config rules."""
    return [spec for spec, _ in seed_specs(path)]


def seed_specs(path: Path = SEED_FILE) -> list[tuple[TaskSpec, str | None]]:
    """Each seed task with the reason this process's settings refuse its executor config (None when accepted).

    A seed task is stored either way: refused ones disabled, so narrowing MAINTENANCE_BACKUP_*_ROOTS or the allowed
    hosts before the first start costs those tasks, never the registry (the operator fixes or deletes them)."""
    document = yaml.safe_load(path.read_text()) or {}
    seeds = []
    for index, data in enumerate(document.get("tasks") or []):
        try:
            spec = validate_task(data, check_config=False)
        except TaskValidationError as exc:
            name = data.get("task_name", f"#{index}") if isinstance(data, dict) else f"#{index}"
            raise TaskValidationError(exc.field, f"seed task {name}: {exc.message}") from None
        seeds.append((spec, config_problem(spec)))
    return seeds


def seed_registry(engine: sa.Engine, path: Path = SEED_FILE) -> list[str]:
    """Insert the seed tasks if this registry was never seeded, and any later seed it was never offered; returns the
    names inserted.

    The seed file is read and validated only then: later starts look at the recorded flags and nothing else."""
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _SEED_LOCK_ID})
        keys = set(conn.execute(sa.select(registry_meta.c.key)).scalars())
        pending = {name for name in LATER_SEEDS if OFFERED_KEY_PREFIX + name not in keys}
        if SEEDED_KEY in keys and not pending:
            return []
        inserted = []
        for spec, problem in seed_specs(path):
            if SEEDED_KEY in keys and spec.task_name not in pending:
                continue
            values = spec.model_dump()
            if problem is not None:
                log.warning(f"seed task {spec.task_name} is refused by the current settings ({problem}): "
                            "stored disabled")
                values["enabled"] = False
            row = conn.execute(
                insert(scheduled_tasks)
                .values(**values)
                .on_conflict_do_nothing(index_elements=["task_name"])
                .returning(scheduled_tasks.c.task_name)
            ).first()
            if row is not None:
                inserted.append(row.task_name)
        now = sa.func.now().cast(sa.Text)
        if SEEDED_KEY not in keys:
            conn.execute(registry_meta.insert().values(key=SEEDED_KEY, value=now))
        for name in sorted(pending):  # offered, whether inserted or its name was taken
            conn.execute(registry_meta.insert().values(key=OFFERED_KEY_PREFIX + name, value=now))
    return inserted


_prepared: set[str] = set()


def prepare_registry(database_url: str) -> list[str]:
    """Migrate and seed the registry once per process (cheap on later calls); returns newly seeded names."""
    if database_url in _prepared:
        return []
    upgrade(database_url)
    inserted = seed_registry(registry_engine(database_url))
    _prepared.add(database_url)
    return inserted
