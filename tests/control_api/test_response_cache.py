"""The read-only response cache: TTL, single flight, errors, eviction, and clears that win over slow computations."""

from __future__ import annotations

import threading

import pytest

from control_api.response_cache import ResponseCache

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Computations:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return f"body {self.calls}".encode()


@pytest.mark.parametrize(("age", "expected_calls"), [(0.0, 1), (0.99, 1), (1.0, 2), (5.0, 2)])
def test_fresh_for_ttl_seconds_from_when_the_computation_started(age: float, expected_calls: int) -> None:
    clock, compute = Clock(), Computations()
    cache = ResponseCache(ttl=1.0, clock=clock)
    assert cache.get("k", compute) == b"body 1"
    clock.now += age
    assert cache.get("k", compute) == f"body {expected_calls}".encode()
    assert compute.calls == expected_calls


def test_ttl_zero_computes_every_time_and_keys_are_separate() -> None:
    compute = Computations()
    off = ResponseCache(ttl=0)
    assert [off.get("k", compute) for _ in range(3)] == [b"body 1", b"body 2", b"body 3"]
    on = ResponseCache(ttl=60)
    assert on.get(("executions", 1), compute) == b"body 4"
    assert on.get(("executions", 2), compute) == b"body 5"
    assert on.get(("executions", 1), compute) == b"body 4"
    assert (on.hits, on.misses) == (1, 2)


def test_concurrent_misses_of_one_key_compute_once() -> None:
    release, started = threading.Event(), threading.Event()
    calls = []

    def slow() -> bytes:
        calls.append(1)
        started.set()
        assert release.wait(10)
        return b"page"

    cache = ResponseCache(ttl=60)
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", slow))) for _ in range(8)]
    threads[0].start()
    assert started.wait(10)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == [b"page"] * 8 and len(calls) == 1


def test_an_error_propagates_and_is_not_cached() -> None:
    cache, compute = ResponseCache(ttl=60), Computations()

    def broken() -> bytes:
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError, match="database down"):
        cache.get("k", broken)
    assert cache.get("k", compute) == b"body 1"
    assert cache._computing.keys() == {"k"}  # noqa: SLF001 - the failed attempt left no extra lock behind


def test_least_recently_used_keys_are_evicted() -> None:
    cache, compute = ResponseCache(ttl=60, max_entries=2), Computations()
    cache.get("a", compute)
    cache.get("b", compute)
    cache.get("a", compute)  # a is now the most recent
    cache.get("c", compute)  # evicts b
    assert cache.get("a", compute) == b"body 1"
    assert cache.get("b", compute) == b"body 4"
    with pytest.raises(ValueError):
        ResponseCache(ttl=1, max_entries=0)


def test_clear_drops_entries_and_a_computation_that_began_before_it() -> None:
    cache, compute = ResponseCache(ttl=60), Computations()
    cache.get("k", compute)
    cache.clear()
    assert cache.get("k", compute) == b"body 2"

    def cleared_meanwhile() -> bytes:
        cache.clear()  # e.g. a trigger landed while this page was read
        return b"stale"

    cache.clear()
    assert cache.get("k", cleared_meanwhile) == b"stale"  # its caller gets it ...
    assert cache.get("k", compute) == b"body 3"  # ... but it was not stored


@pytest.mark.parametrize(("age", "usable", "refresh"), [(0.0, True, False), (0.49, True, False),
                                                      (0.5, True, True), (0.99, True, True), (1.0, False, False)])
def test_peek_serves_until_ttl_and_asks_for_one_refresh_in_the_second_half(age: float, usable: bool,
                                                                           refresh: bool) -> None:
    clock, compute = Clock(), Computations()
    cache = ResponseCache(ttl=1.0, clock=clock)
    assert cache.peek("k") == (None, False)
    cache.get("k", compute)
    clock.now += age
    assert cache.peek("k") == ((b"body 1" if usable else None), refresh)
    if refresh:
        assert cache.peek("k") == (b"body 1", False)  # one refresh at a time
    assert compute.calls == 1 and ResponseCache(ttl=0).peek("k") == (None, False)


def test_a_refresh_replaces_the_entry_and_a_failed_one_lets_it_expire(caplog) -> None:
    clock, compute = Clock(), Computations()
    cache = ResponseCache(ttl=1.0, clock=clock)
    cache.get("k", compute)
    clock.now += 0.6
    assert cache.peek("k") == (b"body 1", True)
    cache.refresh("k", compute)
    assert cache.peek("k") == (b"body 2", False) and cache.refreshes == 1
    clock.now += 0.6  # body 2 was computed at +0.6: ageing again

    def broken() -> bytes:
        raise RuntimeError("database down")

    assert cache.peek("k") == (b"body 2", True)
    cache.refresh("k", broken)
    assert "background refresh" in caplog.text
    assert cache.peek("k") == (b"body 2", True)  # the marker was cleared: the next request may try again
    clock.now += 0.5
    assert cache.peek("k") == (None, False)
