"""Long-term memory use cases: remember, correct, supersede, forget. Every new row is written by memory.writer."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from loopmem.errors import (
    AlreadySuperseded,
    InvalidProjectId,
    NotFound,
    QuotaExceeded,
    SelfSupersede,
    SupersedeCycle,
)
from loopmem.models import DeletionAudit
from loopmem.params import path_id
from loopmem.secret_guard.policy import SecretReport
from loopmem.tenancy.audit import Actor, Removed, audit_record
from loopmem.tenancy.scope import Scope
from memory.models import Memory, MemoryQuerySet
from memory.writer import MemoryCorrection, MemoryDraft, SubjectWriter, screen
from projects.selectors import project_in_tenant


def memory_remember(
    *,
    scope: Scope,
    text: str,
    confidence: float = 1.0,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    source_session_id: str | None = None,
    source: str = Memory.Source.EXPLICIT,
    report: SecretReport | None = None,
) -> Memory:
    """Store a long-term memory under the subject's quota; it is embedded asynchronously after commit.

    The tenant's secret policy runs first (SecretDetected, or redacted into `report`): nothing refused is
    stored or embedded. The quota counts live rows and is exact under concurrency: writers of one (tenant,
    subject) serialise on a transaction-scoped advisory lock before counting.
    """
    draft = MemoryDraft(
        text=text,
        confidence=confidence,
        tags=tags or [],
        metadata=metadata or {},
        source=source,
        source_session_id=source_session_id,
        project_id=scope.project_id,
    )
    draft = screen(scope.tenant_id, draft, report=report)
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    with transaction.atomic():
        writer = SubjectWriter(scope)
        if not writer.has_room():
            raise QuotaExceeded(details={"quota": settings.MEMORY_QUOTA})
        return writer.insert(draft)


def memory_forget(*, scope: Scope, memory_id: str, actor: Actor | None = None) -> uuid.UUID:
    """Delete one of the subject's memories; what it superseded becomes live again (FK ON DELETE SET NULL).

    The deletion and its audit row (`actor`: who and why) commit together.
    """
    return _delete(Memory.objects.for_scope(scope), memory_id, actor or Actor.system("memory_forget"))


def memory_forget_any(*, tenant_id: uuid.UUID, memory_id: str, actor: Actor | None = None) -> uuid.UUID:
    """Superadmin oversight: delete any memory of the tenant (audited like every forget)."""
    return _delete(Memory.objects.for_tenant(tenant_id), memory_id, actor or Actor.system("memory_forget_any"))


def _delete(memories: MemoryQuerySet, memory_id: str, actor: Actor) -> uuid.UUID:
    parsed = path_id(memory_id)
    with transaction.atomic():
        row = memories.filter(id=parsed).select_for_update().values("tenant_id", "subject_id", "text").first()
        if row is None:
            raise NotFound()
        _keep_promoted_content_unique(memories, parsed)
        memories.filter(id=parsed).delete()  # the scoped queryset: its DELETE pins the tenant (Citus routing)
        audit_record(
            tenant_id=row["tenant_id"],
            actor=actor,
            action=DeletionAudit.Action.DELETE,
            rows=[Removed(Memory._meta.db_table, parsed, row["subject_id"], row["text"])],
        )
    return parsed


def _keep_promoted_content_unique(memories: MemoryQuerySet, deleted_id: uuid.UUID) -> None:
    """Before a delete revives what the row superseded: a promoted predecessor whose content is already live
    in another promoted row (v1 -> v2 -> v3 with v1 and v3 the same text) would break the one-live-row-per-
    content rule. It stays superseded, by that live twin, so nothing is lost and the chain still reads.
    """
    revived = memories.filter(
        superseded_by_id=deleted_id, source=Memory.Source.PROMOTED, embedding_content_hash__isnull=False
    ).select_for_update()
    for row in revived:
        twin = (
            memories.live()
            .filter(
                subject_id=row.subject_id,
                source=Memory.Source.PROMOTED,
                embedding_content_hash=row.embedding_content_hash,
            )
            .exclude(id=deleted_id)
            .values_list("id", flat=True)
            .first()
        )
        if twin is not None:
            row.superseded_by_id = twin
            row.save(update_fields=["superseded_by", "updated_at"])


def memory_supersede(*, scope: Scope, old_id: str, new_id: str, actor: Actor | None = None) -> Memory:
    """Mark `old` as superseded by `new` (reference §4.14); repeating the same call is a no-op.

    A correction hides the old row from default reads: it is audited (`actor`: who and why) in the same
    transaction, once, when it happens.
    """
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
        audit_record(
            tenant_id=scope.tenant_id,
            actor=actor or Actor.system("memory_supersede"),
            action=DeletionAudit.Action.SUPERSEDE,
            rows=[Removed(Memory._meta.db_table, old.id, old.subject_id, old.text)],
        )
    return old


def memory_correct(
    *,
    scope: Scope,
    memory_id: str,
    text: str | None = None,
    confidence: float | None = None,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    report: SecretReport | None = None,
    actor: Actor | None = None,
) -> Memory:
    """Write a corrected version of one of the subject's live memories and link the chain; the old row is kept.

    The fields the correction brings pass the tenant's secret policy first, like any write.

    The new row carries the old row's fields with the given ones replacing them (project and source kept) and
    is embedded like any write. One transaction, under the subject's lock, with the old row locked FOR UPDATE
    and linked by a conditional UPDATE: of two concurrent corrections exactly one wins, the other sees the
    link and gets `already_superseded`. The quota is not charged: one live row replaces another.
    """
    parsed = path_id(memory_id)
    correction = MemoryCorrection(text=text, confidence=confidence, tags=tags, metadata=metadata)
    correction = screen(scope.tenant_id, correction, report=report)
    with transaction.atomic():
        writer = SubjectWriter(scope)
        old = Memory.objects.for_scope(scope).defer("embedding").select_for_update().filter(id=parsed).first()
        if old is None:
            raise NotFound()
        if old.superseded_by_id is not None:
            raise AlreadySuperseded(details={"superseded_by": str(old.superseded_by_id)})
        new = writer.insert(correction.applied_to(old))
        linked = Memory.objects.filter(id=old.id, superseded_by__isnull=True).update(
            superseded_by=new.id, updated_at=timezone.now()
        )
        if linked != 1:  # unreachable while the lock is held; the database still has the last word
            current = Memory.objects.filter(id=old.id).values_list("superseded_by_id", flat=True).first()
            raise AlreadySuperseded(details={"superseded_by": str(current)})
        # The superseded version leaves default reads: on record like any supersede (never its text).
        audit_record(
            tenant_id=scope.tenant_id,
            actor=actor or Actor.system("memory_correct"),
            action=DeletionAudit.Action.SUPERSEDE,
            rows=[Removed(Memory._meta.db_table, old.id, old.subject_id, old.text)],
        )
    return new
