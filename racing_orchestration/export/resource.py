"""`RaceExportFolder`: the Dagster resource for the folder the daily export is written to (RACING_EXPORT_DIR)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


class RaceExportFolder(dg.ConfigurableResource):
    """The export folder; created on first write. In the compose deployment it is the `exports` volume, bound to
    the host folder EXPORTS_DIR and mounted at the same path into the code server and every run container."""

    path: str

    def root(self) -> Path:
        root = Path(self.path).expanduser()
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(f"RACING_EXPORT_DIR {root} exists and is not a folder")
        return root
