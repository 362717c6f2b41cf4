"""Memory's async work: embedding, session prune, promotion, graduation. Each task loads by id and calls one service."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from loopmem.embedding.pipeline import drain_queue, embed_one_with_retries, sweep
from loopmem.runtime.task_retry import PERIODIC_TASK_OPTIONS
from memory import embedding, graduation, recall_bump, session_tier
from memory.promotion import evaluation
from memory.promotion import jobs as promotion

logger = logging.getLogger(__name__)

EMBED_MAX_RETRIES = 4


@shared_task(base=DjangoTask, bind=True, max_retries=EMBED_MAX_RETRIES, acks_late=True)
def embed_memory_task(self: DjangoTask, memory_id: str) -> str:
    """Embed one memory; transient provider failures retry with backoff, permanent ones wait for the sweep.

    Writes queue their rows for `embed_pending_memories_task` instead; this stays for messages already queued
    by an older release, and for operators embedding one row."""
    return embed_one_with_retries(self, f"memory {memory_id}", lambda: embedding.memory_embed(memory_id=memory_id))


@shared_task(base=DjangoTask, bind=True, max_retries=EMBED_MAX_RETRIES, acks_late=True)
def embed_pending_memories_task(self: DjangoTask, tenant_id: str) -> dict[str, object]:
    """Embed the tenant's queued memories in provider batches (loopmem.embedding.work_queue); one task per burst of
    writes, not per write."""
    return drain_queue(embedding.MEMORY_EMBEDDINGS, self, tenant_id).as_dict()


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def embedding_sweep_task() -> dict[str, object]:
    """Every 5 minutes: embed what has no vector or a stale model's vector (lost tasks, outages, model changes)."""
    return sweep(embedding.MEMORY_EMBEDDINGS).as_dict()


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def prune_session_turns_task() -> int:
    """Hourly: delete expired session turns (reads already hide them; this reclaims the space)."""
    return session_tier.session_prune()


@shared_task(base=DjangoTask, bind=True, max_retries=None, acks_late=True)
def promote_session_task(self: DjangoTask, job_id: str) -> str:
    """Promote one session (its PromotionJob holds the state; retries are bounded there, not here)."""
    outcome = promotion.promotion_run(job_id=job_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.outcome


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def promotion_sweep_task() -> dict[str, int]:
    """Hourly: enqueue promotion for sessions with new turns since their watermark."""
    report = promotion.promotion_sweep()
    return {
        "sessions": report.sessions,
        "enqueued": report.enqueued,
        "already_in_flight": report.already_in_flight,
        "over_budget": report.over_budget,
        "rescued": report.rescued,
    }


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def promotion_eval_task() -> int:
    """Daily: score each tenant's own LLM compiler on the shipped dataset (observability only)."""
    return evaluation.promotion_eval_tenants_with_llm()


@shared_task(base=DjangoTask, ignore_result=True)
def bump_recall_counts_task(tenant_id: str, memory_ids: list[str]) -> int:
    """Count recalls towards graduation, off the request path."""
    return recall_bump.memory_bump_recall_counts(tenant_id=uuid.UUID(tenant_id), memory_ids=memory_ids)


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def graduation_sweep_task(max_per_run: int | None = None) -> dict[str, int]:
    """Hourly: graduate the hottest memories (recalled ≥ 3 times), fairly across tenants."""
    return graduation.memory_graduation_sweep(max_per_run=max_per_run)
