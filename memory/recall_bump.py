"""The recall bump (reference §4.5): a healthy semantic recall counts towards graduation, at most once per memory
per cooldown, off the request path and never blocking the recall it counts."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from loopmem.observability import metrics
from loopmem.redis.client import redis_client
from loopmem.runtime.task_queue import broker_lists, send
from memory.models import Memory

BUMP_RECALL_COUNTS_TASK = "memory.tasks.bump_recall_counts_task"
BUMP_QUEUE = "default"  # the bump is the only task routed there (settings.CELERY_TASK_ROUTES): its depth is the backlog


def memory_note_recalled(*, tenant_id: uuid.UUID, result: Any, include_superseded: bool) -> None:
    """Count a healthy semantic recall towards graduation: at most once per memory per cooldown.

    Only hits whose semantic similarity is ≥ the bump floor count (in every mode: a keyword or fused score is not
    a similarity); the fallback and include_superseded reads never do. Redis
    pre-filters the cooldown; the conditional UPDATE is the real guard. Off the request path (a Celery task)
    unless RECALL_BUMP_MODE is "sync"; if it cannot be enqueued it is dropped, never blocking the recall.
    """
    if result.fallback or include_superseded:
        return
    ids = [str(hit.memory.id) for hit in result.hits if (hit.semantic or 0.0) >= settings.RECALL_BUMP_MIN_SCORE]
    ids = _bump_admitted(tenant_id, ids)
    if not ids:
        return
    if settings.RECALL_BUMP_MODE == "sync":
        memory_bump_recall_counts(tenant_id=tenant_id, memory_ids=ids)
        return
    # Dropped (logged) if the broker is down: a recall is never blocked by its bookkeeping.
    send(BUMP_RECALL_COUNTS_TASK, (str(tenant_id), ids))


def recall_bump_key(tenant_id: uuid.UUID, memory_id: object) -> str:
    """The Redis key of a memory's bump cooldown (tenant first, so an erasure finds a tenant's by prefix)."""
    return f"loopmem:recall_bump:{tenant_id}:{memory_id}"


def _bump_admitted(tenant_id: uuid.UUID, memory_ids: list[str]) -> list[str]:
    """The ids not bumped within the cooldown, by one pipelined SET NX per id (one round trip).

    None while RECALL_BUMP_MAX_TASKS bump tasks already wait on their queue (read in the same round trip): a burst
    of recalls never queues an unbounded backlog of bookkeeping. The dropped bump's cooldown keys are released, so
    a later recall counts; the drop is counted in loopmem_recall_bumps_dropped.
    """
    if not memory_ids:
        return []
    cooldown = settings.RECALL_BUMP_COOLDOWN_SECONDS
    async_mode = settings.RECALL_BUMP_MODE != "sync"  # inline bumps queue nothing
    try:
        client = redis_client()
        pipe = client.pipeline()
        lists = broker_lists(BUMP_QUEUE) if async_mode else []
        for name in lists:
            pipe.llen(name)
        for memory_id in memory_ids:
            pipe.set(recall_bump_key(tenant_id, memory_id), 1, nx=True, ex=cooldown)
        replies = pipe.execute()
        waiting, admitted = sum(replies[: len(lists)]), replies[len(lists) :]
        ids = [memory_id for memory_id, ok in zip(memory_ids, admitted, strict=True) if ok]
        if ids and waiting >= settings.RECALL_BUMP_MAX_TASKS:
            client.delete(*(recall_bump_key(tenant_id, memory_id) for memory_id in ids))
            metrics.RECALL_BUMPS_DROPPED.inc()
            return []
    except (redis.RedisError, OSError):
        return memory_ids  # fail open: the conditional UPDATE still enforces the cooldown
    return ids


def memory_bump_recall_counts(*, tenant_id: uuid.UUID, memory_ids: list[str]) -> int:
    """recall_count + 1 and last_recalled_at = now, for memories not bumped within the cooldown; bad ids ignored."""
    ids = []
    for value in memory_ids:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    if not ids:
        return 0
    now = timezone.now()
    cooled = now - timedelta(seconds=settings.RECALL_BUMP_COOLDOWN_SECONDS)
    return (
        Memory.objects.for_tenant(tenant_id)
        .filter(id__in=ids)
        .filter(Q(last_recalled_at__isnull=True) | Q(last_recalled_at__lt=cooled))
        .update(recall_count=F("recall_count") + 1, last_recalled_at=now)
    )
