"""Long-term memory use cases: remember, forget, supersede, embed."""

from __future__ import annotations

import hashlib
import logging
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from loopmem.embedding import embedders, work_queue
from loopmem.embedding.pipeline import EmbeddedTable, embed_row
from loopmem.errors import (
    AlreadySuperseded,
    InvalidProjectId,
    NotFound,
    QuotaExceeded,
    SecretDetected,
    SelfSupersede,
    SupersedeCycle,
)
from loopmem.models import DeletionAudit
from loopmem.observability import metrics
from loopmem.params import path_id
from loopmem.redis.client import redis_client
from loopmem.runtime.task_queue import broker_lists, send
from loopmem.secret_guard.policy import SecretReport, apply_secret_policy
from loopmem.tenancy.audit import Actor, Removed, audit_record
from loopmem.tenancy.scope import Scope
from memory.models import Memory, MemoryQuerySet, SessionTurn
from projects.selectors import project_in_tenant

logger = logging.getLogger(__name__)

EMBED_MEMORY_TASK = "memory.tasks.embed_memory_task"
EMBED_PENDING_MEMORIES_TASK = "memory.tasks.embed_pending_memories_task"
BUMP_RECALL_COUNTS_TASK = "memory.tasks.bump_recall_counts_task"
BUMP_QUEUE = "default"  # the bump is the only task routed there (settings.CELERY_TASK_ROUTES): its depth is the backlog
# The advisory lock class of the per-subject quota; the second key is the (tenant, subject) hash.
_QUOTA_LOCK_CLASS = zlib.crc32(b"loopmem_memory_long_term_quota") - 2**31


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
    clean = apply_secret_policy(scope.tenant_id, {"text": text, "tags": tags, "metadata": metadata}, report=report)
    text, tags, metadata = clean["text"], clean["tags"], clean["metadata"]
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    with transaction.atomic():
        if lock_subject_quota_and_count_live(scope) >= settings.MEMORY_QUOTA:
            raise QuotaExceeded(details={"quota": settings.MEMORY_QUOTA})
        memory = _insert_memory(
            scope,
            text=text,
            confidence=confidence,
            tags=tags or [],
            metadata=metadata or {},
            source=source,
            source_session_id=source_session_id,
        )
    return memory


def _insert_memory(
    scope: Scope,
    *,
    text: str,
    confidence: float,
    tags: list[str],
    metadata: dict[str, Any],
    source: str,
    source_session_id: str | None,
    import_key: str | None = None,
) -> Memory:
    """The one writer of a long-term memory row (remember, batch, correct, import), embedded after commit.

    Callers hold the subject's lock and have applied the quota; a check every write must pass belongs here.
    """
    memory = Memory.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        project_id=scope.project_id,
        text=text,
        confidence=confidence,
        tags=tags,
        metadata=metadata,
        source=source,
        source_session_id=source_session_id,
        import_key=import_key,
    )
    work_queue.enqueue_on_commit(Memory._meta.db_table, EMBED_PENDING_MEMORIES_TASK, scope.tenant_id, memory.id)
    return memory


def lock_subject_quota(scope: Scope) -> None:
    """Serialise the quota check of one (tenant, subject) until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", _quota_lock_key(scope))


def lock_subject_quota_and_count_live(scope: Scope) -> int:
    """`lock_subject_quota`, then the subject's live rows counted, in one round trip instead of two.

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


# --- Correction: a new version, never an edit ---------------------------------------------------------------


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
    given = {
        name: value for name, value in (("text", text), ("tags", tags), ("metadata", metadata)) if value is not None
    }
    clean = apply_secret_policy(scope.tenant_id, given, report=report)
    text, tags, metadata = clean.get("text", text), clean.get("tags", tags), clean.get("metadata", metadata)
    with transaction.atomic():
        lock_subject_quota(scope)
        old = Memory.objects.for_scope(scope).defer("embedding").select_for_update().filter(id=parsed).first()
        if old is None:
            raise NotFound()
        if old.superseded_by_id is not None:
            raise AlreadySuperseded(details={"superseded_by": str(old.superseded_by_id)})
        new = _insert_memory(
            Scope(tenant_id=scope.tenant_id, subject_id=scope.subject_id, project_id=old.project_id),
            text=old.text if text is None else text,
            confidence=old.confidence if confidence is None else confidence,
            tags=list(old.tags) if tags is None else tags,
            metadata=dict(old.metadata) if metadata is None else metadata,
            source=old.source,
            source_session_id=old.source_session_id,
        )
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


# --- Import: idempotent on the chain key per subject ----------------------------------------------------------

IMPORT_WRITE_CHUNK = 500


@dataclass(frozen=True)
class ImportRow:
    """One memory to import, already validated. `origin_id` / `superseded_by` / `supersedes` are the ids the
    file uses (an export's own ids), only to rebuild the chains; they are never stored."""

    text: str
    confidence: float = 1.0
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    source_session_id: str | None = None
    project_id: uuid.UUID | None = None
    origin_id: uuid.UUID | None = None
    superseded_by: uuid.UUID | None = None
    supersedes: uuid.UUID | None = None
    line: int | None = None  # where the file has it (1-based; an array's item number), for the report


@dataclass
class ImportReport:
    lines: int = 0
    created: int = 0
    skipped: int = 0
    linked: int = 0
    stopped_at: int | None = None  # the 1-based line the quota stopped the import at

    def as_dict(self) -> dict[str, int]:
        return {"lines": self.lines, "created": self.created, "skipped": self.skipped, "linked": self.linked}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain_key(text_sha: str, predecessor_keys: Iterable[str]) -> str:
    """A row's import identity: its text hash plus its predecessors' keys (a root's is its text hash alone)."""
    return hashlib.sha256(f"{text_sha}|{','.join(sorted(predecessor_keys))}".encode()).hexdigest()


def _chain_keys(texts: Mapping[Any, str], successor_of: Mapping[Any, Any]) -> dict[Any, str]:
    """The chain key of each row, predecessors first (`texts`: row → text sha; `successor_of`: row → row)."""
    predecessors: dict[Any, list[Any]] = {row: [] for row in texts}
    for row, successor in successor_of.items():
        if successor in predecessors and row in texts:
            predecessors[successor].append(row)
    keys: dict[Any, str] = {}
    pending = [row for row in texts if not predecessors[row]]
    while pending:
        row = pending.pop()
        keys[row] = chain_key(texts[row], (keys[p] for p in predecessors[row]))
        successor = successor_of.get(row)
        if successor in predecessors and successor not in keys and all(p in keys for p in predecessors[successor]):
            pending.append(successor)
    for row in texts:  # a cycle (never written by this service) keys its rows by text alone
        keys.setdefault(row, chain_key(texts[row], ()))
    return keys


def _existing_keys(scope: Scope) -> dict[str, uuid.UUID]:
    """chain key → row id of every row the subject holds (text hashed in the database)."""
    rows = (
        Memory.objects.for_scope(scope)
        .annotate(text_sha=RawSQL("encode(sha256(convert_to(memories.text, 'UTF8')), 'hex')", ()))
        .values_list("id", "superseded_by_id", "import_key", "text_sha")
    )
    texts: dict[uuid.UUID, str] = {}
    successor_of: dict[uuid.UUID, uuid.UUID] = {}
    stored: dict[str, uuid.UUID] = {}
    for row_id, successor, key, text_sha in rows.iterator(chunk_size=2000):
        texts[row_id] = text_sha
        if successor is not None:
            successor_of[row_id] = successor
        if key:
            stored[key] = row_id
    return {**stored, **{key: row_id for row_id, key in _chain_keys(texts, successor_of).items()}}


def memory_import(
    *, scope: Scope, rows: Sequence[ImportRow], progress: Callable[[int], object] | None = None
) -> ImportReport:
    """Write `rows` into the subject (source `imported`), rebuilding their supersede chains; skip what it holds.

    Idempotent: a row whose chain key the subject already holds is skipped (the partial unique index on
    (tenant, subject, import_key) backs this up), so importing a file twice adds nothing. Rows are written a
    chain at a time, in file order, in chunks of transactions under the subject's lock; the quota counts the
    rows left live. When it is reached the import stops there: what was written stays, and the report says
    where (`stopped_at`).
    """
    rows = _rows_under_secret_policy(scope, rows)
    report = ImportReport(lines=len(rows))
    index_of: dict[uuid.UUID | None, int] = {row.origin_id: i for i, row in enumerate(rows) if row.origin_id}
    successor = _successors(rows, index_of)
    keys = _chain_keys({i: text_hash(row.text) for i, row in enumerate(rows)}, successor)
    chains = _chains(len(rows), successor)
    projects = _known_projects(scope, {row.project_id for row in rows if row.project_id is not None})
    at = 0
    while at < len(chains):
        with transaction.atomic():
            live = lock_subject_quota_and_count_live(scope)
            existing = _existing_keys(scope)
            batch = 0
            while at < len(chains) and batch < IMPORT_WRITE_CHUNK:
                chain = chains[at]
                plan = [i for i in chain if keys[i] not in existing]
                ids = {i: existing[keys[i]] for i in chain if keys[i] in existing}
                links = _links(chain, successor, ids, plan)
                live_delta = sum(1 for i in plan if i not in successor) - _heads_superseded(scope, links, ids)
                if plan and live + live_delta > settings.MEMORY_QUOTA:
                    first = min(plan)
                    report.stopped_at = rows[first].line or first + 1
                    return report
                for i in plan:
                    row = rows[i]
                    memory = _insert_memory(
                        Scope(
                            tenant_id=scope.tenant_id,
                            subject_id=scope.subject_id,
                            project_id=projects.get(row.project_id),
                        ),
                        text=row.text,
                        confidence=row.confidence,
                        tags=row.tags,
                        metadata=row.metadata,
                        source=Memory.Source.IMPORTED,
                        source_session_id=row.source_session_id,
                        import_key=keys[i],
                    )
                    ids[i] = memory.id
                    existing[keys[i]] = memory.id
                report.linked += _link(scope, chain, successor, ids, plan)
                report.created += len(plan)
                report.skipped += len(chain) - len(plan)
                live += live_delta
                batch += len(chain)
                at += 1
                if progress is not None:
                    progress(len(chain))
    return report


def _rows_under_secret_policy(scope: Scope, rows: Sequence[ImportRow]) -> list[ImportRow]:
    """Every line passes the tenant's secret policy before anything is written: a refusal names its line."""
    cleaned = []
    for row in rows:
        try:
            clean = apply_secret_policy(scope.tenant_id, {"text": row.text, "tags": row.tags, "metadata": row.metadata})
        except SecretDetected as refused:
            raise SecretDetected(details={"line": row.line, **refused.details}) from None
        cleaned.append(replace(row, text=clean["text"], tags=clean["tags"], metadata=clean["metadata"]))
    return cleaned


def _successors(rows: Sequence[ImportRow], index_of: Mapping[uuid.UUID | None, int]) -> dict[int, int]:
    """line → the line that supersedes it, from `superseded_by` (authoritative) or `supersedes`; no cycles."""
    wanted: dict[int, int] = {}
    for i, row in enumerate(rows):
        if row.supersedes in index_of:
            wanted.setdefault(index_of[row.supersedes], i)
    for i, row in enumerate(rows):
        if row.superseded_by in index_of:
            wanted[i] = index_of[row.superseded_by]
    successor: dict[int, int] = {}
    for i, j in sorted(wanted.items()):
        k: int | None = j
        while k is not None and k != i:  # following j's successors must never lead back to i
            k = successor.get(k)
        if k is None:
            successor[i] = j
    return successor


def _chains(count: int, successor: Mapping[int, int]) -> list[list[int]]:
    """Rows grouped into chains (connected by supersede links), each in file order, chains by first line."""
    parent = list(range(count))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in successor.items():
        parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(count):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda chain: chain[0])


def _links(chain: list[int], successor: Mapping[int, int], ids: Mapping[int, uuid.UUID], plan: list[int]) -> list[int]:
    """The rows of `chain` already stored whose successor is about to be written."""
    planned = set(plan)
    return [i for i in chain if i in ids and successor.get(i) in planned]


def _heads_superseded(scope: Scope, links: list[int], ids: Mapping[int, uuid.UUID]) -> int:
    """How many stored, live rows a chain's new rows will supersede (each frees a quota slot)."""
    if not links:
        return 0
    return Memory.objects.for_scope(scope).live().filter(id__in=[ids[i] for i in links]).count()


def _link(
    scope: Scope, chain: list[int], successor: Mapping[int, int], ids: Mapping[int, uuid.UUID], plan: list[int]
) -> int:
    """Point each row of the chain at its successor written now, unless it is already superseded (by anything).

    Only links towards a new row are made: a new row has no successor yet, so no link can close a cycle."""
    planned = set(plan)
    linked = 0
    for i in chain:
        j = successor.get(i)
        if j is None or j not in planned or i not in ids:
            continue
        linked += (
            Memory.objects.for_scope(scope)
            .filter(id=ids[i], superseded_by__isnull=True)
            .update(superseded_by=ids[j], updated_at=timezone.now())
        )
    return linked


def _known_projects(scope: Scope, project_ids: set[uuid.UUID]) -> dict[uuid.UUID | None, uuid.UUID | None]:
    """The file's project ids that are projects of this tenant (others import as global)."""
    known = {pid for pid in project_ids if project_in_tenant(tenant_id=scope.tenant_id, project_id=pid) is not None}
    return {pid: pid for pid in known}


# --- Embedding ---------------------------------------------------------------------------------------------


def _store_vector(memory: Memory, vector: list[float], model_id: str) -> int:
    # A memory's text never changes (a correction is a new row), so the vector is stored unconditionally.
    return Memory.objects.filter(id=memory.id).update(
        embedding=vector,
        embedding_model=model_id,
        embedding_content_hash=embedders.content_hash(memory.text),
        updated_at=timezone.now(),
    )


MEMORY_EMBEDDINGS = EmbeddedTable(
    model=Memory, text_fields=("text",), text_of=lambda m: m.text, store=_store_vector, text_mutable=False
)


def memory_embed(*, memory_id: str) -> str:
    """Embed one memory ("embedded" | "unchanged" | "missing"); raises embedders.EmbeddingFailure."""
    return embed_row(MEMORY_EMBEDDINGS, memory_id)


# --- Hotness: the recall bump (reference §4.5) -------------------------------------------------------------


def memory_note_recalled(*, tenant_id: uuid.UUID, result: Any, include_superseded: bool) -> None:
    """Count a healthy semantic recall towards graduation: at most once per memory per cooldown.

    Only hits whose semantic similarity is ≥ the bump floor count (in every mode: a keyword or fused score is not
    a similarity); the fallback and include_superseded reads never do. Redis
    pre-filters the cooldown; the conditional UPDATE is the real guard. Off the request path (a Celery task)
    unless RECALL_BUMP_MODE is "sync"; if it cannot be enqueued it is dropped, never blocking the recall.
    """
    if result.fallback or include_superseded:
        return
    ids = [str(hit.memory.id) for hit in result.hits if (hit.semantic or 0.0) >= settings.RECALL_BUMP_MIN_SCORE]
    ids = _bump_admitted(tenant_id, ids)
    if not ids:
        return
    if settings.RECALL_BUMP_MODE == "sync":
        memory_bump_recall_counts(tenant_id=tenant_id, memory_ids=ids)
        return
    # Dropped (logged) if the broker is down: a recall is never blocked by its bookkeeping.
    send(BUMP_RECALL_COUNTS_TASK, (str(tenant_id), ids))


def recall_bump_key(tenant_id: uuid.UUID, memory_id: object) -> str:
    """The Redis key of a memory's bump cooldown (tenant first, so an erasure finds a tenant's by prefix)."""
    return f"loopmem:recall_bump:{tenant_id}:{memory_id}"


def _bump_admitted(tenant_id: uuid.UUID, memory_ids: list[str]) -> list[str]:
    """The ids not bumped within the cooldown, by one pipelined SET NX per id (one round trip).

    None while RECALL_BUMP_MAX_TASKS bump tasks already wait on their queue (read in the same round trip): a burst
    of recalls never queues an unbounded backlog of bookkeeping. The dropped bump's cooldown keys are released, so
    a later recall counts; the drop is counted in loopmem_recall_bumps_dropped.
    """
    if not memory_ids:
        return []
    cooldown = settings.RECALL_BUMP_COOLDOWN_SECONDS
    async_mode = settings.RECALL_BUMP_MODE != "sync"  # inline bumps queue nothing
    try:
        client = redis_client()
        pipe = client.pipeline()
        lists = broker_lists(BUMP_QUEUE) if async_mode else []
        for name in lists:
            pipe.llen(name)
        for memory_id in memory_ids:
            pipe.set(recall_bump_key(tenant_id, memory_id), 1, nx=True, ex=cooldown)
        replies = pipe.execute()
        waiting, admitted = sum(replies[: len(lists)]), replies[len(lists) :]
        ids = [memory_id for memory_id, ok in zip(memory_ids, admitted, strict=True) if ok]
        if ids and waiting >= settings.RECALL_BUMP_MAX_TASKS:
            client.delete(*(recall_bump_key(tenant_id, memory_id) for memory_id in ids))
            metrics.RECALL_BUMPS_DROPPED.inc()
            return []
    except (redis.RedisError, OSError):
        return memory_ids  # fail open: the conditional UPDATE still enforces the cooldown
    return ids


def memory_bump_recall_counts(*, tenant_id: uuid.UUID, memory_ids: list[str]) -> int:
    """recall_count + 1 and last_recalled_at = now, for memories not bumped within the cooldown; bad ids ignored."""
    ids = []
    for value in memory_ids:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    if not ids:
        return 0
    now = timezone.now()
    cooled = now - timedelta(seconds=settings.RECALL_BUMP_COOLDOWN_SECONDS)
    return (
        Memory.objects.for_tenant(tenant_id)
        .filter(id__in=ids)
        .filter(Q(last_recalled_at__isnull=True) | Q(last_recalled_at__lt=cooled))
        .update(recall_count=F("recall_count") + 1, last_recalled_at=now)
    )


# --- Session tier: append-only turns, server-governed expiry, batched prune ------------------------------

PRUNE_BATCH_SIZE = 1000


def session_expires_at(requested: datetime | None, now: datetime) -> datetime:
    """Server-governed expiry: missing → now + ttl; earlier than now + sweep window → floored; later → kept.

    The floor guarantees a promotion sweep sees every turn before it expires.
    """
    floor = now + timedelta(seconds=settings.PROMOTION_SWEEP_WINDOW_SECONDS)
    if requested is None:
        return max(now + timedelta(seconds=settings.SESSION_TTL_SECONDS), floor)
    return max(requested, floor)


def session_append(
    *,
    scope: Scope,
    session_id: str,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
    report: SecretReport | None = None,
) -> SessionTurn:
    """Append one turn to the subject's session. Turns are never updated.

    The tenant's secret policy runs first (SecretDetected, or redacted into `report`).
    """
    clean = apply_secret_policy(scope.tenant_id, {"content": content, "metadata": metadata}, report=report)
    content, metadata = clean["content"], clean["metadata"]
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    return SessionTurn.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        project_id=scope.project_id,
        session_id=session_id,
        role=role,
        content=content,
        metadata=metadata or {},
        expires_at=session_expires_at(expires_at, timezone.now()),
    )


def session_prune(*, now: datetime | None = None, batch_size: int = PRUNE_BATCH_SIZE) -> int:
    """Delete expired turns of every tenant, in batches, until none are left; returns how many went."""
    cutoff = now or timezone.now()
    deleted = 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tenant_id FROM session_memories WHERE expires_at < %s", [cutoff])
        tenant_ids = [row[0] for row in cursor.fetchall()]
    # Tenant by tenant: each batch names its tenant, so on Citus it runs on that tenant's shard alone (a LIMIT
    # subquery across shards is refused there).
    for tenant_id in tenant_ids:
        while True:
            # Batches keep each transaction (and its locks and WAL) small on a big backlog.
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM session_memories WHERE tenant_id = %s AND id IN "
                    "(SELECT id FROM session_memories WHERE tenant_id = %s AND expires_at < %s LIMIT %s)",
                    [tenant_id, tenant_id, cutoff, batch_size],
                )
                batch: int = cursor.rowcount
            deleted += batch
            if batch < batch_size:
                break
    return deleted
