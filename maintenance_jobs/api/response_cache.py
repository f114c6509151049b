"""A short-lived, single-flight cache of read-only responses (`/executions`, `/stats`).

Dashboards and scripts poll the same few pages; with 100k runs every page costs a few milliseconds of Postgres and
Python time, so 50 clients polling the same page would each pay it. Within `ttl` seconds of a computation, the same
key gets the same bytes, and concurrent misses of one key wait for a single computation instead of all running it.
Staleness is bounded by `ttl` (measured from when the computation started); writes through this process (a manual
trigger) clear the cache so their effect is visible at once. `ttl <= 0` turns caching off.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Entry:
    computed_at: float
    body: bytes


class ResponseCache:
    """Bytes per key for `ttl` seconds, at most `max_entries` keys (least recently used evicted)."""

    def __init__(self, ttl: float, max_entries: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped by clear(): a computation that began before it is not stored
        self.hits = 0
        self.misses = 0

    def _fresh(self, key: Hashable) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry.computed_at >= self.ttl:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry.body

    def peek(self, key: Hashable) -> bytes | None:
        """The fresh bytes of `key`, or None; never waits for a computation (safe on an event loop)."""
        if self.ttl <= 0:
            return None
        with self._lock:
            return self._fresh(key)

    def get(self, key: Hashable, compute: Callable[[], bytes]) -> bytes:
        """The cached bytes of `key`, or `compute()`'s (errors propagate and cache nothing)."""
        if self.ttl <= 0:
            return compute()
        with self._lock:
            body = self._fresh(key)
            if body is not None:
                return body
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:  # one computation per key; the others wait for it and then find it fresh
            with self._lock:
                body = self._fresh(key)
                if body is not None:
                    return body
                self.misses += 1
                generation = self._generation
            started = self._clock()
            try:
                body = compute()
            except BaseException:
                with self._lock:
                    if key not in self._entries:
                        self._computing.pop(key, None)
                raise
            with self._lock:
                if generation != self._generation:
                    return body
                self._entries[key] = _Entry(started, body)
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    evicted, _ = self._entries.popitem(last=False)
                    self._computing.pop(evicted, None)
            return body

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._computing.clear()
