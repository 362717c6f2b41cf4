"""bench_ratelimit: the rate limiter's own cost per request, in process, against this process's Redis."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any
from unittest import mock

import redis.connection
from django.core.management.base import CommandError
from django.test import RequestFactory
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from loopmem.http.ratelimit import ApiKeyRateThrottle
from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey, Tenant
from loopmem.redis import outage
from loopmem.tenancy.principal import Principal


class Command(OperatorCommand):
    help = (
        "Time ApiKeyRateThrottle.allow_request, call by call, for a fresh key of an unsaved tenant whose limit is "
        "never reached (both windows counted, nothing refused): mean and p50/p95/p99 in microseconds, and the Redis "
        "round trips each call makes. Uses this process's Redis (its counters expire after a minute); no database "
        "rows. Prints the load average."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--calls", type=int, default=1000, help="measured calls (after 50 warm-up calls)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        load_before = _load()
        per_call_us = measure(calls=options["calls"])
        summary = {
            "calls": len(per_call_us),
            "per_call_us": _summary(per_call_us),
            "redis_round_trips_per_call": round_trips_per_call(calls=100),
            "load_average_before": load_before,
            "load_average_after": _load(),
        }
        return summary, render(summary)


class _Authenticated(BaseAuthentication):
    """The request's caller without a key lookup: only the limiter is timed."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    def authenticate(self, request: Request) -> tuple[Principal, None]:
        return self.principal, None


def _counted_request() -> Request:
    tenant = Tenant(id=uuid.uuid4(), slug="bench-ratelimit", rate_limit_requests_per_minute=10_000_000)
    principal = Principal(api_key=ApiKey(id=uuid.uuid4(), tenant=tenant, role=ApiKey.Role.AGENT), tenant=tenant)
    return Request(RequestFactory().post("/api/v1/memory/recall"), authenticators=[_Authenticated(principal)])


def measure(*, calls: int) -> list[float]:
    """Microseconds of each `allow_request`, after a warm-up that opens the connection and loads any script."""
    throttle, request = ApiKeyRateThrottle(), _counted_request()
    for _ in range(50):
        throttle.allow_request(request, None)
    timings = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        throttle.allow_request(request, None)
        timings.append((time.perf_counter_ns() - started) / 1000)
    if outage.is_down():
        raise CommandError("Redis did not answer: these figures would time the limiter failing open, not counting")
    return timings


def round_trips_per_call(*, calls: int) -> float:
    """Redis round trips per `allow_request` (untimed): writes to a socket, so a pipeline or a script counts once."""
    throttle, request = ApiKeyRateThrottle(), _counted_request()
    for _ in range(5):
        throttle.allow_request(request, None)
    sent = 0
    # redis-py leaves this method unannotated.
    send: Callable[[Any, Any, bool], None] = redis.connection.AbstractConnection.send_packed_command

    def counting(connection: Any, command: Any, check_health: bool = True) -> None:
        nonlocal sent
        sent += 1
        send(connection, command, check_health)

    with mock.patch.object(redis.connection.AbstractConnection, "send_packed_command", counting):
        for _ in range(calls):
            throttle.allow_request(request, None)
    return round(sent / calls, 2)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"mean": round(statistics.fmean(ordered), 1), "p50": at(0.50), "p95": at(0.95), "p99": at(0.99)}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def render(summary: dict[str, Any]) -> str:
    f = summary["per_call_us"]
    return (
        f"{summary['calls']} calls of ApiKeyRateThrottle.allow_request; load average before "
        f"{summary['load_average_before']}, after {summary['load_average_after']}\n"
        f"per call (us): mean {f['mean']}  p50 {f['p50']}  p95 {f['p95']}  p99 {f['p99']}; "
        f"Redis round trips per call: {summary['redis_round_trips_per_call']}"
    )
