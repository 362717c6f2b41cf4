"""The access ledger (reference §1.6) and the daily retrieval metrics computed from it (reference §4.17).

Ledger writes are synchronous and best-effort: a failure is logged and reported to the caller as False,
never raised, so a search or a read is never failed by its own bookkeeping. Their commits do not wait for the disk
(`loopmem.database.async_commit`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Exists, OuterRef
from django.utils import timezone

from knowledge.models import Article, ArticleAccessEvent, RetrievalMetricsSnapshot
from loopmem.database import async_commit
from loopmem.params import clamp
from loopmem.secret_guard.scan import redact, scan
from projects.selectors import project_in_tenant

logger = logging.getLogger(__name__)

MAX_SURFACING_ROWS = 20
# What counts as following a surfaced article through (the newer reference adds drill). Never `referenced`:
# that is a client's assertion about itself, and precision must not rank on it.
FOLLOW_THROUGH_TYPES = (
    ArticleAccessEvent.AccessType.GET,
    ArticleAccessEvent.AccessType.CONTEXT,
    ArticleAccessEvent.AccessType.DRILL,
)


def access_record_surfacing(
    *,
    tenant_id: uuid.UUID,
    api_key_id: uuid.UUID,
    search_id: uuid.UUID,
    query: str,
    articles: Sequence[Article],
    first_rank: int = 1,
    results_returned: int | None = None,
    project_id: uuid.UUID | None = None,
    extra_metadata: dict[str, Any] | None = None,
) -> bool:
    """Write `search` rows for the published articles among the first 20 of `articles` (ranked results).

    `rank` is 1-based (`first_rank` for the first article: a page's offset + 1). Rows carry the search id in
    `metadata.search_id` and `origin_search_id`, and the query with any secret redacted in `metadata.query`.
    Returns False (and logs) when the write failed.
    """
    if project_id is not None and project_in_tenant(tenant_id=tenant_id, project_id=project_id) is None:
        project_id = None  # attribution only: a read's unknown or foreign project is never written as ours
    returned = len(articles) if results_returned is None else results_returned
    # Queries are not refused (a read stores nothing the caller meant to keep), but the ledger's copy is: it
    # is kept for days (LOOPMEM_QUERY_TEXT_RETENTION_DAYS), so a secret pasted into a search is redacted.
    query = redact(query, scan(query))
    rows = [
        ArticleAccessEvent(
            tenant_id=tenant_id,
            article_id=article.id,
            api_key_id=api_key_id,
            access_type=ArticleAccessEvent.AccessType.SEARCH,
            project_id=project_id,
            origin_search_id=search_id,
            metadata={
                **(extra_metadata or {}),
                "search_id": str(search_id),
                "query": query,
                "rank": first_rank + position,
                "results_returned": returned,
            },
        )
        for position, article in enumerate(articles[:MAX_SURFACING_ROWS])
        if article.status == Article.Status.PUBLISHED
    ]
    return _write(rows, what=f"surfacing rows of search {search_id}")


def access_record_get(
    *, tenant_id: uuid.UUID, api_key_id: uuid.UUID, article_id: uuid.UUID, project_id: uuid.UUID | None = None
) -> bool:
    """Write one `get` row: the full article was read. Returns False (and logs) when the write failed."""
    row = ArticleAccessEvent(
        tenant_id=tenant_id,
        article_id=article_id,
        api_key_id=api_key_id,
        access_type=ArticleAccessEvent.AccessType.GET,
        project_id=project_id,
    )
    return _write([row], what=f"get row of article {article_id}")


def access_record_referenced(
    *,
    tenant_id: uuid.UUID,
    api_key_id: uuid.UUID,
    recall_id: uuid.UUID,
    article_ids: Sequence[uuid.UUID],
    project_id: uuid.UUID | None = None,
) -> bool:
    """Write one `referenced` row per distinct article: the client says it used what recall `recall_id` surfaced.

    Admission (only surfaced ids) is the caller's check. Returns False (and logs) when the write failed.
    """
    rows = [
        ArticleAccessEvent(
            tenant_id=tenant_id,
            article_id=article_id,
            api_key_id=api_key_id,
            access_type=ArticleAccessEvent.AccessType.REFERENCED,
            project_id=project_id,
            origin_search_id=recall_id,
            origin_attribution=None,
            metadata={"recall_id": str(recall_id)},
        )
        for article_id in dict.fromkeys(article_ids)
    ]
    return _write(rows, what=f"referenced rows of recall {recall_id}")


def surfaced_article_ids(*, tenant_id: uuid.UUID, search_id: uuid.UUID) -> set[str]:
    """The ids (canonical strings) of the articles search or recall `search_id` surfaced in the tenant.

    Database errors propagate: "could not check" must never read as "not surfaced".
    """
    rows = ArticleAccessEvent.objects.filter(
        tenant_id=tenant_id, access_type=ArticleAccessEvent.AccessType.SEARCH, origin_search_id=search_id
    )
    return {str(article_id) for article_id in rows.values_list("article_id", flat=True).distinct()}


def _write(rows: list[ArticleAccessEvent], *, what: str) -> bool:
    if not rows:
        return True
    try:
        # A savepoint: a failed ledger write must not poison a transaction the caller may hold.
        with async_commit.bookkeeping_atomic():
            ArticleAccessEvent.objects.bulk_create(rows)
    except DatabaseError:
        logger.warning("access ledger write failed (%s); the read goes on", what, exc_info=True)
        return False
    return True


# --- Retrieval metrics -------------------------------------------------------------------------------------


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def retrieval_metrics_compute(
    *, tenant_id: uuid.UUID, day: date, window_seconds: int | None = None
) -> RetrievalMetricsSnapshot:
    """Compute one tenant's funnel for one UTC day and upsert it on (tenant, day, window_seconds).

    searched: `search` rows that day; followed_through: those followed by a get/context/drill of the same
    article by the same key within the window; referenced: distinct (search id, article) `referenced` pairs.
    `referenced` rows are in no read set: not in followed_through, total_events or unique_keys.
    """
    window = settings.KNOWLEDGE_METRICS_WINDOW_SECONDS if window_seconds is None else window_seconds
    start, end = _day_bounds(day)
    events = ArticleAccessEvent.objects.filter(tenant_id=tenant_id, accessed_at__gte=start, accessed_at__lt=end)
    reads = events.exclude(access_type=ArticleAccessEvent.AccessType.REFERENCED)
    searches = events.filter(access_type=ArticleAccessEvent.AccessType.SEARCH)
    follow_up = ArticleAccessEvent.objects.filter(
        tenant_id=tenant_id,
        api_key_id=OuterRef("api_key_id"),
        article_id=OuterRef("article_id"),
        access_type__in=FOLLOW_THROUGH_TYPES,
        accessed_at__gte=OuterRef("accessed_at"),
        accessed_at__lte=OuterRef("accessed_at") + timedelta(seconds=window),
    )
    searched = searches.count()
    followed = searches.filter(Exists(follow_up)).count()
    referenced = (
        events.filter(access_type=ArticleAccessEvent.AccessType.REFERENCED)
        .values("origin_search_id", "article_id")
        .distinct()
        .count()
    )
    snapshot = RetrievalMetricsSnapshot(
        tenant_id=tenant_id,
        day=day,
        window_seconds=window,
        searched=searched,
        followed_through=followed,
        precision=followed / searched if searched else 0.0,
        referenced=referenced,
        reference_rate=referenced / searched if searched else 0.0,
        total_events=reads.count(),
        unique_keys=reads.values("api_key_id").distinct().count(),
        computed_at=timezone.now(),
    )
    RetrievalMetricsSnapshot.objects.bulk_create(
        [snapshot],
        update_conflicts=True,
        unique_fields=["tenant", "day", "window_seconds"],
        update_fields=[
            "searched",
            "followed_through",
            "precision",
            "referenced",
            "reference_rate",
            "total_events",
            "unique_keys",
            "computed_at",
            "updated_at",
        ],
    )
    return RetrievalMetricsSnapshot.objects.get(tenant_id=tenant_id, day=day, window_seconds=window)


def retrieval_metrics_run(*, day: date | None = None) -> int:
    """Snapshot every tenant with ledger rows on `day` (default: yesterday, UTC). Returns how many."""
    day = day or (timezone.now().astimezone(UTC).date() - timedelta(days=1))
    start, end = _day_bounds(day)
    tenant_ids = (
        ArticleAccessEvent.objects.filter(accessed_at__gte=start, accessed_at__lt=end)
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    count = 0
    for tenant_id in list(tenant_ids):
        retrieval_metrics_compute(tenant_id=tenant_id, day=day)
        count += 1
    return count


SNAPSHOT_LIST_LIMIT = 30
SNAPSHOT_LIST_MAX = 365


@dataclass(frozen=True)
class SnapshotPage:
    rows: list[RetrievalMetricsSnapshot]
    total_count: int
    limit: int
    offset: int


def retrieval_metrics_list(
    *, tenant_id: uuid.UUID | None = None, limit: int = SNAPSHOT_LIST_LIMIT, offset: int = 0
) -> SnapshotPage:
    """Stored snapshots, newest day first (then tenant, window): one tenant's, or every tenant's.

    `limit` is clamped to [1, 365] and `offset` to ≥ 0, as the reference's `list_snapshots`.
    """
    limit, offset = clamp(limit, 1, SNAPSHOT_LIST_MAX), max(offset, 0)
    rows = RetrievalMetricsSnapshot.objects.all()
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    ordered = rows.order_by("-day", "tenant_id", "window_seconds")
    return SnapshotPage(
        rows=list(ordered[offset : offset + limit]), total_count=rows.count(), limit=limit, offset=offset
    )
