"""Fails every attempt."""

from __future__ import annotations

from . import StateConfig, next_attempt

Config = StateConfig


async def execute(config: dict, settings) -> str:
    attempt = next_attempt(Config.model_validate(config).state_dir)
    raise RuntimeError(f"attempt {attempt} fails, as every attempt does")
