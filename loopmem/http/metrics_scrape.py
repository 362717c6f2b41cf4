"""Scrape-time state the core can read from Redis: open circuits, Celery queue depth, rows waiting for their vector,
heavy reads in flight."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from prometheus_client.core import GaugeMetricFamily

from loopmem.embedding import work_queue
from loopmem.observability import metrics
from loopmem.redis.client import redis_client
from loopmem.runtime import task_queue


def redis_state() -> Iterable[GaugeMetricFamily]:
    """Open circuits per provider, messages waiting per Celery queue, heavy reads in flight (all tenants)."""
    client = redis_client()
    open_circuits: dict[str, float] = {}
    pattern = cache.make_key("breaker:*:open_until")
    now = time.time()
    for raw_key in client.scan_iter(match=pattern, count=500):
        # <prefix>:<version>:breaker:<tenant>:<provider>:<endpoint>:open_until; the cache reads it back unprefixed.
        unprefixed = "breaker:" + raw_key.decode().split(":breaker:", 1)[1]
        provider = unprefixed.split(":")[2]
        open_until = cache.get(unprefixed)
        open_circuits.setdefault(provider, 0)
        if isinstance(open_until, int | float) and open_until > now:
            open_circuits[provider] += 1
    yield metrics.gauge(
        "loopmem_circuit_breakers_open", "Open embedding circuits (tenant, provider) by provider", "provider",
        open_circuits,
    )  # fmt: skip
    depth: dict[str, float] = {}
    for queue in settings.CELERY_QUEUE_NAMES:
        pipe = client.pipeline()
        for name in task_queue.broker_lists(queue):
            pipe.llen(name)
        depth[queue] = float(sum(pipe.execute()))
    yield metrics.gauge("loopmem_celery_queue_depth", "Messages waiting in each Celery queue", "queue", depth)
    yield _embedding_queue(client)
    in_flight = 0
    for raw_key in client.scan_iter(match=f"{cache.key_prefix}:heavy_read:*", count=500):
        in_flight += int(client.zcard(raw_key))
    family = GaugeMetricFamily(
        "loopmem_heavy_read_in_flight", "Heavy reads running now, all tenants (the per-tenant gate's slots in use)"
    )
    family.add_metric([], in_flight)
    yield family
    limit = GaugeMetricFamily("loopmem_heavy_read_limit", "Heavy reads admitted at once per tenant")
    limit.add_metric([], settings.HEAVY_READ_MAX_IN_FLIGHT)
    yield limit


def _embedding_queue(client: Any) -> GaugeMetricFamily:
    waiting = work_queue.queued_rows(client)
    family = GaugeMetricFamily(
        "loopmem_embedding_queue_rows",
        "Rows queued for their vector (pending) or being embedded by a drain (claimed), all tenants",
        labels=["table", "state"],
    )
    for (table, state), count in sorted(waiting.items()):
        family.add_metric([table, state], count)
    return family
