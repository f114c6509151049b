"""What run config may set: op config as literal values only, and no resource at all.

Anyone who reaches the webserver may launch any job with any run config (SECURITY.md). Two Dagster defaults make that
a way into the deployment, and both are closed here with Dagster's public config API, at launch, before a run exists:

- A `dg.Config` field typed `str`, `int` or `bool` becomes a *source* type: `{"env": "GITEA_TOKEN"}` is resolved in
  the run worker and the secret lands wherever the op shows the value (tags, log, /executions).
  `literal_config_schema` builds the op's schema from the same pydantic model with plain `String`/`Int`/`Bool`, so
  launchRun answers "invalid config" instead; the op then validates `context.op_config` with the model as before.
- Every field of a `ConfigurableResource` can be replaced from run config (`resources.gitea.config.base_url`), and so
  can the default IO manager's `base_dir`. `deployment_resource` builds the resource in the run worker from the
  deployment's own settings and takes no config; `run_outputs_io_manager` is the filesystem IO manager under the
  instance's storage folder, likewise without config.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_SCALARS: dict[type, Any] = {str: dg.String, int: dg.Int, float: dg.Float, bool: dg.Bool}


def literal_config_type(annotation: Any) -> Any:
    """The Dagster config type of a pydantic annotation, without environment sources: `str` is `String`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return literal_config_type(args[0])
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in args if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"config annotation {annotation!r}: only `X | None` unions are supported")
        inner = literal_config_type(members[0])
        return dg.Noneable(inner) if type(None) in args else inner
    if origin is list:
        return dg.Array(literal_config_type(args[0]))
    if origin is typing.Literal:
        if not all(isinstance(arg, str) for arg in args):
            raise TypeError(f"config annotation {annotation!r}: only string literals are supported")
        return dg.String
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return literal_config_schema(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    raise TypeError(f"config annotation {annotation!r} has no literal Dagster config type")


def literal_config_schema(model: type[BaseModel]) -> dict[str, dg.Field]:
    """The op config schema of `model`'s fields, each a literal (never `{"env": …}`), with the model's defaults.

    Constraints stay the model's: the op validates `context.op_config` with it, so a refusal is recorded like any
    other failure."""
    schema = {}
    for name, field in model.model_fields.items():
        config_type = literal_config_type(field.annotation)
        if field.default is not PydanticUndefined:
            default = field.default
        elif field.default_factory is not None:
            default = field.default_factory()
        else:
            schema[name] = dg.Field(config_type, is_required=True, description=field.description)
            continue
        if isinstance(default, BaseModel):
            default = default.model_dump()
        schema[name] = dg.Field(config_type, default_value=default, is_required=False, description=field.description)
    return schema


R = TypeVar("R")


def deployment_resource(build: Callable[[], R], description: str) -> dg.ResourceDefinition:
    """A resource built in the process that uses it by `build()`, from the deployment's settings and secrets
    (environment, `dg.EnvVar`), with no config: run config naming any field of it is refused at launch.

    The object's own `teardown_after_execution`, when it has one, runs once the run (or sensor tick) is done."""

    @dg.resource(config_schema={}, description=description)
    def _resource(context: dg.InitResourceContext) -> Iterator[R]:
        resource = build()
        try:
            yield resource
        finally:
            teardown = getattr(resource, "teardown_after_execution", None)
            if teardown is not None:
                teardown(context)

    return _resource


class MissingSetting(RuntimeError):
    """A setting the deployment must give is not in this process's environment."""


def required_env(name: str) -> str:
    """A setting the deployment must give (a URL with its password, a token): its value, or a one-line error."""
    value = dg.EnvVar(name).get_value()
    if not value:
        raise MissingSetting(f"{name} is not set in this process's environment (see .env.example)")
    return value


@dg.io_manager(config_schema={}, description="Step outputs pickled under the instance's storage folder; run config "
               "cannot move them (a `base_dir` from run config wrote, and read back, pickles in any folder).")
def run_outputs_io_manager(context: dg.InitResourceContext) -> dg.IOManager:
    return dg.FilesystemIOManager().create_io_manager(context)
