"""The query-embedding cache: an agent that repeats a query within minutes is not embedded twice.

Per process, bounded (least recently used out first) and short-lived (entries expire after a TTL). Keyed by
(tenant id, model id, sha256 of the embedding input): a tenant whose model changes misses at once, because the
model is in the key, and two tenants never share an entry, even for the same text and model. Only successful
embeddings are stored. The vector is kept as a float64 array (an exact copy of the floats, at 8 bytes each
instead of a Python float object's 32).

Hand-written rather than `cachetools`: an OrderedDict and a lock are all it takes, and cachetools' caches need
the same external lock to be shared by a gunicorn worker's threads.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from loopmem.observability import metrics


class CacheKey(NamedTuple):
    tenant_id: uuid.UUID
    model_id: str
    input_sha256: str


class _Entry(NamedTuple):
    expires_at: float
    vector: npt.NDArray[np.float64]


class QueryEmbeddingCache:
    """An LRU with a TTL; `size` or `ttl_seconds` of 0 disables it (every lookup misses, nothing is stored)."""

    def __init__(self, *, size: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self._lock = threading.Lock()  # a gunicorn gthread worker serves requests from several threads

    @property
    def enabled(self) -> bool:
        return self._size > 0 and self._ttl > 0

    def get(self, key: CacheKey) -> list[float] | None:
        """The cached vector (a fresh list), or None; counts a hit or a miss."""
        if not self.enabled:
            return None
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at <= now:
                del self._entries[key]
                entry = None
            if entry is not None:
                self._entries.move_to_end(key)
        metrics.QUERY_EMBEDDING_CACHE.labels(result="hit" if entry is not None else "miss").inc()
        return entry.vector.tolist() if entry is not None else None

    def put(self, key: CacheKey, vector: list[float]) -> None:
        if not self.enabled:
            return
        entry = _Entry(self._clock() + self._ttl, np.asarray(vector, dtype=np.float64))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
