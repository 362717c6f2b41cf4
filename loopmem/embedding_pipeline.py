"""The one embedding pipeline of every embedded table (memories, articles): embed one row, find stale rows,
backfill them in provider batches, and the 5-minute sweep over every tenant. Each table says only what text it
embeds and how a vector is stored (`EmbeddedTable`); the rules are the same for all.

A failure of the provider or the tenant's set-up (down, no key, wrong model) stops the pass: the rest would fail
too. A failure of one text (the provider refuses it: 400/413/422) must not block the rows behind it, so that batch
is retried row by row and only the refused rows are left for later.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import models
from django.db.models import Q, QuerySet
from django.utils import timezone

from loopmem import embeddings
from loopmem.models import Tenant

logger = logging.getLogger(__name__)

Row = TypeVar("Row")
M = TypeVar("M", bound=models.Model)

SWEEP_SETTLE_SECONDS = 30  # rows written this recently are left to their own embed task
SWEEP_MAX_PER_TENANT = 500  # per run, so one tenant's backlog cannot starve the others
BATCH_SIZE = 32


@dataclass(frozen=True)
class EmbeddedTable(Generic[M]):
    """What a table embeds and how it stores a vector. The model has `tenant`, `embedding`,
    `embedding_model`, `embedding_content_hash`, `inserted_at` and `updated_at`."""

    model: type[M]
    text_fields: tuple[str, ...]  # what `text_of` reads: loaded with `.only()` for the batches
    text_of: Callable[[M], str]
    # Writes the vector; returns rows written (0 when the row changed or went meanwhile).
    store: Callable[[M, list[float], str], int]

    def stale(self, tenant: Tenant, *, settled_before: datetime | None = None) -> QuerySet[M]:
        """The tenant's rows with no vector, or one of another model than the tenant's current one.

        `settled_before` skips rows written since then: their own embedding task is most likely in flight.
        """
        model_id = embeddings.spec_for(tenant).model_id
        rows = self.model._default_manager.filter(tenant=tenant)
        rows = rows.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model_id))
        if settled_before is not None:
            rows = rows.filter(updated_at__lt=settled_before)
        return rows


def embed_row(table: EmbeddedTable[M], row_id: object) -> str:
    """Embed one row with its tenant's provider: "embedded", "unchanged" or "missing".

    Idempotent: the same content and model make no provider call. Raises embeddings.EmbeddingFailure.
    """
    row: Any = table.model._default_manager.select_related("tenant").filter(id=row_id).first()
    if row is None:
        return "missing"
    text = table.text_of(row)
    if (
        row.embedding_content_hash == embeddings.content_hash(text)
        and row.embedding_model == embeddings.spec_for(row.tenant).model_id
        and row.embedding is not None
    ):
        return "unchanged"
    [vector], model_id = embeddings.embed_texts(row.tenant, [text])
    return "embedded" if table.store(row, vector, model_id) else "missing"


def backfill(
    table: EmbeddedTable[M],
    *,
    tenant: Tenant,
    limit: int,
    batch_size: int = BATCH_SIZE,
    settled_before: datetime | None = None,
    on_batch: Callable[[int], object] | None = None,
) -> BackfillReport:
    """Embed up to `limit` stale rows of the tenant, oldest first, in provider batches."""
    stale = table.stale(tenant, settled_before=settled_before)
    ids = list(stale.order_by("inserted_at", "id").values_list("id", flat=True)[:limit])
    manager = table.model._default_manager
    batches = [
        list(manager.filter(id__in=ids[start : start + batch_size]).only("id", *table.text_fields).order_by("id"))
        for start in range(0, len(ids), batch_size)
    ]
    return embed_in_batches(tenant, batches, text_of=table.text_of, store=table.store, on_batch=on_batch)


def sweep(table: EmbeddedTable[M], *, max_per_tenant: int = SWEEP_MAX_PER_TENANT) -> BackfillReport:
    """Embed every tenant's stale rows: a write whose task was lost, a provider that was down, a model change.

    Runs every 5 minutes; a tenant's failing provider stops only that tenant's pass.
    """
    total = BackfillReport()
    settled_before = timezone.now() - timedelta(seconds=SWEEP_SETTLE_SECONDS)
    # One index-only pass finds which tenants hold rows of which model ("" = never embedded).
    models_by_tenant: dict[uuid.UUID, set[str]] = {}
    for tenant_id, model in table.model._default_manager.values_list("tenant_id", "embedding_model").distinct():
        models_by_tenant.setdefault(tenant_id, set()).add(model)
    for tenant in Tenant.objects.filter(id__in=list(models_by_tenant)):
        if models_by_tenant[tenant.id] <= {embeddings.spec_for(tenant).model_id}:
            continue
        total.merge(backfill(table, tenant=tenant, limit=max_per_tenant, settled_before=settled_before))
    return total


@dataclass
class BackfillReport:
    """What a backfill pass did."""

    embedded: int = 0
    failed: int = 0
    tenants: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def add_failure(self, tag: str, count: int) -> None:
        self.failed += count
        self.failures[tag] = self.failures.get(tag, 0) + count

    def as_dict(self) -> dict[str, object]:
        """The task result and operator summary."""
        return {"embedded": self.embedded, "failed": self.failed, "tenants": self.tenants, "failures": self.failures}

    def summary(self, what: str) -> str:
        """One operator line: `<what>: N embedded, N failed over N tenant(s) (tag: n, ...)`."""
        line = f"{what}: {self.embedded} embedded, {self.failed} failed over {self.tenants} tenant(s)"
        if self.failures:
            line += f" ({', '.join(f'{tag}: {n}' for tag, n in self.failures.items())})"
        return line

    def merge(self, other: BackfillReport) -> None:
        self.embedded += other.embedded
        self.tenants += 1
        for tag, count in other.failures.items():
            self.add_failure(tag, count)


def embed_in_batches(
    tenant: Tenant,
    batches: Sequence[Sequence[Row]],
    *,
    text_of: Callable[[Row], str],
    store: Callable[[Row, list[float], str], int],
    on_batch: Callable[[int], object] | None = None,
) -> BackfillReport:
    """Embed each batch with the tenant's provider and `store(row, vector, model_id)` (returns rows written)."""
    report = BackfillReport()
    remaining = sum(len(batch) for batch in batches)
    for batch in batches:
        try:
            report.embedded += _embed(tenant, batch, text_of, store)
        except embeddings.EmbeddingFailure as failure:
            if not _refuses_the_text(failure):
                report.add_failure(failure.tag, remaining)
                logger.warning("backfill for tenant %s stopped: %s", tenant.id, failure.tag)
                break
            for row in batch:
                try:
                    report.embedded += _embed(tenant, [row], text_of, store)
                except embeddings.EmbeddingFailure as single:
                    report.add_failure(single.tag, 1)
                    logger.warning("a row of tenant %s was not embedded: %s", tenant.id, single.tag)
        remaining -= len(batch)
        if on_batch is not None:
            on_batch(len(batch))
    return report


def _refuses_the_text(failure: embeddings.EmbeddingFailure) -> bool:
    return isinstance(failure, embeddings.EmbeddingProviderError) and failure.status in (400, 413, 422)


def _embed(
    tenant: Tenant, rows: Sequence[Row], text_of: Callable[[Row], str], store: Callable[[Row, list[float], str], int]
) -> int:
    vectors, model_id = embeddings.embed_texts(tenant, [text_of(row) for row in rows])
    return sum(store(row, vector, model_id) for row, vector in zip(rows, vectors, strict=True))


def embed_one_with_retries(task: Any, what: str, embed: Callable[[], str]) -> str:
    """The body of an embed-one-row task: transient provider failures retry with backoff (Celery's retry of
    `task`), permanent ones are left for the sweep. Returns the outcome, or the failure's tag."""
    try:
        return embed()
    except embeddings.EmbeddingFailure as failure:
        if not embeddings.is_transient(failure):
            logger.info("%s not embedded (%s); the sweep will retry later", what, failure.tag)
            return failure.tag
        countdown = failure.retry_after or 2 ** (task.request.retries + 2)
        raise task.retry(exc=failure, countdown=countdown) from failure
