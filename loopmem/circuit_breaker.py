"""A circuit breaker per (tenant, provider) whose state lives in Redis, so every process shares it.

After FAILURE_THRESHOLD transient failures within FAILURE_WINDOW seconds the circuit opens for
OPEN_SECONDS: calls fail fast (`embedding_circuit_open`) instead of piling onto a sick provider. If Redis
itself is unreachable the breaker stays closed (calls go through): it must never cause an outage.
"""

from __future__ import annotations

import logging
import time

import redis
from django.core.cache import cache

from loopmem import metrics

logger = logging.getLogger(__name__)

FAILURE_THRESHOLD = 5
FAILURE_WINDOW_SECONDS = 60
OPEN_SECONDS = 30

_REDIS_ERRORS = (redis.RedisError, OSError)


class Breaker:
    """One circuit, named by `key`."""

    def __init__(self, key: str) -> None:
        self._failures = f"breaker:{key}:failures"
        self._provider = key.rsplit(":", 1)[-1]  # keys are "<tenant>:<provider>"
        self._open_until = f"breaker:{key}:open_until"

    def open_for(self) -> float | None:
        """Seconds until the open circuit closes again; None while it is closed (calls may go through)."""
        try:
            open_until = cache.get(self._open_until)
        except _REDIS_ERRORS as exc:
            logger.warning("circuit breaker unavailable, staying closed (%s)", exc)
            return None
        if open_until is not None and open_until > time.time():
            return float(open_until - time.time())
        return None

    def record_failure(self) -> None:
        try:
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
        except _REDIS_ERRORS as exc:
            logger.warning("circuit breaker unavailable (%s)", exc)

    def record_success(self) -> None:
        try:
            cache.delete(self._failures)
        except _REDIS_ERRORS as exc:
            logger.warning("circuit breaker unavailable (%s)", exc)
