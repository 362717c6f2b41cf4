"""Per-key and per-tenant request limits: django-ratelimit's fixed windows on the Django cache (Redis).

Superadmin keys are exempt. When Redis cannot be reached the limiter fails open and logs: an outage
of Redis must never turn into failed requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_ratelimit.core import get_usage
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from loopmem.errors import RateLimited
from loopmem.observability import metrics
from loopmem.redis import outage
from loopmem.tenancy.principal import Principal

_STATUS_ATTR = "loopmem_ratelimit"

# The limits are per minute. django-ratelimit's windows are fixed: each counter's window ends at a moment offset
# from the minute by a hash of what it counts, so keys reset at staggered moments, not all on the minute. A fixed
# window is enough for what the limits are for (stopping a runaway agent, not billing): at worst a client bursts
# twice its limit across a boundary. A refused request is counted too: a client hammering through a 429 does not
# earn capacity back early.
WINDOW_SECONDS = 60

# django-ratelimit's groups: with the counted value (a key id, a tenant id) and the rate they name a counter. They
# are stored data (hashed into each counter's Redis key), not module paths: renaming one resets every window, and
# during a rolling deploy old and new workers would count in separate buckets.
_KEY_GROUP = "loopmem.ratelimit.key"
_TENANT_GROUP = "loopmem.ratelimit.tenant"


@dataclass(frozen=True)
class RateLimitStatus:
    """What the `x-ratelimit-*` headers report: the per-key window."""

    limit: int
    remaining: int
    reset_seconds: int


@dataclass(frozen=True)
class WindowCount:
    """One counter after this request was counted: its count, its limit, and the seconds its window has left."""

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
    *, key_id: str, tenant_id: str, key_limit: int, tenant_limit: int, window_seconds: int = WINDOW_SECONDS
) -> RequestCounts | None:
    """Count one request against its key's and its tenant's windows; None (fail open) when Redis is unreachable.

    None too while `redis_outage` knows Redis is down, so a request never waits on Redis twice.
    """

    def count_both() -> RequestCounts | None:
        key = _count(_KEY_GROUP, key_id, key_limit, window_seconds)
        tenant = _count(_TENANT_GROUP, tenant_id, tenant_limit, window_seconds) if key is not None else None
        return None if key is None or tenant is None else RequestCounts(key=key, tenant=tenant)

    # The cache raises what redis-py raises (django-ratelimit catches only DNS failures): the latch catches it.
    return outage.call("rate limiter", count_both, fallback=None)


def _count(group: str, value: str, limit: int, window_seconds: int) -> WindowCount | None:
    usage = get_usage(
        None,  # read only by method filters and request-derived keys, neither used here
        group=group,
        key=lambda _group, _request: value,
        rate=(limit, window_seconds),
        increment=True,
    )
    if usage is None:
        # RATELIMIT_ENABLE off, or (RATELIMIT_FAIL_OPEN) the cache lost the counter between its add and its incr.
        return None
    # django-ratelimit's time_left is whole seconds until the last second of the window begins; the window ends
    # one second later. Rounded up this way, a client that waits `reset` seconds finds the window gone.
    return WindowCount(count=usage["count"], limit=usage["limit"], reset_seconds=usage["time_left"] + 1)


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
