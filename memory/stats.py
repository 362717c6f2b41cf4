"""Operator figures per tenant (DESIGN §9, `memory_stats`): rows per subject, live vs superseded, the embedding
backlog, quota headroom, session turns, promotion and graduation. Every query is scoped to one tenant."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from loopmem.models import Tenant
from memory.models import Memory, PromotionJob, SessionTurn
from memory.promotion.jobs import compiles_this_hour


class SubjectStats(TypedDict):
    subject_id: str
    live: int
    superseded: int
    waiting_for_embedding: int
    quota_headroom: int


class TenantStats(TypedDict):
    tenant_id: str
    slug: str
    memories: dict[str, int]
    subjects: dict[str, Any]
    session_turns: dict[str, int]
    promotion: dict[str, Any]
    graduation: dict[str, int]


def tenant_memory_stats(*, tenant: Tenant, top_subjects: int = 20) -> TenantStats:
    """The tenant's figures; `top_subjects` subjects with the most live rows are listed one by one."""
    quota = settings.MEMORY_QUOTA
    per_subject = list(
        Memory.objects.filter(tenant_id=tenant.id)
        .values("subject_id")
        .annotate(
            live=Count("id", filter=Q(superseded_by__isnull=True)),
            superseded=Count("id", filter=Q(superseded_by__isnull=False)),
            waiting=Count("id", filter=Q(embedding__isnull=True)),
        )
        .order_by("-live", "subject_id")
    )
    listed: list[SubjectStats] = [
        {
            "subject_id": row["subject_id"],
            "live": row["live"],
            "superseded": row["superseded"],
            "waiting_for_embedding": row["waiting"],
            "quota_headroom": max(quota - row["live"], 0),
        }
        for row in per_subject[:top_subjects]
    ]
    now = timezone.now()
    turns = SessionTurn.objects.filter(tenant_id=tenant.id).aggregate(
        live=Count("id", filter=Q(expires_at__gt=now)), expired=Count("id", filter=Q(expires_at__lte=now))
    )
    jobs = dict(
        PromotionJob.objects.filter(tenant_id=tenant.id).order_by().values_list("state").annotate(n=Count("id"))
    )
    compiled = compiles_this_hour(tenant.id)
    graduation = Memory.objects.filter(tenant_id=tenant.id).aggregate(
        graduated=Count("id", filter=Q(graduated_at__isnull=False)),
        hot_waiting=Count(
            "id",
            filter=Q(
                graduated_at__isnull=True,
                superseded_by__isnull=True,
                recall_count__gte=settings.GRADUATION_RECALL_THRESHOLD,
            ),
        ),
    )
    return {
        "tenant_id": str(tenant.id),
        "slug": tenant.slug,
        "memories": {
            "live": sum(row["live"] for row in per_subject),
            "superseded": sum(row["superseded"] for row in per_subject),
            "waiting_for_embedding": sum(row["waiting"] for row in per_subject),
        },
        "subjects": {
            "count": len(per_subject),
            "quota_per_subject": quota,
            "at_quota": sum(1 for row in per_subject if row["live"] >= quota),
            "least_headroom": min((max(quota - row["live"], 0) for row in per_subject), default=quota),
            "top": listed,
        },
        "session_turns": {"live": turns["live"], "expired_not_pruned": turns["expired"]},
        "promotion": {
            "jobs": {state: jobs.get(state, 0) for state in PromotionJob.State.values},
            "compiles_last_hour": compiled,
            "budget_per_hour": settings.PROMOTION_BUDGET_PER_HOUR,
            "budget_headroom": max(settings.PROMOTION_BUDGET_PER_HOUR - compiled, 0),
        },
        "graduation": {
            "graduated": graduation["graduated"],
            "waiting": graduation["hot_waiting"],
            "recall_threshold": settings.GRADUATION_RECALL_THRESHOLD,
        },
    }


def memory_stats(*, tenant_ids: list[uuid.UUID] | None = None, top_subjects: int = 20) -> list[TenantStats]:
    """Figures for the given tenants (every tenant when None), in slug order."""
    tenants = Tenant.objects.order_by("slug")
    if tenant_ids is not None:
        tenants = tenants.filter(id__in=tenant_ids)
    return [tenant_memory_stats(tenant=tenant, top_subjects=top_subjects) for tenant in tenants]
