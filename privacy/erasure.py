"""Erasure: a subject (or a whole tenant) removed from every table and Redis key that holds its data, on record.

What goes, for a subject S of tenant T (docs/security.md, "Erase"):

- every long-term memory of S (superseded ones too), every session turn, promotion job and watermark, and the
  recorded answers of S's idempotent writes (they hold the text written);
- the query text of every access-ledger row written by S's keys (the row stays: it is the tenant's retrieval
  funnel, and holds no other text);
- S's recall-history keys in Redis (found by prefix: `recall.history`) and the recall-bump keys of the memories
  removed;
- the articles S owns (graduated from its memories or written by it) are always listed, and removed only with
  `include_articles`: they may have been read and relied on by others.

Rows go in batches, each batch in its own transaction together with its audit rows (`loopmem.tenancy.audit`), so a run
killed half-way leaves every removed row on record and the rest in place; running it again finishes the job,
and running it once more removes nothing (idempotent). Work still in flight for S (a promotion job running,
an agent still writing with S's key) can outlive one pass: revoke S's keys first, then erase.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Q

from knowledge.models import Article, ArticleAccessEvent, article_embedding_text
from loopmem.embedding import work_queue
from loopmem.models import ApiKey, DeletionAudit, IdempotencyRecord, Tenant
from loopmem.redis.client import redis_client
from loopmem.tenancy.audit import Actor, Removed, audit_record
from loopmem.tenancy.scope import subject_id_for
from memory.models import Memory, PromotionJob, SessionPromotion, SessionTurn
from memory.recall_bump import recall_bump_key
from recall import history

ERASE_BATCH_SIZE = 500
REDIS_DELETE_CHUNK = 500
RECALL_BUMP_PATTERN = "loopmem:recall_bump:{tenant_id}:*"

Progress = Callable[[int], object]


@dataclass(frozen=True)
class _Target:
    """One kind of row an erasure removes (or blanks): where, which, and the text its audit row hashes."""

    name: str  # the report's key
    rows: models.QuerySet[Any]
    fields: tuple[str, ...]  # what a batch reads: the id first, then the subject, then what the text is made of
    text: Callable[[dict[str, Any]], str | None]
    subject: Callable[[dict[str, Any]], str | None]
    action: str = DeletionAudit.Action.DELETE

    @property
    def table(self) -> str:
        return str(self.rows.model._meta.db_table)


@dataclass
class ErasureReport:
    """What an erasure removed (or, on a dry run, would remove), per table and in Redis."""

    tenant_id: str
    subject_id: str | None
    dry_run: bool
    include_articles: bool
    removed: dict[str, int] = field(default_factory=dict)
    # The articles the subject owns, listed whether or not they were removed.
    articles: list[dict[str, Any]] = field(default_factory=list)

    @property
    def database_rows(self) -> int:
        """Rows of the database in the report (what an operator's progress bar counts)."""
        return sum(count for name, count in self.removed.items() if name != "redis_keys")

    def describe(self, whom: str) -> str:
        """The operator's summary: counts per table, then the articles the subject owns."""
        verb = "would erase" if self.dry_run else "erased"
        counts = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in self.removed.items())
        lines = [f"{verb} {whom}: {counts}"]
        if self.articles:
            fate = "kept (pass --include-articles to remove them)"
            if self.include_articles:
                fate = "would be removed" if self.dry_run else "removed"
            lines.append(f"articles it owns: {len(self.articles)}, {fate}")
            lines += [f"  {a['id']}  {a['status']:<9} {a['visibility']:<7} {a['title'][:60]}" for a in self.articles]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "subject_id": self.subject_id,
            "dry_run": self.dry_run,
            "include_articles": self.include_articles,
            "removed": dict(self.removed),
            "articles": list(self.articles),
        }


def subject_erase(
    *,
    tenant: Tenant,
    subject_id: str,
    actor: Actor,
    include_articles: bool = False,
    dry_run: bool = False,
    batch_size: int = ERASE_BATCH_SIZE,
    progress: Progress | None = None,
) -> ErasureReport:
    """Erase one subject of the tenant (module docstring). `progress(n)` is called after each committed batch."""
    report = ErasureReport(str(tenant.id), subject_id, dry_run, include_articles)
    owned = Article.objects.filter(tenant_id=tenant.id, owner_subject_id=subject_id)
    report.articles = [_article_summary(a) for a in owned.defer("embedding", "search_vector").order_by("id")]
    targets = _targets(
        memories=Memory.objects.filter(tenant_id=tenant.id, subject_id=subject_id),
        turns=SessionTurn.objects.filter(tenant_id=tenant.id, subject_id=subject_id),
        jobs=PromotionJob.objects.filter(tenant_id=tenant.id, subject_id=subject_id),
        watermarks=SessionPromotion.objects.filter(tenant_id=tenant.id, subject_id=subject_id),
        events=ArticleAccessEvent.objects.filter(tenant_id=tenant.id, api_key_id__in=_key_ids(tenant.id, subject_id)),
        replays=IdempotencyRecord.objects.filter(tenant_id=tenant.id, subject_id=subject_id),
        articles=owned if include_articles else None,
        event_subject=subject_id,
    )
    _run(report, tenant.id, targets, actor, dry_run=dry_run, batch_size=batch_size, progress=progress)
    _redis(report, [history.subject_pattern(tenant.id, subject_id)], dry_run=dry_run)
    return report


def tenant_erase(
    *,
    tenant: Tenant,
    actor: Actor,
    include_articles: bool = False,
    dry_run: bool = False,
    batch_size: int = ERASE_BATCH_SIZE,
    progress: Progress | None = None,
) -> ErasureReport:
    """Erase every subject of the tenant at once: the same tables and keys, tenant-wide. The tenant, its keys and
    projects stay (it can go on working); `include_articles` removes every article of the tenant."""
    report = ErasureReport(str(tenant.id), None, dry_run, include_articles)
    articles = Article.objects.filter(tenant_id=tenant.id)
    targets = _targets(
        memories=Memory.objects.filter(tenant_id=tenant.id),
        turns=SessionTurn.objects.filter(tenant_id=tenant.id),
        jobs=PromotionJob.objects.filter(tenant_id=tenant.id),
        watermarks=SessionPromotion.objects.filter(tenant_id=tenant.id),
        events=ArticleAccessEvent.objects.filter(tenant_id=tenant.id),
        replays=IdempotencyRecord.objects.filter(tenant_id=tenant.id),
        articles=articles if include_articles else None,
        event_subject=None,
    )
    _run(report, tenant.id, targets, actor, dry_run=dry_run, batch_size=batch_size, progress=progress)
    patterns = [
        history.tenant_pattern(tenant.id),
        RECALL_BUMP_PATTERN.format(tenant_id=tenant.id),
        work_queue.tenant_pattern(tenant.id),
    ]
    _redis(report, patterns, dry_run=dry_run)
    return report


def _targets(
    *,
    memories: models.QuerySet[Memory],
    turns: models.QuerySet[SessionTurn],
    jobs: models.QuerySet[PromotionJob],
    watermarks: models.QuerySet[SessionPromotion],
    events: models.QuerySet[ArticleAccessEvent],
    replays: models.QuerySet[IdempotencyRecord],
    articles: models.QuerySet[Article] | None,
    event_subject: str | None,
) -> list[_Target]:
    def subject(row: dict[str, Any]) -> str | None:
        return row.get("subject_id")

    found = [
        _Target("memories", memories, ("id", "subject_id", "text"), lambda r: r["text"], subject),
        _Target("session_turns", turns, ("id", "subject_id", "content"), lambda r: r["content"], subject),
        _Target("promotion_jobs", jobs, ("id", "subject_id"), lambda r: None, subject),
        _Target("promotion_watermarks", watermarks, ("id", "subject_id"), lambda r: None, subject),
        _Target("idempotency_records", replays, ("id", "subject_id"), lambda r: None, subject),
        _Target(
            "access_event_queries",
            events.filter(metadata__has_key="query"),
            ("id", "metadata"),
            lambda r: str(r["metadata"].get("query")),
            lambda r: event_subject,
            action=DeletionAudit.Action.BLANK,
        ),
    ]
    if articles is not None:
        found.append(
            _Target(
                "articles",
                articles,
                ("id", "owner_subject_id", "title", "body"),
                lambda r: article_embedding_text(r["title"], r["body"]),
                lambda r: r["owner_subject_id"],
            )
        )
    return found


def _run(
    report: ErasureReport,
    tenant_id: uuid.UUID,
    targets: list[_Target],
    actor: Actor,
    *,
    dry_run: bool,
    batch_size: int,
    progress: Progress | None,
) -> None:
    for target in targets:
        if dry_run:
            report.removed[target.name] = target.rows.count()
            continue
        report.removed[target.name] = 0
        while True:
            done = _batch(target, tenant_id, actor, batch_size)
            if not done:
                break
            report.removed[target.name] += done
            if progress is not None:
                progress(done)


def _batch(target: _Target, tenant_id: uuid.UUID, actor: Actor, batch_size: int) -> int:
    """Remove (or blank) up to `batch_size` rows and record each, in one transaction; how many went."""
    with transaction.atomic():
        rows = list(target.rows.order_by("pk").select_for_update().values(*target.fields)[:batch_size])
        if not rows:
            return 0
        ids = [row["id"] for row in rows]
        table = connection.ops.quote_name(target.table)
        with connection.cursor() as cursor:
            if target.action == DeletionAudit.Action.BLANK:
                cursor.execute(f"UPDATE {table} SET metadata = metadata - 'query' WHERE id = ANY(%s)", [ids])
            else:
                # Raw, so the database's own ON DELETE rules apply (SET NULL of what a memory superseded, CASCADE
                # of an article's ledger rows) without the ORM loading them first.
                cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [ids])
        audit_record(
            tenant_id=tenant_id,
            actor=actor,
            action=target.action,
            rows=[Removed(target.table, row["id"], target.subject(row), target.text(row)) for row in rows],
        )
        if target.name == "memories":
            keys = [recall_bump_key(tenant_id, memory_id) for memory_id in ids]
            transaction.on_commit(lambda: _delete_keys(keys))
    return len(rows)


def _redis(report: ErasureReport, patterns: Iterable[str], *, dry_run: bool) -> None:
    """Remove (or count) the keys matching `patterns`. Redis errors propagate: the run is then incomplete, and
    running it again (idempotent) finishes it."""
    client = redis_client()
    count = 0
    for pattern in patterns:
        chunk: list[Any] = []
        for key in client.scan_iter(match=pattern, count=REDIS_DELETE_CHUNK):
            chunk.append(key)
            if len(chunk) >= REDIS_DELETE_CHUNK:
                count += len(chunk) if dry_run else _delete_keys(chunk)
                chunk = []
        if chunk:
            count += len(chunk) if dry_run else _delete_keys(chunk)
    report.removed["redis_keys"] = count


def _delete_keys(keys: list[Any]) -> int:
    if not keys:
        return 0
    return int(redis_client().delete(*keys))


def _key_ids(tenant_id: uuid.UUID, subject_id: str) -> list[uuid.UUID]:
    """The keys acting as the subject: agent keys with that agent_id, or the key whose own id it is."""
    match = Q(tenant_id=tenant_id, role=ApiKey.Role.AGENT, agent_id=subject_id)
    with contextlib.suppress(ValueError):
        match |= Q(id=uuid.UUID(subject_id))
    return [key.id for key in ApiKey.objects.filter(match) if subject_id_for(key) == subject_id]


def _article_summary(article: Article) -> dict[str, Any]:
    return {
        "id": str(article.id),
        "title": article.title,
        "status": article.status,
        "visibility": article.visibility,
        "graduated": article.metadata.get("source") == "memory_graduation",
    }
