"""Long-term memory use cases: remember, forget, supersede, embed."""

from __future__ import annotations

import hashlib
import logging
import uuid
import zlib
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from loopmem import embeddings
from loopmem.embedding_pipeline import EmbeddedTable, embed_row
from loopmem.errors import (
    AlreadySuperseded,
    InvalidProjectId,
    NotFound,
    QuotaExceeded,
    SelfSupersede,
    SupersedeCycle,
)
from loopmem.heavy_read import redis_client
from loopmem.params import path_id
from loopmem.queue import enqueue_on_commit, send
from loopmem.scope import Scope
from memory.models import Memory, SessionTurn
from projects.selectors import project_in_tenant

logger = logging.getLogger(__name__)

# The advisory lock class of the per-subject quota; the second key is the (tenant, subject) hash.
EMBED_MEMORY_TASK = "memory.tasks.embed_memory_task"
BUMP_RECALL_COUNTS_TASK = "memory.tasks.bump_recall_counts_task"
_QUOTA_LOCK_CLASS = zlib.crc32(b"loopmem_memory_long_term_quota") - 2**31


def memory_remember(
    *,
    scope: Scope,
    text: str,
    confidence: float = 1.0,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    source_session_id: str | None = None,
    source: str = Memory.Source.EXPLICIT,
) -> Memory:
    """Store a long-term memory under the subject's quota; it is embedded asynchronously after commit.

    The quota counts live rows and is exact under concurrency: writers of one (tenant, subject) serialise on
    a transaction-scoped advisory lock before counting.
    """
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    with transaction.atomic():
        lock_subject_quota(scope)
        if Memory.objects.for_scope(scope).live().count() >= settings.MEMORY_QUOTA:
            raise QuotaExceeded(details={"quota": settings.MEMORY_QUOTA})
        memory = Memory.objects.create(
            tenant_id=scope.tenant_id,
            subject_id=scope.subject_id,
            project_id=scope.project_id,
            text=text,
            confidence=confidence,
            tags=tags or [],
            metadata=metadata or {},
            source=source,
            source_session_id=source_session_id,
        )
        enqueue_on_commit(EMBED_MEMORY_TASK, str(memory.id))
    return memory


def lock_subject_quota(scope: Scope) -> None:
    """Serialise the quota check of one (tenant, subject) until the transaction ends."""
    digest = hashlib.sha256(f"{scope.tenant_id}:{scope.subject_id}".encode()).digest()
    subject_key = int.from_bytes(digest[:4], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_QUOTA_LOCK_CLASS, subject_key])


def memory_forget(*, scope: Scope, memory_id: str) -> uuid.UUID:
    """Delete one of the subject's memories; what it superseded becomes live again (FK ON DELETE SET NULL)."""
    return _delete(Memory.objects.for_scope(scope), memory_id)


def memory_forget_any(*, tenant_id: uuid.UUID, memory_id: str) -> uuid.UUID:
    """Superadmin oversight: delete any memory of the tenant."""
    return _delete(Memory.objects.for_tenant(tenant_id), memory_id)


def _delete(memories: Any, memory_id: str) -> uuid.UUID:
    parsed = path_id(memory_id)
    deleted, _ = memories.filter(id=parsed).delete()
    if not deleted:
        raise NotFound()
    return parsed


def memory_supersede(*, scope: Scope, old_id: str, new_id: str) -> Memory:
    """Mark `old` as superseded by `new` (reference §4.14); repeating the same call is a no-op."""
    old_uuid, new_uuid = path_id(old_id), path_id(new_id)
    if old_uuid == new_uuid:
        raise SelfSupersede()
    with transaction.atomic():
        # Lock both rows in id order so two opposite supersedes cannot deadlock.
        rows = {
            m.id: m
            for m in Memory.objects.for_scope(scope)
            .filter(id__in=[old_uuid, new_uuid])
            .order_by("id")
            .select_for_update()
        }
        old, new = rows.get(old_uuid), rows.get(new_uuid)
        if old is None or new is None:
            raise NotFound()
        if new.superseded_by_id is not None:
            raise SupersedeCycle()
        if old.superseded_by_id is not None:
            if old.superseded_by_id == new.id:
                return old
            raise AlreadySuperseded()
        old.superseded_by = new
        old.save(update_fields=["superseded_by", "updated_at"])
    return old


# --- Embedding ---------------------------------------------------------------------------------------------


def _store_vector(memory: Memory, vector: list[float], model_id: str) -> int:
    # A memory's text never changes (a correction is a new row), so the vector is stored unconditionally.
    return Memory.objects.filter(id=memory.id).update(
        embedding=vector,
        embedding_model=model_id,
        embedding_content_hash=embeddings.content_hash(memory.text),
        updated_at=timezone.now(),
    )


MEMORY_EMBEDDINGS = EmbeddedTable(model=Memory, text_fields=("text",), text_of=lambda m: m.text, store=_store_vector)


def memory_embed(*, memory_id: str) -> str:
    """Embed one memory ("embedded" | "unchanged" | "missing"); raises embeddings.EmbeddingFailure."""
    return embed_row(MEMORY_EMBEDDINGS, memory_id)


# --- Hotness: the recall bump (reference §4.5) -------------------------------------------------------------


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


def _bump_admitted(tenant_id: uuid.UUID, memory_ids: list[str]) -> list[str]:
    """The ids not bumped within the cooldown, by one pipelined SET NX per id (one round trip)."""
    if not memory_ids:
        return []
    cooldown = settings.RECALL_BUMP_COOLDOWN_SECONDS
    try:
        pipe = redis_client().pipeline()
        for memory_id in memory_ids:
            pipe.set(f"loopmem:recall_bump:{tenant_id}:{memory_id}", 1, nx=True, ex=cooldown)
        admitted = pipe.execute()
    except (redis.RedisError, OSError):
        return memory_ids  # fail open: the conditional UPDATE still enforces the cooldown
    return [memory_id for memory_id, ok in zip(memory_ids, admitted, strict=True) if ok]


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


# --- Session tier: append-only turns, server-governed expiry, batched prune ------------------------------

PRUNE_BATCH_SIZE = 1000


def session_expires_at(requested: datetime | None, now: datetime) -> datetime:
    """Server-governed expiry: missing → now + ttl; earlier than now + sweep window → floored; later → kept.

    The floor guarantees a promotion sweep sees every turn before it expires.
    """
    floor = now + timedelta(seconds=settings.PROMOTION_SWEEP_WINDOW_SECONDS)
    if requested is None:
        return max(now + timedelta(seconds=settings.SESSION_TTL_SECONDS), floor)
    return max(requested, floor)


def session_append(
    *,
    scope: Scope,
    session_id: str,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
) -> SessionTurn:
    """Append one turn to the subject's session. Turns are never updated."""
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    return SessionTurn.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        project_id=scope.project_id,
        session_id=session_id,
        role=role,
        content=content,
        metadata=metadata or {},
        expires_at=session_expires_at(expires_at, timezone.now()),
    )


def session_prune(*, now: datetime | None = None, batch_size: int = PRUNE_BATCH_SIZE) -> int:
    """Delete expired turns of every tenant, in batches, until none are left; returns how many went."""
    cutoff = now or timezone.now()
    deleted = 0
    while True:
        # Batches keep each transaction (and its locks and WAL) small on a big backlog.
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM session_memories WHERE id IN "
                "(SELECT id FROM session_memories WHERE expires_at < %s LIMIT %s)",
                [cutoff, batch_size],
            )
            batch: int = cursor.rowcount
        deleted += batch
        if batch < batch_size:
            return deleted
