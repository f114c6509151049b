"""Example plug-in: report free space on the given paths and fail when one is below a threshold.

Paths are confined to MAINTENANCE_DISK_USAGE_ROOTS (default: the backup source and target folders), checked when a
task is written (the API validates `Config`) and again by the run: the plug-in must not tell a caller whether
`/etc/shadow` or `/root` exists, or anything else about the host."""

from __future__ import annotations

import shutil

from pydantic import BaseModel, ConfigDict, Field, field_validator

from maintenance_jobs import settings
from maintenance_jobs.executor_configs import check_under_roots


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    paths: list[str] = Field(min_length=1, max_length=50)
    min_free_percent: float = Field(default=10.0, ge=0, le=100)

    @field_validator("paths")
    @classmethod
    def _under_roots(cls, value: list[str]) -> list[str]:
        for raw in value:
            check_under_roots(raw, settings.disk_usage_roots(), "MAINTENANCE_DISK_USAGE_ROOTS")
        return value


async def execute(config: dict, settings) -> str:  # noqa: ARG001 (the plug-in interface passes settings)
    """Free space per path; raises when any path has less than `min_free_percent` free."""
    parsed = Config.model_validate(config)
    report, low = [], []
    for path in parsed.paths:
        usage = shutil.disk_usage(path)
        free_percent = 100.0 * usage.free / usage.total
        report.append(f"{path}: {free_percent:.1f}% free")
        if free_percent < parsed.min_free_percent:
            low.append(path)
    if low:
        raise RuntimeError(f"below {parsed.min_free_percent}% free: {', '.join(low)}")
    return "; ".join(report)
