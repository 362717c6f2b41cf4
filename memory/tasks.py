"""Memory's async work: embed one memory; sweep for memories left without (current) vectors."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from loopmem.embeddings import EmbeddingFailure, is_transient
from memory import services, sessions

logger = logging.getLogger(__name__)

EMBED_MAX_RETRIES = 4


@shared_task(base=DjangoTask, bind=True, max_retries=EMBED_MAX_RETRIES, acks_late=True)
def embed_memory_task(self: DjangoTask, memory_id: str) -> str:
    """Embed one memory; transient provider failures retry with backoff, permanent ones wait for the sweep."""
    try:
        return services.memory_embed(memory_id=memory_id).status
    except EmbeddingFailure as failure:
        if not is_transient(failure):
            logger.info("memory %s not embedded (%s); the sweep will retry later", memory_id, failure.tag)
            return failure.tag
        countdown = failure.retry_after or 2 ** (self.request.retries + 2)
        raise self.retry(exc=failure, countdown=countdown) from failure


@shared_task(base=DjangoTask)
def embedding_sweep_task() -> dict[str, object]:
    """Every 5 minutes: embed what has no vector or a stale model's vector (lost tasks, outages, model changes)."""
    report = services.memory_embedding_sweep()
    return {
        "embedded": report.embedded,
        "failed": report.failed,
        "tenants": report.tenants,
        "failures": report.failures,
    }


@shared_task(base=DjangoTask)
def prune_session_turns_task() -> int:
    """Hourly: delete expired session turns (reads already hide them; this reclaims the space)."""
    return sessions.session_prune()
