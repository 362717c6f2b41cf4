"""The one writer of long-term memory rows: a remember (alone or in a batch), a correction, each import line and each
promoted fact becomes a row through `SubjectWriter.insert`; no other code of the service inserts into `memories`.

A write has two steps, because the secret policy runs before anything is locked, stored, embedded or sent to a
provider, and an import screens every line before it writes the first:

1. `screen(tenant_id, draft, report=...)`: the tenant's secret policy over what the row says (text, tags,
   metadata): SecretDetected, or the draft redacted into `report`. Promotion is stricter and drops a candidate
   holding a secret whatever the policy (memory.promotion.persist), before it is embedded.
2. Inside the caller's transaction, `SubjectWriter(scope)` takes the subject's quota lock and counts its live rows in
   one round trip; `has_room(rows)` is the quota check; `insert(draft)` writes the row and queues it for embedding
   after commit, unless it arrives with its vector.
"""

from __future__ import annotations

import hashlib
import uuid
import zlib
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.utils import timezone

from loopmem.embedding import embedders, work_queue
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.secret_guard.policy import SecretReport, apply_secret_policy
from loopmem.tenancy.scope import Scope
from memory.embedding import EMBED_PENDING_MEMORIES_TASK
from memory.event_time import event_spans
from memory.models import Memory

# The advisory lock class of the per-subject quota; the second key is the (tenant, subject) hash.
_QUOTA_LOCK_CLASS = zlib.crc32(b"loopmem_memory_long_term_quota") - 2**31


@dataclass(frozen=True)
class MemoryDraft:
    """One long-term row to write in the writer's subject."""

    text: str
    confidence: float = 1.0
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = Memory.Source.EXPLICIT
    source_session_id: str | None = None
    project_id: uuid.UUID | None = None  # None: the subject's global bucket
    import_key: str | None = None  # the import's chain key (memory.importing); None for any other write
    vector: QueryEmbedding | None = None  # the vector of `text`, when the caller embedded it already (promotion)
    said_on: date | None = None  # the day `text` was said, which its relative dates count from; None: today (UTC)


@dataclass(frozen=True)
class MemoryCorrection:
    """What a correction brings; None keeps the corrected row's field."""

    text: str | None = None
    confidence: float | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None

    def applied_to(self, old: Memory) -> MemoryDraft:
        """The new version: `old`'s fields with these replacing them (project and source kept)."""
        return MemoryDraft(
            text=old.text if self.text is None else self.text,
            confidence=old.confidence if self.confidence is None else self.confidence,
            tags=list(old.tags) if self.tags is None else self.tags,
            metadata=dict(old.metadata) if self.metadata is None else self.metadata,
            source=old.source,
            source_session_id=old.source_session_id,
            project_id=old.project_id,
            # Kept words keep the day they were said: "last Friday" still means the Friday before the old version.
            said_on=old.inserted_at.date() if self.text is None else None,
        )


Screened = TypeVar("Screened", MemoryDraft, MemoryCorrection)


def screen(tenant_id: uuid.UUID, draft: Screened, *, report: SecretReport | None = None) -> Screened:
    """`draft` as the tenant's secret policy lets it be stored: SecretDetected, or redacted into `report`.

    A correction's fields left None are not scanned: they are the stored row's, screened when it was written.
    """
    clean = apply_secret_policy(
        tenant_id, {"text": draft.text, "tags": draft.tags, "metadata": draft.metadata}, report=report
    )
    return replace(draft, text=clean["text"], tags=clean["tags"], metadata=clean["metadata"])


class DuplicatePromotedContent(Exception):
    """The promoted-content unique index already holds a live promoted row of this text for the subject."""


class SubjectWriter:
    """One subject's long-term rows written in the caller's transaction, under the subject's quota lock.

    Made inside `transaction.atomic()`: the advisory lock lasts until the transaction ends, so writers of one
    (tenant, subject) take turns, and the live count taken with the lock stays exact while it is held.
    """

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.live = lock_subject_quota_and_count_live(scope)

    def has_room(self, rows: int = 1) -> bool:
        """Whether `rows` more live rows (fewer when negative) keep the subject within MEMORY_QUOTA.

        A correction asks nothing: it replaces one live row with another.
        """
        return self.live + rows <= settings.MEMORY_QUOTA

    def charge(self, rows: int) -> None:
        """Charge `rows` more live rows written under this lock (an import's chains, each checked by `has_room`)."""
        self.live += rows

    def insert(self, draft: MemoryDraft) -> Memory:
        """Write `draft` as a row of the subject; without a vector it is queued for embedding after commit.

        Callers have screened the draft and, unless it replaces a live row, asked `has_room` first.
        Raises DuplicatePromotedContent when the draft brings its vector and the promoted-content index refuses it.
        """
        fields: dict[str, Any] = {
            "tenant_id": self.scope.tenant_id,
            "subject_id": self.scope.subject_id,
            "project_id": draft.project_id,
            "text": draft.text,
            "confidence": draft.confidence,
            "tags": draft.tags,
            "metadata": draft.metadata,
            "source": draft.source,
            "source_session_id": draft.source_session_id,
            "import_key": draft.import_key,
            "occurred_on": event_spans(draft.text, draft.said_on or timezone.now().date()) or None,
        }
        if draft.vector is None:
            memory = Memory.objects.create(**fields)
            work_queue.queue_for_embedding_after_commit(
                Memory._meta.db_table, EMBED_PENDING_MEMORIES_TASK, self.scope.tenant_id, memory.id
            )
            return memory
        memory = Memory(
            **fields,
            embedding=draft.vector.vector,
            embedding_model=draft.vector.model_id,
            embedding_content_hash=embedders.content_hash(draft.text),
        )
        # Only a row that comes with its content hash can meet the promoted-content unique index (any other gets its
        # hash from the pipeline, later). A live twin embedded since the caller looked (that takes no quota lock) is
        # refused by the index, which has the last word; skipped, the conflict leaves the caller's transaction usable.
        Memory.objects.bulk_create([memory], ignore_conflicts=True)
        if not Memory.objects.filter(id=memory.id).exists():
            raise DuplicatePromotedContent()
        return memory


def lock_subject_quota_and_count_live(scope: Scope) -> int:
    """Serialise the quota check of one (tenant, subject) until the transaction ends, and count the subject's live
    rows, in one round trip.

    The count runs inside `loopmem_lock_and_count_live` (migration memory 0014) after the lock is granted, on a
    snapshot taken then, so it sees every row a writer committed before giving the lock up.
    """
    arguments: list[int | str] = [*_quota_lock_key(scope), str(scope.tenant_id), scope.subject_id]
    with connection.cursor() as cursor:
        cursor.execute("SELECT loopmem_lock_and_count_live(%s, %s, %s::uuid, %s)", arguments)
        row = cursor.fetchone()
    return int(row[0])


def _quota_lock_key(scope: Scope) -> tuple[int, int]:
    digest = hashlib.sha256(f"{scope.tenant_id}:{scope.subject_id}".encode()).digest()
    return _QUOTA_LOCK_CLASS, int.from_bytes(digest[:4], "big", signed=True)
