"""Knowledge's scrape-time state: articles waiting for a vector (all tenants)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily

from knowledge.models import Article
from loopmem.observability import metrics


def knowledge_state() -> Iterable[GaugeMetricFamily]:
    """The embedding backlog of `articles`."""
    waiting = Article.objects.filter(embedding__isnull=True).count()
    yield metrics.gauge(
        "loopmem_embedding_backlog", "Rows waiting for a vector, by table", "table", {"articles": waiting}
    )
