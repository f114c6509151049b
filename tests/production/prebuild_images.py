"""The compose form's images, built ahead of the suite: `make test` starts this in the background before pytest.

On a fresh machine the image builds (the stand-in bases from Debian's packages, then the project images from PyPI)
sit on the suite's critical path: the alert path's deployment, its longest unit, waits for them. Started here, they
overlap the collection and the workers' start-up instead of following them. The deployments' own `build_images` then
waits on the machine's build lock and finds every layer built (BENCHMARKS.md "Test suite"). With every image present
it takes ~2 s and ~1.1 busy CPU-s on the reference machine, starting and stopping the engine included (the first
deployment test starts it again: ~0.5 CPU-s).

Nothing depends on this succeeding: without an engine it builds nothing and says why, and a failed build is built
again, and reported, by the first test that needs the images. Its output goes to test-artifacts/prebuild-images.log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from tests.production.compose_stack import build_images
from tests.production.docker_engine import ENGINE_STATE_DIR, DockerEngine, DockerUnavailable, ensure_engine


def prebuild(engine: Callable[[], DockerEngine] = lambda: ensure_engine(ENGINE_STATE_DIR),
             build: Callable[[dict[str, float]], None] = lambda timings: build_images("live", timings)) -> int:
    """Build every image on the engine (started here if none runs, and left to its other users at the end): 0 when
    built or when no engine can be had, 1 when a build failed."""
    try:
        used = engine()
    except DockerUnavailable as exc:
        print(f"no images built ahead: {exc}", flush=True)
        return 0
    timings: dict[str, float] = {}
    try:
        build(timings)
    except Exception as exc:  # noqa: BLE001 - the first test that needs the images builds them again and fails
        print(f"building the images ahead failed (the tests build them again): {exc}", flush=True)
        return 1
    finally:
        used.stop()
    print(f"images built ahead (s): {json.dumps(timings)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(prebuild())
