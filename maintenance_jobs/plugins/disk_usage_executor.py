"""Example plug-in: report free space on the given paths and fail when one is below a threshold."""

from __future__ import annotations

import shutil

from pydantic import BaseModel, ConfigDict, Field


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(min_length=1)
    min_free_percent: float = Field(default=10.0, ge=0, le=100)


async def execute(config: dict, settings) -> str:
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
