"""The images built ahead of the suite (tests/production/prebuild_images.py): never a reason for `make test` to stop,
and the engine handed back to its other users whatever the build did."""

from __future__ import annotations

import pytest

from tests.production.docker_engine import DockerUnavailable
from tests.production.prebuild_images import prebuild

pytestmark = pytest.mark.unit


class Engine:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def stop(self) -> None:
        self.events.append("engine released")


def test_without_an_engine_nothing_is_built_and_the_reason_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    built: list[dict] = []

    def no_engine():
        raise DockerUnavailable("no Docker engine is running and starting dockerd needs root")

    assert prebuild(engine=no_engine, build=built.append) == 0
    assert built == []
    assert capsys.readouterr().out == ("no images built ahead: no Docker engine is running and starting dockerd "
                                       "needs root\n")


def test_a_build_runs_on_the_engine_and_then_releases_it(capsys: pytest.CaptureFixture[str]) -> None:
    events: list[str] = []

    def build(timings: dict[str, float]) -> None:
        events.append("built")
        timings["images"] = 12.5

    assert prebuild(engine=lambda: Engine(events), build=build) == 0
    assert events == ["built", "engine released"]
    assert capsys.readouterr().out == 'images built ahead (s): {"images": 12.5}\n'


def test_a_failed_build_exits_1_says_the_tests_build_again_and_releases_the_engine(
        capsys: pytest.CaptureFixture[str]) -> None:
    events: list[str] = []

    def build(timings: dict[str, float]) -> None:
        raise RuntimeError("docker build -q -f deploy/Dockerfile.user_code ... exited 1")

    assert prebuild(engine=lambda: Engine(events), build=build) == 1
    assert events == ["engine released"]
    assert capsys.readouterr().out == ("building the images ahead failed (the tests build them again): docker build "
                                       "-q -f deploy/Dockerfile.user_code ... exited 1\n")
