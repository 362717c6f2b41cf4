"""The Redis client every module shares: one per (URL, timeout) and process, with short timeouts.

Short socket and connect timeouts keep an outage from hanging a request; `loopmem.redis.outage` then remembers the
outage so one request pays for it at most once.
"""

from __future__ import annotations

import functools

import redis
from django.conf import settings


def redis_client() -> redis.Redis:
    """A shared client for the Redis in settings, with the short timeouts that keep outages from hanging."""
    timeout = settings.REDIS_TIMEOUT_SECONDS
    return _redis_client_for(settings.REDIS_URL, timeout)


@functools.cache
def _redis_client_for(url: str, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
