"""A circuit breaker per (tenant, provider) whose state lives in Redis, so every process shares it.

After FAILURE_THRESHOLD transient failures within FAILURE_WINDOW seconds the circuit opens for
OPEN_SECONDS: calls fail fast (`embedding_circuit_open`) instead of piling onto a sick provider. If Redis
itself is unreachable (or known to be: `loopmem.redis.outage`) the breaker stays closed (calls go through) and
records nothing: it must never cause an outage, nor make a request wait on Redis more than once.

The happy path costs no Redis round trip: a process that saw a circuit closed (and no failures counted) less
than CLOSED_RECHECK_SECONDS ago trusts that, and a success deletes the failure count only when some were
seen. Two round trips a call were most of what an embedding call added over the provider's own answer
(`manage.py bench_embed_overhead`). The price: a circuit another process opened is seen here up to
CLOSED_RECHECK_SECONDS late, and a success does not reset failures counted elsewhere since the last check
(they still expire with their window). An open circuit is always re-read, so its closing is seen at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.core.cache import cache

from loopmem.observability import metrics
from loopmem.redis import outage

logger = logging.getLogger(__name__)

FAILURE_THRESHOLD = 5
FAILURE_WINDOW_SECONDS = 60
OPEN_SECONDS = 30
CLOSED_RECHECK_SECONDS = 1.0


@dataclass
class _Seen:
    """What this process last read (or wrote) of one circuit."""

    closed_at: float = float("-inf")  # monotonic time it was last seen closed; -inf: ask Redis
    failures: bool = False  # failures may be counted: a success must clear them


_SEEN: dict[str, _Seen] = {}  # per process; one entry per (tenant, provider) this process called


class Breaker:
    """One circuit, named by `key`."""

    def __init__(self, key: str) -> None:
        self._failures = f"breaker:{key}:failures"
        self._provider = key.split(":")[1]  # keys are "<tenant>:<provider>:<endpoint>" (embeddings.breaker_key)
        self._open_until = f"breaker:{key}:open_until"
        self._seen = _SEEN.setdefault(key, _Seen())

    def open_for(self) -> float | None:
        """Seconds until the open circuit closes again; None while it is closed (calls may go through)."""
        if time.monotonic() - self._seen.closed_at < CLOSED_RECHECK_SECONDS:
            return None
        found = outage.call(
            "circuit breaker", lambda: cache.get_many([self._open_until, self._failures]), fallback=None
        )
        if found is None:
            return None  # Redis unreachable: stay closed
        open_until = found.get(self._open_until)
        if open_until is not None and open_until > time.time():
            self._seen.closed_at = float("-inf")
            return float(open_until - time.time())
        self._seen.closed_at = time.monotonic()
        self._seen.failures = bool(found.get(self._failures))
        return None

    def record_failure(self) -> None:
        self._seen.failures = True
        outage.call("circuit breaker", self._count_failure, fallback=None)

    def _count_failure(self) -> None:
        cache.add(self._failures, 0, FAILURE_WINDOW_SECONDS)
        try:
            failures = cache.incr(self._failures)
        except ValueError:  # the window expired between add and incr: this failure starts a new one
            cache.set(self._failures, 1, FAILURE_WINDOW_SECONDS)
            failures = 1
        if failures >= FAILURE_THRESHOLD:
            cache.set(self._open_until, time.time() + OPEN_SECONDS, OPEN_SECONDS)
            self._seen.closed_at = float("-inf")  # this process sees its own opening at once
            cache.delete(self._failures)
            metrics.CIRCUIT_OPENED.labels(provider=self._provider).inc()
            logger.warning("circuit %s opened for %ss", self._open_until, OPEN_SECONDS)

    def record_success(self) -> None:
        if not self._seen.failures:
            return  # none counted when last read, none recorded here since: nothing to reset
        if outage.call("circuit breaker", self._clear_failures, fallback=False):
            self._seen.failures = False

    def _clear_failures(self) -> bool:
        cache.delete(self._failures)
        return True
