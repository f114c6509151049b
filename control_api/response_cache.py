"""A short-lived, single-flight cache of read-only responses (`/executions`, `/stats`), refreshed ahead of expiry.

Dashboards and scripts poll the same few pages; with 100k runs every page costs a few milliseconds of Postgres and
Python time, so 50 clients polling the same page would each pay it. A computed page is served for `ttl` seconds
(measured from when its computation started, so no answer is older than `ttl`):

- in its first half it is simply served;
- in its second half it is still served, and the first request to see it starts one background refresh, so busy
  keys are replaced before they expire and no client waits for the database;
- after `ttl` it is gone: concurrent misses of one key wait for a single computation instead of all running it.

Writes through this process (a manual trigger, task changes) clear the cache so their effect is visible at once.
`ttl <= 0` turns caching off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Entry:
    computed_at: float
    body: bytes


class ResponseCache:
    """A page (bytes, or bytes with headers: deps.CachedPage) per key for `ttl` seconds, at most `max_entries` keys (least recently used evicted)."""

    def __init__(self, ttl: float, max_entries: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}
        self._refreshing: set[Hashable] = set()
        self._lock = threading.Lock()
        self._generation = 0  # bumped by clear(): a computation that began before it is not stored
        self.hits = 0
        self.misses = 0
        self.refreshes = 0

    def _usable(self, key: Hashable) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry.computed_at >= self.ttl:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def peek(self, key: Hashable) -> tuple[bytes | None, bool]:
        """(the usable bytes of `key` or None, whether the caller should start `refresh(key)`); never waits."""
        if self.ttl <= 0:
            return None, False
        with self._lock:
            entry = self._usable(key)
            if entry is None:
                return None, False
            ageing = self._clock() - entry.computed_at >= self.ttl / 2
            if ageing and key not in self._refreshing:
                self._refreshing.add(key)
                return entry.body, True
            return entry.body, False

    def get(self, key: Hashable, compute: Callable[[], bytes]) -> bytes:
        """The cached bytes of `key`, or `compute()`'s (errors propagate and cache nothing)."""
        if self.ttl <= 0:
            return compute()
        with self._lock:
            entry = self._usable(key)
            if entry is not None:
                return entry.body
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:  # one computation per key; the others wait for it and then find it usable
            with self._lock:
                entry = self._usable(key)
                if entry is not None:
                    return entry.body
                self.misses += 1
            try:
                return self._compute_and_store(key, compute)
            except BaseException:
                with self._lock:
                    if key not in self._entries:
                        self._computing.pop(key, None)
                raise

    def refresh(self, key: Hashable, compute: Callable[[], bytes]) -> None:
        """Recompute `key` (after `peek` asked for it); a failure is logged and the entry simply expires."""
        try:
            self._compute_and_store(key, compute)
            with self._lock:
                self.refreshes += 1
        except Exception:
            log.exception("background refresh of %r failed; the next request after expiry recomputes it", key)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _compute_and_store(self, key: Hashable, compute: Callable[[], bytes]) -> bytes:
        with self._lock:
            generation = self._generation
        started = self._clock()
        body = compute()
        with self._lock:
            if generation != self._generation:
                return body
            current = self._entries.get(key)
            if current is None or current.computed_at <= started:
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
