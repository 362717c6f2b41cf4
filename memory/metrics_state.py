"""Memory's scrape-time state: memories waiting for a vector, promotion jobs by state (all tenants)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from loopmem.observability import metrics
from memory.models import Memory, PromotionJob


def memory_state() -> Iterable[GaugeMetricFamily]:
    """The embedding backlog of `memories` and the promotion ledger's jobs per state."""
    waiting = Memory.objects.filter(embedding__isnull=True).count()
    yield metrics.gauge(
        "loopmem_embedding_backlog", "Rows waiting for a vector, by table", "table", {"memories": waiting}
    )
    counts = dict(PromotionJob.objects.order_by().values_list("state").annotate(n=Count("id")))
    by_state = {state: float(counts.get(state, 0)) for state in PromotionJob.State.values}
    yield metrics.gauge("loopmem_promotion_jobs", "Promotion jobs in the ledger, by state", "state", by_state)
