"""What the `racing` and `maintenance` commands need from the environment, and the one line they print when it is
missing.

A command that reaches the Dagster instance needs DAGSTER_HOME and every variable its dagster.yaml reads (`env:`
entries: the project's names DAGSTER_POSTGRES_URL); left to Dagster, a missing one ends in a config traceback. The
commands check first and name the variable and where to get it, exiting 2 before touching any database.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

DAGSTER_HOME = "DAGSTER_HOME"
HINT = "run `source .local/env` (`make run` writes it; README \"Configuration\" lists every variable)"
EXIT_MISSING_ENVIRONMENT = 2


def env_references(config: object) -> list[str]:
    """Pure: the variable names a Dagster instance config reads through `{env: NAME}` entries, in order."""
    found: list[str] = []
    if isinstance(config, Mapping):
        if set(config) == {"env"} and isinstance(config["env"], str):
            return [config["env"]]
        for value in config.values():
            found += [name for name in env_references(value) if name not in found]
    elif isinstance(config, list):
        for value in config:
            found += [name for name in env_references(value) if name not in found]
    return found


def instance_variables(env: Mapping[str, str]) -> list[str]:
    """DAGSTER_HOME, then the variables its dagster.yaml reads (none known while DAGSTER_HOME is unset or its
    dagster.yaml cannot be read: Dagster then says what is wrong with the folder itself)."""
    home = env.get(DAGSTER_HOME)
    if not home:
        return [DAGSTER_HOME]
    try:
        config = yaml.safe_load((Path(home) / "dagster.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return [DAGSTER_HOME]
    return [DAGSTER_HOME, *env_references(config)]


def first_missing(names: Iterable[str], env: Mapping[str, str]) -> str | None:
    """Pure: the first of `names` unset or empty in `env` (the settings treat an empty value as unset)."""
    return next((name for name in names if not env.get(name)), None)


def not_set(name: str) -> str:
    """Pure: that `name` is missing, and where to get it."""
    return f"{name} is not set: {HINT}"


def missing_message(command: str, name: str) -> str:
    """Pure: the one line a command prints when `name` is missing."""
    return f"{command}: {not_set(name)}"


def process_environment() -> Mapping[str, str]:
    """This process's environment, for the presence checks here: which variables a command will need is not a
    setting, so it is read here rather than through a settings object (tests/test_settings.py names this module)."""
    return os.environ


def environment_missing(command: str, names: Iterable[str]) -> bool:
    """True, after printing the one line on stderr, when one of `names` is missing from this process's environment."""
    name = first_missing(names, process_environment())
    if name is None:
        return False
    print(missing_message(command, name), file=sys.stderr)
    return True
