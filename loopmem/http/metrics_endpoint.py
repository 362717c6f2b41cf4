"""`GET /metrics`: the Prometheus exposition, guarded, plus the HTTP middleware that feeds it.

The guard: a bearer token (`LOOPMEM_METRICS_TOKEN`). Without one configured the route answers 404, so a
deployment exposes nothing until it decides how; a separate bind needs no token (`LOOPMEM_METRICS_PORT`,
served by `loopmem.metrics_exporter`).
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from loopmem.observability import metrics

logger = logging.getLogger(__name__)

# The two recall routes (memory recall, merged recall): their meta says which read answered.
_RECALL_ROUTES = {"memory-recall", "recall-list"}


class StateCollector(Collector):
    """Reads every registered state source at scrape time; a failing source is skipped and logged."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        started = time.perf_counter()
        # Sources may report the same family (each app its table's backlog): merge them into one.
        families: dict[str, GaugeMetricFamily] = {}
        for name, source in metrics.state_sources().items():
            try:
                for family in source():
                    if family.name in families:
                        families[family.name].samples.extend(family.samples)
                    else:
                        families[family.name] = family
            except Exception:
                logger.warning("metrics state source %s failed", name, exc_info=True)
        metrics.STATE_SCRAPE_SECONDS.set(time.perf_counter() - started)
        return list(families.values())


def exposition(*, include_state: bool) -> bytes:
    """The text exposition: this process's series (or every process's, in multiprocess mode) and the state."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_ProcessRegistry())
    if include_state:
        registry.register(StateCollector())
    return generate_latest(registry)


class _ProcessRegistry(Collector):
    # The default registry (single-process mode) wrapped, so state can be added without registering it globally.
    def collect(self) -> Iterable[Any]:
        return REGISTRY.collect()


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The exposition for a scraper presenting `Authorization: Bearer <LOOPMEM_METRICS_TOKEN>`; 404 otherwise."""
    token = settings.METRICS_TOKEN
    presented = request.headers.get("Authorization", "")
    if not token or not hmac.compare_digest(presented.encode(), f"Bearer {token}".encode()):
        # 404, not 401: the route does not advertise itself to callers without the token.
        return HttpResponse(status=404)
    return HttpResponse(exposition(include_state=True), content_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Counts every response by route (URL name), method and status, and times recalls by the path they took."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        match = request.resolver_match
        route = (match.view_name if match else "") or "unmatched"
        metrics.HTTP_REQUESTS.labels(route=route, method=request.method or "", status=str(response.status_code)).inc()
        metrics.HTTP_SECONDS.labels(route=route, method=request.method or "").observe(elapsed)
        if route in _RECALL_ROUTES and response.status_code == 200:
            path, mode = recall_path_of(getattr(response, "data", None))
            metrics.RECALL_SECONDS.labels(route=route, path=path, mode=mode).observe(elapsed)
        return response


def recall_path_of(body: object) -> tuple[str, str]:
    """(path, mode) from a recall response's meta: the wire reports which read answered, so the metric reads
    it there rather than reaching into the selectors. Merged recall carries the memory half under `memory`."""
    if not isinstance(body, dict):
        return "unknown", "semantic"
    meta = body.get("meta") or {}
    memory = body.get("memory")
    if "recall_path" not in meta and "fallback" not in meta and isinstance(memory, dict):
        meta = memory.get("meta") or {}
    path = "fallback" if meta.get("fallback") else str(meta.get("recall_path") or "none")
    return path, str(meta.get("mode") or "semantic")
