"""The one embedding pipeline of every embedded table (memories, articles): embed one row, find stale rows,
backfill them in provider batches, and the 5-minute sweep over every tenant. Each table says only what text it
embeds and how a vector is stored (`EmbeddedTable`); the rules are the same for all.

A failure of the provider or the tenant's set-up (down, no key, wrong model) stops the pass: the rest would fail
too. A failure of one text (the provider refuses it: 400/413/422) must not block the rows behind it, so that batch
is retried row by row and only the refused rows are left for later.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

import redis
from celery.exceptions import Retry
from django.db import connection, models, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from loopmem.embedding import embedders, work_queue
from loopmem.embedding.columns import EmbeddedColumns
from loopmem.models import Tenant
from loopmem.redis import outage
from loopmem.runtime import task_queue

logger = logging.getLogger(__name__)

Row = TypeVar("Row", bound=models.Model)  # stored in primary-key order (_embed)
M = TypeVar("M", bound=EmbeddedColumns)

# Redis did not answer at all (SIGSTOP, a reset connection); an error Redis answered with is not waited for.
REDIS_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)

SWEEP_SETTLE_SECONDS = 30  # rows written this recently are left to their own embed task
SWEEP_MAX_PER_TENANT = 500  # per run, so one tenant's backlog cannot starve the others
BATCH_SIZE = 32
DRAIN_BATCHES_PER_TASK = 16  # a drain task's turn: 512 rows, then it queues again behind other tenants' drains


@dataclass(frozen=True)
class EmbeddedTable(Generic[M]):
    """What a table embeds and how it stores a vector. The model carries the `EmbeddedColumns`, and a `tenant`,
    `inserted_at` and `updated_at` of its own."""

    model: type[M]
    text_fields: tuple[str, ...]  # what `text_of` reads: loaded with `.only()` for the batches
    text_of: Callable[[M], str]
    # Writes the vector; returns rows written (0 when the row changed or went meanwhile).
    store: Callable[[M, list[float], str], int]
    # The row, while its embedded text is still the one `row` holds (a reembed's pending vector is kept only then).
    unchanged: Callable[[M], Q] = lambda row: Q(pk=row.pk)
    # False when a row's text never changes (a memory: a correction is a new row); then a pending vector of the
    # target model is current by construction and the reembed finds what is left in SQL alone.
    text_mutable: bool = True

    def stale(self, tenant: Tenant, *, settled_before: datetime | None = None) -> QuerySet[M]:
        """The tenant's rows with no vector, or one of another model than the tenant's current one.

        `settled_before` skips rows written since then: their own embedding task is most likely in flight.
        """
        model_id = embedders.spec_for(tenant).model_id
        rows = self.model._default_manager.filter(tenant=tenant)
        rows = rows.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model_id))
        if settled_before is not None:
            rows = rows.filter(updated_at__lt=settled_before)
        return rows


def embed_row(table: EmbeddedTable[M], row_id: object) -> str:
    """Embed one row with its tenant's provider: "embedded", "unchanged" or "missing".

    Idempotent: the same content and model make no provider call. Raises embedders.EmbeddingFailure.
    """
    row: Any = table.model._default_manager.select_related("tenant").filter(id=row_id).first()
    if row is None:
        return "missing"
    text = table.text_of(row)
    if (
        row.embedding_content_hash == embedders.content_hash(text)
        and row.embedding_model == embedders.spec_for(row.tenant).model_id
        and row.embedding is not None
    ):
        return "unchanged"
    [vector], model_id = embedders.embed_texts(row.tenant, [text])
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
        if models_by_tenant[tenant.id] <= {embedders.spec_for(tenant).model_id}:
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
    embed: Callable[[Sequence[str]], tuple[list[list[float]], str]] | None = None,
) -> BackfillReport:
    """Embed each batch with the tenant's provider (or `embed`) and `store(row, vector, model_id)` (returns rows
    written)."""
    embed = embed or (lambda texts: embedders.embed_texts(tenant, texts))
    report = BackfillReport()
    remaining = sum(len(batch) for batch in batches)
    for batch in batches:
        try:
            report.embedded += _embed(embed, batch, text_of, store)
        except embedders.EmbeddingFailure as failure:
            if not _refuses_the_text(failure):
                report.add_failure(failure.tag, remaining)
                logger.warning("backfill for tenant %s stopped: %s", tenant.id, failure.tag)
                break
            for row in batch:
                try:
                    report.embedded += _embed(embed, [row], text_of, store)
                except embedders.EmbeddingFailure as single:
                    report.add_failure(single.tag, 1)
                    logger.warning("a row of tenant %s was not embedded: %s", tenant.id, single.tag)
        remaining -= len(batch)
        if on_batch is not None:
            on_batch(len(batch))
    return report


def _refuses_the_text(failure: embedders.EmbeddingFailure) -> bool:
    return isinstance(failure, embedders.EmbeddingProviderError) and failure.status in (400, 413, 422)


def _embed(
    embed: Callable[[Sequence[str]], tuple[list[list[float]], str]],
    rows: Sequence[Row],
    text_of: Callable[[Row], str],
    store: Callable[[Row, list[float], str], int],
) -> int:
    vectors, model_id = embed([text_of(row) for row in rows])
    # Rows are locked in primary-key order, whoever stores them: a drain's batch comes in its queue's order, and two
    # batches sharing rows (a drain and a backfill, the sweep or reembed) locking them in two orders deadlocked.
    stored = sorted(zip(rows, vectors, strict=True), key=lambda pair: pair[0].pk)
    with transaction.atomic():  # one commit for the batch, not one per row; the provider call stays outside
        return sum(store(row, vector, model_id) for row, vector in stored)


def embed_one_with_retries(task: Any, what: str, embed: Callable[[], str]) -> str:
    """The body of an embed-one-row task: transient provider failures retry with backoff (Celery's retry of
    `task`), permanent ones are left for the sweep. Returns the outcome, or the failure's tag."""
    try:
        return embed()
    except embedders.EmbeddingFailure as failure:
        if not embedders.is_transient(failure):
            logger.info("%s not embedded (%s); the sweep will retry later", what, failure.tag)
            return failure.tag
        raise _retry(task, failure) from failure


def _retry(task: Any, failure: embedders.EmbeddingFailure) -> Exception:
    """Celery's retry of `task` after the provider's Retry-After, else an exponential backoff (4 s, 8 s, ...)."""
    countdown = failure.retry_after or 2 ** (task.request.retries + 2)
    return task.retry(exc=failure, countdown=countdown)  # type: ignore[no-any-return]


def drain_queue(table: EmbeddedTable[M], task: Any, tenant_id: str) -> BackfillReport:
    """The body of a drain task (loopmem.embedding.work_queue): embed the tenant's queued rows, `BATCH_SIZE` per
    provider call, until the queue is empty. After `DRAIN_BATCHES_PER_TASK` batches the task sends itself again and
    ends, so a tenant's long backlog (an import) takes its turn with other tenants' drains instead of holding a worker.

    A batch the provider refuses (400/413/422) is retried row by row, as in a backfill. A transient failure retries
    the task with backoff, keeping its claim; a permanent one, or the last retry, drops the tenant's queue (the
    sweep embeds those rows later: with a failing provider the rest would fail too). A Redis that stops answering
    is waited for while the tenant's flag lives, then the task retries (module docstring of embedding_queue).
    """
    what = table.model._meta.db_table
    claim_id = task.request.id or f"direct-{uuid.uuid4()}"
    with work_queue.Heartbeat(what, tenant_id) as heartbeat:
        try:
            return _drain(table, task, tenant_id, what, claim_id)
        except Retry as retry:
            # The retry is this drain: the writes until it is due queue behind it rather than send drains of their own.
            heartbeat.stop()
            countdown = retry.when if isinstance(retry.when, int | float) else 0
            with contextlib.suppress(*outage.REDIS_ERRORS):
                work_queue.hold(what, tenant_id, countdown + work_queue.FLAG_TTL_SECONDS)
            raise
        except REDIS_UNREACHABLE as exc:
            # Redis froze or went away mid-drain. Back while the flag lives: a retry (same id, so it finishes this
            # claim) takes over the flag and what was pushed meanwhile. Back later: the flag lapsed, and the next
            # write schedules a drain. A killed worker never gets here: its claim is redelivered.
            heartbeat.stop()
            if not work_queue.answers_before(heartbeat.lapses_at):
                raise
            if task.request.called_directly or task.request.retries >= task.max_retries:
                _give_up(what, tenant_id, claim_id)
                raise
            work_queue.hold(what, tenant_id, work_queue.FLAG_TTL_SECONDS)  # until the retry's heartbeat
            raise task.retry(exc=exc, countdown=0) from exc
        except Exception:
            # Unexpected (the database, an error Redis answered with): the next write must schedule a drain rather
            # than wait for the flag to lapse; the rows of this drain are the sweep's.
            heartbeat.stop()
            _give_up(what, tenant_id, claim_id)
            raise


def _give_up(what: str, tenant_id: str, claim_id: str) -> None:
    with contextlib.suppress(*outage.REDIS_ERRORS):
        work_queue.abandon(what, tenant_id, claim_id)


def _drain(table: EmbeddedTable[M], task: Any, tenant_id: str, what: str, claim_id: str) -> BackfillReport:
    report = BackfillReport()
    tenant = Tenant.objects.filter(id=tenant_id).first()
    if tenant is None:
        work_queue.abandon(what, tenant_id, claim_id)
        return report

    for _ in range(DRAIN_BATCHES_PER_TASK):
        ids = work_queue.claim(what, tenant_id, claim_id, BATCH_SIZE)
        if not ids:
            return report  # drained; the claim cleared the schedule

        # Rows of this tenant only, still lacking a current vector (a redelivered claim may be half done).
        rows = list(table.stale(tenant).filter(id__in=ids).only("id", *table.text_fields))
        rows.sort(key=lambda row: ids.index(str(row.pk)))  # in the order they were written
        if not rows:
            work_queue.release(what, tenant_id, claim_id)
            continue
        try:
            report.embedded += _embed(
                lambda texts: embedders.embed_texts(tenant, texts), rows, table.text_of, table.store
            )
        except embedders.EmbeddingFailure as failure:
            if _refuses_the_text(failure):
                single = embed_in_batches(tenant, [[row] for row in rows], text_of=table.text_of, store=table.store)
                report.embedded += single.embedded
                for tag, count in single.failures.items():
                    report.add_failure(tag, count)
            elif embedders.is_transient(failure) and task.request.retries < task.max_retries:
                raise _retry(task, failure) from failure
            else:
                work_queue.abandon(what, tenant_id, claim_id)
                report.add_failure(failure.tag, len(rows))
                logger.info("%s of tenant %s not embedded (%s); the sweep retries", what, tenant_id, failure.tag)
                return report
        work_queue.release(what, tenant_id, claim_id)
    # Its turn is over: a fresh message joins the end of the queue (it clears the schedule if nothing is left).
    if not task_queue.send_now(task.name, (tenant_id,)):
        work_queue.unschedule(what, tenant_id)  # the next write sends one; the sweep covers the rest
    return report


# --- Reembed: a tenant moves to another model with no moment when recall compares nothing -------------------

# The advisory lock class of a tenant's reembed swap (two operators swapping one tenant at once serialise).
_REEMBED_LOCK_CLASS = 7_201


@dataclass
class ReembedProgress:
    """What one pass of `reembed_pending` did for one table."""

    rows: int = 0  # the tenant's rows
    ready: int = 0  # rows already holding a pending vector of the target model for their current text
    embedded: int = 0
    report: BackfillReport = field(default_factory=BackfillReport)

    @property
    def complete(self) -> bool:
        return self.ready + self.embedded == self.rows


def reembed_pending(
    table: EmbeddedTable[M],
    *,
    tenant: Tenant,
    target: embedders.EmbedderSpec,
    batch_size: int = BATCH_SIZE,
    page_size: int = 500,
    on_batch: Callable[[int], object] | None = None,
) -> ReembedProgress:
    """Give every row of the tenant a pending vector of `target`'s model, beside the vector recall still reads.

    Resumable: a row that already holds the target's vector of its current text is skipped, so a rerun after a
    crash or a provider outage continues where it stopped. Reads keyset pages, never the whole tenant at once.
    """
    progress = ReembedProgress(rows=table.model._default_manager.filter(tenant=tenant).count())
    progress.ready = progress.rows
    for page in _pages(table, tenant, page_size, lacking=target.model_id):
        todo = [row for row in page if not _pending_is_current(table, row, target.model_id)]
        progress.ready -= len(todo)
        batches = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
        report = embed_in_batches(
            tenant,
            batches,
            text_of=table.text_of,
            store=lambda row, vector, model_id: _store_pending(table, row, vector, model_id),
            on_batch=on_batch,
            embed=lambda texts: embedders.embed_with(target, tenant, texts),
        )
        progress.embedded += report.embedded
        for tag, count in report.failures.items():
            progress.report.add_failure(tag, count)
        if report.failed and not all(_refused(tag) for tag in report.failures):
            break  # the provider or the set-up failed: the rest would too; a rerun continues from here
    return progress


def reembed_swap(
    tables: Sequence[EmbeddedTable[Any]],
    *,
    tenant: Tenant,
    target: embedders.EmbedderSpec,
    switch_tenant: Callable[[], object],
) -> dict[str, int]:
    """In one transaction: embed the rows written since the pending pass, swap every pending vector into
    `embedding`, and `switch_tenant` to the target model. Until it commits, recall reads the old vectors with
    the old model; from the commit on, the new ones with the new model. Returns the rows swapped per table.

    Raises embedders.EmbeddingFailure (nothing is swapped) if a straggler cannot be embedded.
    """
    swapped: dict[str, int] = {}
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_REEMBED_LOCK_CLASS, str(tenant.id)])
        for table in tables:
            stragglers = [
                row for page in _pages(table, tenant, 500, lacking=target.model_id) for row in page
                if not _pending_is_current(table, row, target.model_id)
            ]  # fmt: skip
            for start in range(0, len(stragglers), BATCH_SIZE):
                batch = stragglers[start : start + BATCH_SIZE]
                vectors, model_id = embedders.embed_with(target, tenant, [table.text_of(row) for row in batch])
                for row, vector in zip(batch, vectors, strict=True):
                    _store_pending(table, row, vector, model_id)
            rows = table.model._default_manager.filter(tenant=tenant)
            swapped[table.model._meta.db_table] = rows.filter(
                pending_embedding__isnull=False, pending_embedding_model=target.model_id
            ).update(
                embedding=F("pending_embedding"),
                embedding_model=F("pending_embedding_model"),
                embedding_content_hash=F("pending_embedding_content_hash"),
                updated_at=timezone.now(),
            )
            rows.exclude(pending_embedding_model="", pending_embedding__isnull=True).update(
                pending_embedding=None, pending_embedding_model="", pending_embedding_content_hash=None
            )
        switch_tenant()
    return swapped


def _pages(table: EmbeddedTable[M], tenant: Tenant, page_size: int, *, lacking: str = "") -> Iterator[list[M]]:
    """The tenant's rows in keyset pages; with `lacking` (a model id), only those that may lack its pending vector."""
    rows = table.model._default_manager.filter(tenant=tenant)
    if lacking and not table.text_mutable:
        rows = rows.filter(Q(pending_embedding__isnull=True) | ~Q(pending_embedding_model=lacking))
    rows = rows.only("id", "pending_embedding_model", "pending_embedding_content_hash", *table.text_fields).order_by(
        "id"
    )
    last: object = None
    while True:
        page = list((rows if last is None else rows.filter(id__gt=last))[:page_size])
        if page:
            yield page
        if len(page) < page_size:
            return
        last = page[-1].pk


def reembed_lacking(table: EmbeddedTable[M], *, tenant: Tenant, target: embedders.EmbedderSpec) -> int:
    """How many rows may still lack a pending vector of the target's model (exact for immutable texts; for
    mutable ones an upper bound: an edited row is found by its content hash while the pass reads it)."""
    rows = table.model._default_manager.filter(tenant=tenant)
    if table.text_mutable:
        return rows.count()
    return rows.filter(Q(pending_embedding__isnull=True) | ~Q(pending_embedding_model=target.model_id)).count()


def _pending_is_current(table: EmbeddedTable[M], row: Any, model_id: str) -> bool:
    return bool(
        row.pending_embedding_model == model_id
        and row.pending_embedding_content_hash == embedders.content_hash(table.text_of(row))
    )


def _store_pending(table: EmbeddedTable[M], row: M, vector: list[float], model_id: str) -> int:
    # Only while the text is the one embedded (`unchanged`): an article edited meanwhile is a straggler of the swap.
    return table.model._default_manager.filter(table.unchanged(row)).update(
        pending_embedding=vector,
        pending_embedding_model=model_id,
        pending_embedding_content_hash=embedders.content_hash(table.text_of(row)),
    )


def _refused(tag: str) -> bool:
    return tag in {f"embedding_provider_error_{status}" for status in (400, 413, 422)}
