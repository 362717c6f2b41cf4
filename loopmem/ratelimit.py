"""Per-key and per-tenant request limits (django-ratelimit counters in the Redis cache).

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

from loopmem import metrics, redis_outage
from loopmem.errors import RateLimited
from loopmem.principal import Principal

_STATUS_ATTR = "loopmem_ratelimit"


@dataclass(frozen=True)
class RateLimitStatus:
    """What the `x-ratelimit-*` headers report: the per-key window."""

    limit: int
    remaining: int
    reset_seconds: int


def _count(request: HttpRequest, group: str, value: str, per_minute: int) -> dict[str, Any] | None:
    # None (fail open) when Redis is unreachable, or known to be (`redis_outage`): no Redis wait twice a request.
    def usage() -> dict[str, Any] | None:
        counted: dict[str, Any] | None = get_usage(
            request, group=group, key=lambda _group, _request: value, rate=f"{per_minute}/m", increment=True
        )
        return counted

    return redis_outage.call("rate limiter", usage, fallback=None)


class ApiKeyRateThrottle(BaseThrottle):
    """Counts every authenticated request against its key and its tenant; 429 `rate_limited` over either."""

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.user
        if not isinstance(principal, Principal) or principal.api_key.is_superadmin or principal.tenant is None:
            return True
        per_key = principal.tenant.rate_limit_per_minute
        http_request = request._request
        key_usage = _count(http_request, "loopmem.key", str(principal.api_key.id), per_key)
        tenant_usage = _count(
            http_request,
            "loopmem.tenant",
            str(principal.tenant.id),
            per_key * settings.RATE_LIMIT_TENANT_MULTIPLIER,
        )
        if key_usage is None or tenant_usage is None:
            return True
        setattr(
            http_request,
            _STATUS_ATTR,
            RateLimitStatus(
                limit=per_key,
                remaining=max(0, per_key - key_usage["count"]),
                reset_seconds=max(0, key_usage["time_left"]),
            ),
        )
        exceeded = [u for u in (key_usage, tenant_usage) if u["should_limit"]]
        for limit, usage in (("key", key_usage), ("tenant", tenant_usage)):
            if usage["should_limit"]:
                metrics.RATE_LIMIT_REJECTIONS.labels(limit=limit).inc()
        if exceeded:
            retry_after = max(1, *(u["time_left"] for u in exceeded))
            raise RateLimited(retry_after=retry_after, limit=per_key)
        return True


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
