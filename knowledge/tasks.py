"""Knowledge's async work: embed one article, sweep for articles without (current) vectors, daily metrics."""

from __future__ import annotations

import logging
from datetime import date

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from knowledge import embedding, ledger
from loopmem.embedding.pipeline import embed_one_with_retries, sweep
from loopmem.runtime.task_retry import PERIODIC_TASK_OPTIONS

logger = logging.getLogger(__name__)

EMBED_MAX_RETRIES = 4


@shared_task(base=DjangoTask, bind=True, max_retries=EMBED_MAX_RETRIES, acks_late=True)
def embed_article_task(self: DjangoTask, article_id: str) -> str:
    """Embed one article; transient provider failures retry with backoff, permanent ones wait for the sweep."""
    return embed_one_with_retries(self, f"article {article_id}", lambda: embedding.article_embed(article_id=article_id))


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def article_embedding_sweep_task() -> dict[str, object]:
    """Every 5 minutes: embed articles with no vector or a stale model's (lost tasks, outages, edits)."""
    return sweep(embedding.ARTICLE_EMBEDDINGS).as_dict()


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def retrieval_metrics_task(day: str | None = None) -> int:
    """Daily: snapshot yesterday's retrieval funnel (UTC) of every tenant with ledger rows; `day` is ISO."""
    return ledger.retrieval_metrics_run(day=date.fromisoformat(day) if day else None)
