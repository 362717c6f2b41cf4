"""Liveness and readiness probes (no auth)."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, JsonResponse

from loopmem.errors import NotReady
from loopmem.http.error_responses import error_body


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database and Redis both answer; 503 `not_ready` naming what failed."""
    checks = {"database": _check_database(), "redis": _check_redis()}
    if all(result == "ok" for result in checks.values()):
        return JsonResponse({"status": "ready", "checks": checks})
    body = error_body(NotReady.status, NotReady.code, NotReady.default_message, {"checks": checks})
    return JsonResponse(body, status=NotReady.status)


def _check_database() -> str:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return f"error: {exc.__class__.__name__}"
    return "ok"


def _check_redis() -> str:
    timeout = settings.REDIS_TIMEOUT_SECONDS
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"error: {exc.__class__.__name__}"
    return "ok"
