"""orchestration_core/run_config_rules.py: op config from run config is literal values only (no `{"env": …}`), with
the model's defaults; resources take no config; a missing deployment setting is a one-line error."""

from __future__ import annotations

import typing
from typing import Annotated, Literal

import dagster as dg
import pytest
from pydantic import BaseModel, Field

from orchestration_core.run_config_rules import (
    MissingSetting,
    deployment_resource,
    literal_config_schema,
    literal_config_type,
    required_env,
)

pytestmark = pytest.mark.unit


class Inner(BaseModel):
    depth: int = 2


class Example(BaseModel):
    label: str = Field(description="what the run is called")
    reason: str | None  # no default: the launch must say, even if only null
    count: int = Field(3, description="how many")
    ratio: float = 0.5
    enabled: bool = True
    note: str | None = None
    tags: list[str] = Field(default_factory=lambda: ["a", "b"])
    mode: Literal["fast", "slow"] = "fast"
    bounded: Annotated[int, Field(ge=0)] = 1
    inner: Inner = Inner()
    inner_factory: Inner = Field(default_factory=lambda: Inner(depth=5))


@pytest.mark.parametrize(
    ("annotation", "key"),
    [
        (str, "String"),
        (int, "Int"),
        (float, "Float"),
        (bool, "Bool"),
        (str | None, "Noneable.String"),
        (typing.Optional[int], "Noneable.Int"),
        (typing.Union[str, None], "Noneable.String"),
        (list[str], "Array.String"),
        (list[int] | None, "Noneable.Array.Int"),
        (Literal["a", "b"], "String"),
        (Annotated[int, Field(ge=0)], "Int"),
        (Annotated[str | None, Field(max_length=3)], "Noneable.String"),
    ],
)
def test_each_annotation_becomes_a_literal_config_type(annotation, key: str) -> None:
    """Never a `...Source` type: those resolve `{"env": NAME}` in the run worker."""
    assert dg.Field(literal_config_type(annotation)).config_type.key == key


def test_a_nested_model_becomes_a_shape_of_literal_fields() -> None:
    fields = dg.Field(literal_config_type(Inner)).config_type.fields
    assert {name: field.config_type.key for name, field in fields.items()} == {"depth": "Int"}


@pytest.mark.parametrize(
    ("annotation", "refusal"),
    [
        (str | int, "only `X | None` unions are supported"),
        (typing.Union[str, int, None], "only `X | None` unions are supported"),
        (Literal[1, 2], "only string literals are supported"),
        (Literal["a", 2], "only string literals are supported"),
        (dict[str, str], "has no literal Dagster config type"),
        (bytes, "has no literal Dagster config type"),
    ],
)
def test_an_annotation_without_a_literal_type_is_refused_by_name(annotation, refusal: str) -> None:
    with pytest.raises(TypeError) as refused:
        literal_config_type(annotation)
    assert str(refused.value).startswith(f"config annotation {annotation!r}")
    assert str(refused.value).endswith(refusal)


def test_the_schema_keeps_the_models_defaults_and_requires_what_has_none() -> None:
    schema = literal_config_schema(Example)
    assert list(schema) == list(Example.model_fields)
    label, reason, count = schema["label"], schema["reason"], schema["count"]
    assert (label.is_required, label.description, label.config_type.key) == (True, "what the run is called", "String")
    assert (reason.is_required, reason.config_type.key) == (True, "Noneable.String")
    assert (count.is_required, count.description) == (False, "how many")  # the launchpad shows it
    defaults = {name: field.default_value for name, field in schema.items() if name not in ("label", "reason")}
    assert defaults == {"count": 3, "ratio": 0.5, "enabled": True, "note": None, "tags": ["a", "b"], "mode": "fast",
                        "bounded": 1, "inner": {"depth": 2}, "inner_factory": {"depth": 5}}
    assert not any(field.is_required for name, field in schema.items() if name not in ("label", "reason"))
    assert schema["ratio"].description is None


@pytest.mark.parametrize("left_out", ["label", "reason"])
def test_a_field_without_a_default_must_be_given_at_launch(left_out: str) -> None:
    job = _job_with(literal_config_schema(Example))
    config = {"label": "x", "reason": None}
    del config[left_out]
    with pytest.raises(dg.DagsterInvalidConfigError, match=left_out):
        dg.validate_run_config(job, {"ops": {"configured": {"config": config}}})


def _job_with(schema: dict[str, dg.Field]) -> dg.JobDefinition:
    @dg.op(config_schema=schema)
    def configured() -> None:
        pass

    @dg.job
    def configured_job() -> None:
        configured()

    return configured_job


@pytest.mark.parametrize("field", ["label", "count", "ratio", "enabled", "note"])
def test_an_env_source_in_run_config_is_refused_at_launch(field: str) -> None:
    job = _job_with(literal_config_schema(Example))
    config = {"label": "x", "reason": None, field: {"env": "GITEA_TOKEN"}}
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"ops": {"configured": {"config": config}}})


def test_literal_values_and_the_defaults_pass() -> None:
    job = _job_with(literal_config_schema(Example))
    validated = dg.validate_run_config(job, {"ops": {"configured": {"config": {"label": "x", "reason": None,
                                                                                  "count": 7}}}})
    assert validated["ops"]["configured"]["config"] == {
        "label": "x", "reason": None, "count": 7, "ratio": 0.5, "enabled": True, "note": None, "tags": ["a", "b"], "mode": "fast",
        "bounded": 1, "inner": {"depth": 2}, "inner_factory": {"depth": 5}}


def test_required_env_gives_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_URL", "postgresql://db/x")
    assert required_env("EXAMPLE_URL") == "postgresql://db/x"


@pytest.mark.parametrize("value", [None, ""])
def test_a_missing_or_empty_setting_is_a_one_line_error_naming_it(monkeypatch: pytest.MonkeyPatch, value) -> None:
    if value is None:
        monkeypatch.delenv("EXAMPLE_URL", raising=False)
    else:
        monkeypatch.setenv("EXAMPLE_URL", value)
    with pytest.raises(MissingSetting) as refused:
        required_env("EXAMPLE_URL")
    assert str(refused.value) == "EXAMPLE_URL is not set in this process's environment (see .env.example)"


class Client:
    def __init__(self) -> None:
        self.torn_down_with: list[object] = []

    def teardown_after_execution(self, context: object) -> None:
        self.torn_down_with.append(context)


def test_a_deployment_resource_is_built_in_process_and_torn_down_once() -> None:
    built: list[Client] = []

    def build() -> Client:
        built.append(Client())
        return built[-1]

    resource = deployment_resource(build, "the example client")
    assert resource.description == "the example client"
    with dg.build_resources({"client": resource}) as resources:
        assert resources.client is built[0]
        assert built[0].torn_down_with == []
    assert len(built) == 1
    assert len(built[0].torn_down_with) == 1
    assert isinstance(built[0].torn_down_with[0], dg.InitResourceContext)


def test_a_deployment_resource_without_teardown_is_just_used() -> None:
    with dg.build_resources({"value": deployment_resource(lambda: "plain", "a string")}) as resources:
        assert resources.value == "plain"


def test_a_deployment_resource_takes_no_config() -> None:
    with pytest.raises(dg.DagsterInvalidConfigError):
        with dg.build_resources({"client": deployment_resource(Client, "c")},
                                resource_config={"client": {"config": {"base_url": "http://elsewhere"}}}):
            pass
