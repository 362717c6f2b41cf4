"""Graduation (reference §4.11): a memory that keeps being recalled becomes an owner-visible article.

It goes through the knowledge novelty gate like any proposal; low novelty is skipped (never a draft); the memory is
stamped on every durable verdict, so it is not proposed again, and never when the gate could not run.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import Counter
from typing import Literal

from django.conf import settings
from django.db.models import F, QuerySet
from django.utils import timezone

from knowledge.models import MAX_TITLE_LENGTH, Article
from knowledge.services import Proposal, article_propose
from knowledge.tags import sanitize_tags
from knowledge.visibility import viewer_for_scope
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.errors import (
    AlreadyGraduated,
    DuplicateTitle,
    GateUnavailable,
    MemoryQuarantined,
    NotFound,
    SecretDetected,
    ValidationFailed,
)
from loopmem.models import SecretPolicy, Tenant
from loopmem.observability import metrics
from loopmem.params import path_id
from loopmem.secret_guard.policy import apply_secret_policy
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.promotion import guard

logger = logging.getLogger("loopmem.graduation")

ReScope = Literal["inherit", "global"]


def graduation_title(text: str, memory_id: uuid.UUID) -> str:
    """First line of the text (or "Memory"), cut to fit, then " (memory <uuid>)": unique per memory."""
    suffix = f" (memory {memory_id})"
    first_line = text.strip().splitlines()[0].strip() if text.strip() else ""
    return (first_line or "Memory")[: MAX_TITLE_LENGTH - len(suffix)] + suffix


def graduation_key(memory_id: uuid.UUID, project_id: uuid.UUID | None) -> str:
    return f"memory-graduation-{memory_id}-" + (f"project:{project_id}" if project_id else "global")


@metrics.counts_outcome(metrics.GRADUATIONS, lambda proposal: str(getattr(proposal, "verdict", "unknown")))
def memory_graduate(
    *, scope: Scope, memory_id: str, re_scope: ReScope = "inherit", stamp_structural_error: bool = False
) -> Proposal:
    """Propose one of the subject's memories as a knowledge article (owner-visible, published, a finding)."""
    parsed = path_id(memory_id)
    memory = Memory.objects.for_scope(scope).select_related("tenant").defer("embedding").filter(id=parsed).first()
    if memory is None:
        raise NotFound()
    if memory.graduated_at is not None and memory.project_id is not None and re_scope == "global":
        raise AlreadyGraduated()
    project_id = None if re_scope == "global" else memory.project_id
    key = graduation_key(memory.id, project_id)
    viewer = viewer_for_scope(scope)
    if memory.graduated_at is not None:
        # Already graduated: its article answers, with no gate call and no embedding spent.
        existing = Article.objects.visible_to(viewer).filter(owner_subject_id=scope.subject_id, idempotency_key=key)
        article = existing.defer("embedding", "search_vector").first()
        if article is None:
            raise AlreadyGraduated()
        return Proposal(verdict="duplicate", article=article)

    title = graduation_title(memory.text, memory.id)
    try:
        # A memory holding a secret never becomes an article, whatever the tenant's policy (a tenant that
        # allows secrets in its memories may have stored one): refused before the gate embeds anything.
        apply_secret_policy(
            scope.tenant_id, {"text": memory.text, "tags": memory.tags or None}, policy=SecretPolicy.REFUSE
        )
        # Nor does one that reads as an instruction to the memory system or relaxes a control: a subject's memory
        # may hold it (written explicitly), the shared wiki may not (the promotion guard's own text signals).
        rule = guard.text_rule("\n".join([memory.text, *(memory.tags or [])]))
        if rule is not None:
            logger.info("memory_graduation.quarantined %s", {"memory_id": str(memory.id), "rule": rule})
            raise MemoryQuarantined(details={"rule": rule})
        proposal = article_propose(
            viewer=viewer,
            title=title,
            body=memory.text,
            category=Article.Category.FINDING,
            tags=sanitize_tags(memory.tags),
            status=Article.Status.PUBLISHED,
            visibility=Article.Visibility.OWNER,
            owner_subject_id=scope.subject_id,
            project_id=project_id,
            metadata={
                "source": "memory_graduation",
                "graduated_from_memory_id": str(memory.id),
                "graduated_from_subject_id": scope.subject_id,
                "recall_count": memory.recall_count,
                "agent_id": scope.subject_id,
                "visibility": "owner",
                "memory_type": "finding",
            },
            idempotency_key=key,
            on_low_novelty="skip",
            on_gate_unavailable="skip",
            embedding=_stored_embedding(memory),
        )
    except DuplicateTitle as exc:
        # The title embeds the memory id: if we own its holder, a racing graduation of this memory won.
        holder = (
            Article.objects.filter(tenant_id=scope.tenant_id, title=title, owner_subject_id=scope.subject_id)
            .active()
            .first()
        )
        if holder is not None and holder.project_id == project_id:
            _stamp(memory.id)
            return Proposal(verdict="duplicate", article=holder)
        raise AlreadyGraduated() from exc
    except (ValidationFailed, SecretDetected, MemoryQuarantined):
        if stamp_structural_error:
            _stamp(memory.id)
        raise
    _stamp(memory.id)
    return proposal


def _stored_embedding(memory: Memory) -> QueryEmbedding | None:
    """The memory's own vector for the gate, when it is complete (text not truncated) and exists."""
    row = Memory.objects.filter(id=memory.id).values_list("embedding", "embedding_model").first()
    if row is None or row[0] is None or len(memory.text) > embedders.EMBEDDING_MAX_CHARS:
        return None
    if row[1] != embedders.spec_for(memory.tenant).model_id:
        return None  # a stale model's vector would only meet articles of that model: let the gate embed afresh
    return QueryEmbedding(vector=[float(x) for x in row[0]], model_id=row[1])


def _stamp(memory_id: uuid.UUID) -> None:
    Memory.objects.filter(id=memory_id, graduated_at__isnull=True).update(graduated_at=timezone.now())


# --- The sweep ----------------------------------------------------------------------------------------------


def memory_graduation_sweep(*, max_per_run: int | None = None) -> dict[str, int]:
    """Graduate up to `max_per_run` hot memories, fairly: random tenants, ceil(cap / tenants) each, round-robin.

    Never re-scopes. Stamps every durable verdict, structural errors, memories holding a secret and memories the
    guard quarantines (their text never changes, so neither does the answer); never `gate_unavailable`.
    """
    cap = max_per_run if isinstance(max_per_run, int) and max_per_run > 0 else settings.GRADUATION_MAX_PER_RUN
    threshold = settings.GRADUATION_RECALL_THRESHOLD
    hot = Memory.objects.filter(recall_count__gte=threshold, graduated_at__isnull=True, superseded_by__isnull=True)
    tenant_ids = _sampled_tenants(hot, limit=min(settings.GRADUATION_SCAN_LIMIT, cap))
    per_tenant = math.ceil(cap / len(tenant_ids)) if tenant_ids else 0
    queues = [
        list(
            hot.filter(tenant_id=t)
            .order_by(F("recall_count").desc(), "id")
            .values_list("tenant_id", "subject_id", "id")[:per_tenant]
        )
        for t in tenant_ids
    ]
    order = [row for round_ in _round_robin(queues) for row in round_][:cap]
    tally: Counter[str] = Counter()
    for tenant_id, subject_id, memory_id in order:
        scope = Scope(tenant_id=tenant_id, subject_id=subject_id)
        try:
            proposal = memory_graduate(scope=scope, memory_id=str(memory_id), stamp_structural_error=True)
            tally[proposal.verdict] += 1
        except GateUnavailable:
            tally["gate_unavailable"] += 1
        except ValidationFailed:
            tally["structural_error"] += 1
        except SecretDetected:
            tally["secret_detected"] += 1
        except MemoryQuarantined:
            tally["quarantined"] += 1
        except Exception:
            logger.exception("graduation of memory %s failed", memory_id)
            tally["error"] += 1
    durable = ("created", "duplicate", "deduplicated", "skipped_low_novelty", "gated_to_draft")
    summary = {
        "candidates": len(order),
        "processed": sum(tally.values()),
        "graduated": sum(tally[v] for v in durable),
        **{
            k: tally[k]
            for k in (*durable, "gate_unavailable", "structural_error", "secret_detected", "quarantined", "error")
        },
    }
    logger.info("memory_graduation.swept %s", summary)
    return summary


def _sampled_tenants(hot: QuerySet[Memory], *, limit: int) -> list[uuid.UUID]:
    """Up to `limit` random tenants holding hot memories, sampled in SQL (`ORDER BY random() LIMIT`): the sweep
    never loads every tenant id, however many there are."""
    tenants = Tenant.objects.filter(id__in=hot.values("tenant_id")).order_by("?").values_list("id", flat=True)
    return list(tenants[:limit])


def _round_robin(queues: list[list[tuple[uuid.UUID, str, uuid.UUID]]]) -> list[list[tuple[uuid.UUID, str, uuid.UUID]]]:
    depth = max((len(q) for q in queues), default=0)
    return [[q[i] for q in queues if i < len(q)] for i in range(depth)]
