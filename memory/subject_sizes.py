"""How many rows each subject holds, remembered per process for a short while: recall picks its path from it.

Recall is complete whichever path runs (memory.selectors.recall_by_vector), so a size a few seconds old can only
make one read slower than it had to be; counting before every recall cost a round trip and, at the quota, a
10,000-entry index scan on every call. Bounded (least recently used out) and thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from loopmem.scope import Scope

SUBJECT_SIZE_TTL_SECONDS = 30.0
SUBJECT_SIZE_MAX_ENTRIES = 10_000


class SubjectSizes:
    """A bounded map (tenant, subject) → (row count, when counted)."""

    def __init__(self, *, ttl: float = SUBJECT_SIZE_TTL_SECONDS, max_entries: int = SUBJECT_SIZE_MAX_ENTRIES) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._sizes: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, scope: Scope) -> int | None:
        key = (str(scope.tenant_id), scope.subject_id)
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

    def put(self, scope: Scope, size: int) -> None:
        key = (str(scope.tenant_id), scope.subject_id)
        with self._lock:
            self._sizes[key] = (size, time.monotonic())
            self._sizes.move_to_end(key)
            while len(self._sizes) > self._max_entries:
                self._sizes.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._sizes.clear()


subject_sizes = SubjectSizes()
