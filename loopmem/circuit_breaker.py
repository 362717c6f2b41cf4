"""A circuit breaker per (tenant, provider) whose state lives in Redis, so every process shares it.

After FAILURE_THRESHOLD transient failures within FAILURE_WINDOW seconds the circuit opens for
OPEN_SECONDS: calls fail fast (`embedding_circuit_open`) instead of piling onto a sick provider. If Redis
itself is unreachable (or known to be: `loopmem.redis_outage`) the breaker stays closed (calls go through) and
records nothing: it must never cause an outage, nor make a request wait on Redis more than once.
"""

from __future__ import annotations

import logging
import time

from django.core.cache import cache

from loopmem import metrics, redis_outage

logger = logging.getLogger(__name__)

FAILURE_THRESHOLD = 5
FAILURE_WINDOW_SECONDS = 60
OPEN_SECONDS = 30


class Breaker:
    """One circuit, named by `key`."""

    def __init__(self, key: str) -> None:
        self._failures = f"breaker:{key}:failures"
        self._provider = key.rsplit(":", 1)[-1]  # keys are "<tenant>:<provider>"
        self._open_until = f"breaker:{key}:open_until"

    def open_for(self) -> float | None:
        """Seconds until the open circuit closes again; None while it is closed (calls may go through)."""
        open_until = redis_outage.call("circuit breaker", lambda: cache.get(self._open_until), fallback=None)
        if open_until is not None and open_until > time.time():
            return float(open_until - time.time())
        return None

    def record_failure(self) -> None:
        redis_outage.call("circuit breaker", self._count_failure, fallback=None)

    def _count_failure(self) -> None:
        cache.add(self._failures, 0, FAILURE_WINDOW_SECONDS)
        try:
            failures = cache.incr(self._failures)
        except ValueError:  # the window expired between add and incr: this failure starts a new one
            cache.set(self._failures, 1, FAILURE_WINDOW_SECONDS)
            failures = 1
        if failures >= FAILURE_THRESHOLD:
            cache.set(self._open_until, time.time() + OPEN_SECONDS, OPEN_SECONDS)
            cache.delete(self._failures)
            metrics.CIRCUIT_OPENED.labels(provider=self._provider).inc()
            logger.warning("circuit %s opened for %ss", self._open_until, OPEN_SECONDS)

    def record_success(self) -> None:
        redis_outage.call("circuit breaker", lambda: cache.delete(self._failures), fallback=None)
