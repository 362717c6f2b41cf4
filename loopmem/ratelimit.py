"""Per-key and per-tenant request limits: two fixed-window counters in the cache's Redis, one round trip.

Superadmin keys are exempt. When Redis cannot be reached the limiter fails open and logs: an outage
of Redis must never turn into failed requests.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from loopmem import metrics, redis_outage
from loopmem.errors import RateLimited
from loopmem.principal import Principal

_STATUS_ATTR = "loopmem_ratelimit"

# The limits are per minute. A window opens at the first request that finds no counter and lasts this long. A
# fixed window is enough for what the limits are for (stopping a runaway agent, not billing): at worst a client
# bursts twice its limit across a boundary. Each counter opens its own window, so keys reset at staggered moments,
# not all on the minute, and only Redis' clock is read, so web processes with skewed clocks agree.
WINDOW_SECONDS = 60

# Both windows in one atomic round trip: count the request, give a new counter (no expiry yet) its window, and
# answer each count with the milliseconds its window has left. A refused request is counted too: a
# client hammering through a 429 does not earn capacity back early.
_COUNT = """
local function hit(counter)
    local count = redis.call('INCR', counter)
    local left = redis.call('PTTL', counter)
    if left < 0 then
        redis.call('PEXPIRE', counter, ARGV[1])
        left = tonumber(ARGV[1])
    end
    return {count, left}
end
local key, tenant = hit(KEYS[1]), hit(KEYS[2])
return {key[1], key[2], tenant[1], tenant[2]}
"""


@dataclass(frozen=True)
class RateLimitStatus:
    """What the `x-ratelimit-*` headers report: the per-key window."""

    limit: int
    remaining: int
    reset_seconds: int


@dataclass(frozen=True)
class WindowCount:
    """One counter after this request was counted: its count, its limit, and the true seconds its window has left."""

    count: int
    limit: int
    reset_seconds: int

    @property
    def exceeded(self) -> bool:
        return self.count > self.limit


@dataclass(frozen=True)
class RequestCounts:
    """Where one request left its key's window and its tenant's."""

    key: WindowCount
    tenant: WindowCount


def count_request(
    *, key_id: str, tenant_id: str, key_limit: int, tenant_limit: int, window_seconds: float = WINDOW_SECONDS
) -> RequestCounts | None:
    """Count one request against its key's and its tenant's windows; None (fail open) when Redis is unreachable.

    None too while `redis_outage` knows Redis is down, so a request never waits on Redis twice.
    """
    client, prefix = _cache_redis()
    # A {hash tag} on the tenant puts both counters in one Redis Cluster slot, as a two-key script needs there.
    keys = [f"{prefix}:ratelimit:{{{tenant_id}}}:key:{key_id}", f"{prefix}:ratelimit:{{{tenant_id}}}:tenant"]
    window_ms = max(1, round(window_seconds * 1000))
    answer = redis_outage.call(
        "rate limiter", lambda: _count_script(client)(keys=keys, args=[window_ms]), fallback=None
    )
    if answer is None:
        return None
    key_count, key_left_ms, tenant_count, tenant_left_ms = (int(value) for value in answer)
    return RequestCounts(
        key=WindowCount(count=key_count, limit=key_limit, reset_seconds=_whole_seconds(key_left_ms)),
        tenant=WindowCount(count=tenant_count, limit=tenant_limit, reset_seconds=_whole_seconds(tenant_left_ms)),
    )


def _whole_seconds(milliseconds: int) -> int:
    # Rounded up: a client that waits `reset` seconds finds the window gone, never one millisecond short of it.
    return -(-milliseconds // 1000)


class ApiKeyRateThrottle(BaseThrottle):
    """Counts every authenticated request against its key and its tenant; 429 `rate_limited` over either."""

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.user
        if not isinstance(principal, Principal) or principal.api_key.is_superadmin or principal.tenant is None:
            return True
        per_key = principal.tenant.rate_limit_per_minute
        counts = count_request(
            key_id=str(principal.api_key.id),
            tenant_id=str(principal.tenant.id),
            key_limit=per_key,
            tenant_limit=per_key * settings.RATE_LIMIT_TENANT_MULTIPLIER,
        )
        if counts is None:
            return True
        setattr(
            request._request,
            _STATUS_ATTR,
            RateLimitStatus(
                limit=per_key,
                remaining=max(0, per_key - counts.key.count),
                reset_seconds=counts.key.reset_seconds,
            ),
        )
        exceeded = [
            (name, window) for name, window in (("key", counts.key), ("tenant", counts.tenant)) if window.exceeded
        ]
        for name, _ in exceeded:
            metrics.RATE_LIMIT_REJECTIONS.labels(limit=name).inc()
        if exceeded:
            raise RateLimited(retry_after=max(1, *(window.reset_seconds for _, window in exceeded)), limit=per_key)
        return True


# --- The cache's Redis -----------------------------------------------------------------------------------


def _cache_redis() -> tuple[redis.Redis, str]:
    """The default cache's Redis (the server it writes to) and its key prefix.

    The counters are cache entries under its prefix: a cache flush clears them, and pointing the cache elsewhere
    moves them. The client is shared by the process, with the cache's short timeouts.
    """
    cache_settings: dict[str, Any] = settings.CACHES["default"]
    options = cache_settings.get("OPTIONS", {})
    client = _redis_client_for(
        _write_server(cache_settings["LOCATION"]),
        options.get("socket_connect_timeout", settings.REDIS_TIMEOUT_SECONDS),
        options.get("socket_timeout", settings.REDIS_TIMEOUT_SECONDS),
    )
    return client, cache_settings.get("KEY_PREFIX", "")


def _write_server(location: str | list[str]) -> str:
    # Django's RedisCache takes several servers ("a,b" or a list) and writes to the first.
    servers = location if isinstance(location, list | tuple) else re.split("[;,]", location)
    return str(servers[0]).strip()


@functools.cache
def _redis_client_for(url: str, connect_timeout: float, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=connect_timeout, socket_timeout=timeout)


@functools.cache
def _count_script(client: redis.Redis) -> Any:
    # EVALSHA, loading the script on the first NOSCRIPT (a restarted Redis forgets scripts).
    return client.register_script(_COUNT)


# --- Headers ---------------------------------------------------------------------------------------------


class RateLimitHeadersMiddleware:
    """Adds `x-ratelimit-limit|remaining|reset` to every response of a request the limiter counted."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        status: RateLimitStatus | None = getattr(request, _STATUS_ATTR, None)
        if status is not None:
            response["x-ratelimit-limit"] = str(status.limit)
            response["x-ratelimit-remaining"] = str(status.remaining)
            response["x-ratelimit-reset"] = str(status.reset_seconds)
        return response
