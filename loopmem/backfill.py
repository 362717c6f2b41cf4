"""Embedding rows in provider batches, for the sweeps and `reembed` of memories and articles alike.

A failure of the provider or the tenant's set-up (down, no key, wrong model) stops the pass: the rest would fail
too. A failure of one text (the provider refuses it: 400/413/422) must not block the rows behind it, so that batch
is retried row by row and only the refused rows are left for later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loopmem import embeddings
from loopmem.models import Tenant

logger = logging.getLogger(__name__)

Row = TypeVar("Row")


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
