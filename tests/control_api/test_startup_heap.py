"""The served API freezes its start-up heap (control_api.app.catalog_at_start): a full garbage collection
then scans what requests create, not the objects of Dagster and of the start-up (BENCHMARKS.md,
`/executions` tail latency)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

import control_api.app as app_module

pytestmark = pytest.mark.unit

PROBE = """
import gc, json, time
from control_api.app import catalog_at_start
catalog_at_start(lambda: None, {freeze})
# The CPU time of a full collection, the least of three: wall time counted the waits of a starved host (run 51: a
# frozen heap's collection 316 ms of wall time against the plain one's 236).
spent = []
for _ in range(3):
    started = time.process_time()
    gc.collect()
    spent.append((time.process_time() - started) * 1000)
print(json.dumps({{"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()), "full_collection_ms": min(spent)}}))
"""


def heap_after_start(freeze: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE.format(freeze=freeze)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_start_up_heap_is_frozen_and_left_out_of_later_collections() -> None:
    frozen, plain = heap_after_start(True), heap_after_start(False)
    # The start-up heap (the API's modules, the app, its settings): tens of thousands of objects, all of them
    # frozen in a served API, so a collection scans a few per cent of it.
    assert plain["frozen"] == 0 and plain["tracked"] > 50_000, plain
    assert frozen["frozen"] > 0.9 * plain["tracked"], (frozen, plain)
    assert frozen["tracked"] < 0.05 * plain["tracked"], (frozen, plain)  # what a collection still scans
    assert frozen["full_collection_ms"] < plain["full_collection_ms"], (frozen, plain)


def test_served_apps_freeze_and_in_process_apps_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    import control_api.__main__ as main_module

    built: list[bool] = []
    monkeypatch.setattr(app_module, "create_app", lambda settings, freeze_startup_heap=False:
                        built.append(freeze_startup_heap))
    monkeypatch.setattr(app_module, "settings_from_env", lambda: object())
    monkeypatch.setattr(main_module, "settings_from_env", lambda **_: SimpleNamespace(api_key="k", workers=1))
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    app_module.app_from_env()  # each `--workers N` worker
    assert main_module.main(["--workers", "1"]) == 0  # one process
    assert built == [True, True]
    assert inspect.signature(app_module.create_app).parameters["freeze_startup_heap"].default is False
