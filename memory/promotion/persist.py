"""Persist: survivors become `promoted` memories (exact dedupe, synchronous embedding, near-duplicate supersede
of promoted rows only, quota), written by the one writer of long-term rows (memory.writer)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import transaction

from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.errors import HeavyReadOverloaded
from loopmem.models import Tenant
from loopmem.secret_guard.policy import holds_secret
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.promotion.compilers import EVAL_SUBJECT_ID, Candidate
from memory.selectors import recall_by_vector
from memory.services import memory_supersede
from memory.writer import DuplicatePromotedContent, MemoryDraft, SubjectWriter

NEAR_DUP_POOL = 10
_NEAR_DUP_SUPERSEDE = Actor.system("promotion near-duplicate supersede")


@dataclass
class PersistSummary:
    promoted: int = 0
    superseded: int = 0
    deduped: int = 0
    # Candidates holding a secret: dropped whatever the tenant's policy, before anything is embedded.
    secret_dropped: int = 0
    memory_ids: list[str] = field(default_factory=list)


class EmbeddingsDegraded(Exception):
    """Persisting needs embeddings (dedupe by meaning) that cannot be had right now: try the run later.

    `summary` is what was written before it stopped (a later run deduplicates those rows)."""

    def __init__(self, reason: str, summary: PersistSummary) -> None:
        super().__init__(reason)
        self.summary = summary


class PromotionQuotaExceeded(Exception):
    def __init__(self, summary: PersistSummary) -> None:
        super().__init__("quota_exceeded")
        self.summary = summary


def promotion_persist(
    *,
    scope: Scope,
    session_id: str,
    candidates: list[Candidate],
    on_written: Callable[[uuid.UUID], None] = lambda _: None,
) -> PersistSummary:
    """Write survivors as `promoted` memories (reference §4.12 persist_promotion); the eval subject writes nothing.

    `on_written` is called with each new memory's id inside the transaction that writes it."""
    summary = PersistSummary()
    if scope.subject_id == EVAL_SUBJECT_ID:
        return summary
    tenant = Tenant.objects.get(id=scope.tenant_id)
    for candidate in candidates:
        # Stricter than the tenant's policy (memory.writer.screen), whatever it is, and each field the LLM wrote is
        # scanned as the plain text it is: a quoted value inside the metadata's JSON can escape a scan of that JSON.
        if holds_secret(candidate.text, candidate.when_to_apply, *candidate.tags):
            summary.secret_dropped += 1
            continue
        content_hash = embedders.content_hash(candidate.text)
        if _promoted_exists(scope, content_hash):
            summary.deduped += 1
            continue
        try:
            # Synchronous: no async gap in which a paraphrase could slip past the near-duplicate check.
            [vector], model_id = embedders.embed_texts(tenant, [candidate.text])
        except embedders.EmbeddingFailure as failure:
            raise EmbeddingsDegraded(failure.tag, summary) from failure
        truncated = len(candidate.text) > embedders.EMBEDDING_MAX_CHARS
        try:
            near = None if truncated else _near_duplicate(scope, vector, model_id)
        except HeavyReadOverloaded as exc:
            raise EmbeddingsDegraded("heavy_read_overloaded", summary) from exc
        draft = replace(_draft(session_id, candidate), vector=QueryEmbedding(vector=vector, model_id=model_id))
        _insert_promoted(scope, draft, content_hash, near, summary, on_written)
    return summary


def _promoted_exists(scope: Scope, content_hash: str) -> bool:
    return (
        Memory.objects.for_scope(scope)
        .filter(source=Memory.Source.PROMOTED, embedding_content_hash=content_hash)
        .exists()
    )


def _near_duplicate(scope: Scope, vector: list[float], model_id: str) -> Memory | None:
    """The nearest live promoted memory at ≥ the near-dup threshold; an explicit memory is never a target."""
    global_scope = Scope(tenant_id=scope.tenant_id, subject_id=scope.subject_id)
    result = recall_by_vector(scope=global_scope, vector=vector, model_id=model_id, k=NEAR_DUP_POOL)
    for hit in result.hits:
        memory = hit.memory
        if (
            hit.score is not None
            and hit.score >= settings.PROMOTION_NEAR_DUP_THRESHOLD
            and memory.source == Memory.Source.PROMOTED
            and len(memory.text) <= embedders.EMBEDDING_MAX_CHARS
        ):
            return memory
    return None


def _draft(session_id: str, candidate: Candidate) -> MemoryDraft:
    """The candidate as a promoted row of the subject's global bucket."""
    metadata: dict[str, object] = {"when_to_apply": candidate.when_to_apply, "cross_links": list(candidate.cross_links)}
    if candidate.speaker_role:
        metadata["speaker_role"] = candidate.speaker_role
    return MemoryDraft(
        text=candidate.text,
        confidence=candidate.confidence,
        tags=list(candidate.tags),
        metadata=metadata,
        source=Memory.Source.PROMOTED,
        source_session_id=session_id,
    )


def _insert_promoted(
    scope: Scope,
    draft: MemoryDraft,
    content_hash: str,
    near: Memory | None,
    summary: PersistSummary,
    on_written: Callable[[uuid.UUID], None],
) -> None:
    with transaction.atomic():
        writer = SubjectWriter(scope)
        if _promoted_exists(scope, content_hash):
            summary.deduped += 1
            return
        if not writer.has_room():
            raise PromotionQuotaExceeded(summary)
        try:
            memory = writer.insert(draft)
        except DuplicatePromotedContent:
            summary.deduped += 1
            return
        summary.memory_ids.append(str(memory.id))
        on_written(memory.id)
        if near is not None and Memory.objects.filter(id=near.id, superseded_by__isnull=True).exists():
            memory_supersede(scope=scope, old_id=str(near.id), new_id=str(memory.id), actor=_NEAR_DUP_SUPERSEDE)
            summary.superseded += 1
        else:
            summary.promoted += 1
