"""Test plug-in executors for the retry tests (never shipped: maintenance_jobs/plugins holds the real ones).

Each counts its attempts in a file under its config's `state_dir`, so a task's retries (new runs, new processes or
containers) see the attempts before them. Locally they are found as `MAINTENANCE_PLUGIN_PACKAGE=
tests.maintenance_jobs.retry_plugins`; the production test installs them into an image as a distribution whose
entry points (group `maintenance_jobs.executors`) name them, the way a homelab installs its own plug-ins.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class StateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state_dir: str = Field(min_length=1)


def next_attempt(state_dir: str) -> int:
    """This attempt's number (1 for the first), counted in `<state_dir>/attempts`."""
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    counter = folder / "attempts"
    attempt = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(attempt))
    return attempt
