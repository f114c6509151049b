"""Fails its first `failures` attempts, then succeeds."""

from __future__ import annotations

from pydantic import Field

from . import StateConfig, next_attempt


class Config(StateConfig):
    failures: int = Field(default=1, ge=0)


async def execute(config: dict, settings) -> str:
    parsed = Config.model_validate(config)
    attempt = next_attempt(parsed.state_dir)
    if attempt <= parsed.failures:
        raise RuntimeError(f"attempt {attempt} fails on purpose (the first {parsed.failures} do)")
    return f"attempt {attempt} succeeded after {parsed.failures} failed"
