"""Retention: what the service keeps only for a while, pruned by an hourly sweep.

- Access-ledger rows (`article_access_events`) and finished promotion jobs older than
  LOOPMEM_RETENTION_DAYS (default 90) are deleted.
- Idempotency records (`loopmem.http.idempotency`: a write's recorded answer, replayed to a retry) older than
  LOOPMEM_IDEMPOTENCY_RETENTION_SECONDS (default 24 h) are deleted.
- The query text of an access-ledger row is kept LOOPMEM_QUERY_TEXT_RETENTION_DAYS (default 7), then removed
  from the row (`metadata.query`); the row itself stays for the retrieval metrics until the first cutoff.

Tenant by tenant (every query leads with `tenant_id`, as everywhere else) and in batches, so a big backlog never
holds one long transaction. Policy-driven, not a decision about a row: no audit rows, a summary log line.
Promotion jobs still in flight are never pruned, whatever their age.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from knowledge.models import ArticleAccessEvent
from loopmem.models import IdempotencyRecord, Tenant
from memory.models import PromotionJob

logger = logging.getLogger(__name__)

RETENTION_BATCH_SIZE = 1000

_EVENTS = ArticleAccessEvent._meta.db_table
_JOBS = PromotionJob._meta.db_table
_IDEMPOTENCY = IdempotencyRecord._meta.db_table

_DELETE_EVENTS = f"""
DELETE FROM {_EVENTS} WHERE id IN (
    SELECT id FROM {_EVENTS} WHERE tenant_id = %s AND accessed_at < %s LIMIT %s
)
"""
# The partial index on rows still holding a query (knowledge 0003) keeps this from re-reading blanked rows.
_BLANK_QUERIES = f"""
UPDATE {_EVENTS} SET metadata = metadata - 'query' WHERE id IN (
    SELECT id FROM {_EVENTS} WHERE tenant_id = %s AND accessed_at < %s AND metadata ? 'query' LIMIT %s
)
"""
# Finished jobs only: the partial index (memory 0007) on finished_at holds nothing else.
_DELETE_JOBS = f"""
DELETE FROM {_JOBS} WHERE id IN (
    SELECT id FROM {_JOBS}
    WHERE tenant_id = %s AND finished_at IS NOT NULL AND finished_at < %s AND state NOT IN ('pending', 'running')
    LIMIT %s
)
"""

# The (tenant_id, created_at) index (loopmem 0006) serves it.
_DELETE_IDEMPOTENCY = f"""
DELETE FROM {_IDEMPOTENCY} WHERE id IN (
    SELECT id FROM {_IDEMPOTENCY} WHERE tenant_id = %s AND created_at < %s LIMIT %s
)
"""


@dataclass
class RetentionReport:
    access_events_deleted: int = 0
    queries_blanked: int = 0
    promotion_jobs_deleted: int = 0
    idempotency_records_deleted: int = 0


def retention_prune(*, now: datetime | None = None, batch_size: int = RETENTION_BATCH_SIZE) -> RetentionReport:
    """Prune every tenant's expired ledger rows, query texts and finished promotion jobs (module docstring)."""
    now = now or timezone.now()
    keep_until = now - timedelta(days=settings.RETENTION_DAYS)
    query_until = now - timedelta(days=settings.QUERY_TEXT_RETENTION_DAYS)
    replay_until = now - timedelta(seconds=settings.IDEMPOTENCY_RETENTION_SECONDS)
    report = RetentionReport()
    for tenant_id in Tenant.objects.order_by("id").values_list("id", flat=True):
        report.access_events_deleted += _drain(_DELETE_EVENTS, tenant_id, keep_until, batch_size)
        report.queries_blanked += _drain(_BLANK_QUERIES, tenant_id, query_until, batch_size)
        report.promotion_jobs_deleted += _drain(_DELETE_JOBS, tenant_id, keep_until, batch_size)
        report.idempotency_records_deleted += _drain(_DELETE_IDEMPOTENCY, tenant_id, replay_until, batch_size)
    logger.info("retention.pruned %s", asdict(report))
    return report


def _drain(statement: str, tenant_id: uuid.UUID, cutoff: datetime, batch_size: int) -> int:
    """Run a batched statement until a batch comes back short; how many rows it touched."""
    touched = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(statement, [tenant_id, cutoff, batch_size])
            batch: int = cursor.rowcount
        touched += batch
        if batch < batch_size:
            return touched
