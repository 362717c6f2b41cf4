"""Row counts that choose a read's path, remembered per process for a short while.

Recall (memory.selectors.recall_by_vector) and knowledge search (knowledge.selectors._nearest) count the rows in
reach to pick the exact read or the verified ANN read. Either path is complete, so a size a few seconds old can
only make one read slower than it had to be; counting before every read cost a round trip and, on a large set,
an index or table scan per call (2.5 ms for a tenant's 20,000 articles). Bounded (least recently used out) and
thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

SIZE_TTL_SECONDS = 30.0
SIZE_MAX_ENTRIES = 10_000


class SizeCache:
    """A bounded map key → (row count, when counted); an entry older than `ttl` is gone."""

    def __init__(self, *, ttl: float = SIZE_TTL_SECONDS, max_entries: int = SIZE_MAX_ENTRIES) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._sizes: OrderedDict[Hashable, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> int | None:
        with self._lock:
            entry = self._sizes.get(key)
            if entry is None:
                return None
            size, counted_at = entry
            if time.monotonic() - counted_at > self._ttl:
                del self._sizes[key]
                return None
            self._sizes.move_to_end(key)
            return size

    def put(self, key: Hashable, size: int) -> None:
        with self._lock:
            self._sizes[key] = (size, time.monotonic())
            self._sizes.move_to_end(key)
            while len(self._sizes) > self._max_entries:
                self._sizes.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._sizes.clear()


# How many rows each memory subject holds (memory recall's path).
subject_sizes = SizeCache()
# How many embedded articles a viewer's search reaches, up to the exact-read bound (knowledge search's path).
visible_article_counts = SizeCache()


def clear_all() -> None:
    subject_sizes.clear()
    visible_article_counts.clear()
