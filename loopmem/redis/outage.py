"""A per-process latch that remembers Redis is unreachable, so one request pays for an outage at most once.

Every Redis call on a request path (rate limits, the provider breaker, the heavy-read gate, recall history, the
Celery publish after a write) is bounded by socket timeouts, and each fails open. But a request makes several
of them: against a Redis that accepts connections and never answers (SIGSTOP, a full network buffer) each one
would wait its full timeout, in turn. After the first failure this latch makes the others skip Redis for
LOOPMEM_REDIS_RETRY_AFTER_SECONDS, answering their fail-open value at once; the next call after that tries
Redis again (and closes the latch if it answers). The readiness probe never consults it: it must tell the truth.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from django.conf import settings
from kombu.exceptions import OperationalError as KombuOperationalError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What an unreachable or hung Redis raises: redis-py's errors (ConnectionError, TimeoutError), socket errors
# underneath them, and kombu's wrapper around both when Celery publishes.
REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, KombuOperationalError)

_lock = threading.Lock()
_down_until = 0.0


def is_down() -> bool:
    """True while a recent failure says Redis is unreachable (calls should fail open without trying)."""
    return time.monotonic() < _down_until


def record_failure(what: str, exc: BaseException) -> None:
    """Open the latch for the retry interval; logs once per outage window, not once per call."""
    global _down_until
    with _lock:
        was_down = is_down()
        _down_until = time.monotonic() + settings.REDIS_RETRY_AFTER_SECONDS
    if not was_down:
        logger.warning(
            "%s failing open: redis unreachable (%s); Redis skipped for %ss",
            what,
            exc.__class__.__name__,
            settings.REDIS_RETRY_AFTER_SECONDS,
        )


def reset() -> None:
    """Close the latch (tests, and after an operator fixed Redis and does not want to wait)."""
    global _down_until
    with _lock:
        _down_until = 0.0


def call(what: str, fn: Callable[[], T], *, fallback: T) -> T:
    """`fn()`, or `fallback` when Redis is known down or `fn` fails reaching it (which opens the latch)."""
    if is_down():
        return fallback
    try:
        return fn()
    except REDIS_ERRORS as exc:
        record_failure(what, exc)
        return fallback
