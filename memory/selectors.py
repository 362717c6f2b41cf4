"""Long-term memory reads: recall by meaning (index-safe, complete), the ILIKE fallback, and lists."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db.models import ExpressionWrapper, FloatField, Q, QuerySet, Value
from django.utils import timezone

from loopmem.embedding import embedders, vector_index
from loopmem.errors import NotFound
from loopmem.models import Tenant
from loopmem.params import clamp, path_id
from loopmem.reads import hnsw_options, scoped
from loopmem.reads.prepared import Builder, PreparedRead, PreparedShapes
from loopmem.reads.size_cache import subject_sizes
from loopmem.tenancy.scope import Scope
from memory.candidates import HEAVY_COLUMNS, recall_candidates
from memory.filters import MemoryFilters, narrow
from memory.models import Memory, SessionTurn
from memory.separation_grade import SeparationGrade

logger = logging.getLogger(__name__)

DEFAULT_RECALL_K = 10
MAX_RECALL_K = 100
POOL_FACTOR = 5
POOL_FLOOR = 100
POOL_CAP = 500


@dataclass
class RecallHit:
    memory: Memory
    score: float | None
    # Each lane's own figure (None: the lane did not score the row): cosine similarity, keyword query coverage.
    semantic: float | None = None
    keyword: float | None = None
    time: float | None = None  # closeness to the days the query names (memory.time_lane); None: it names none
    hop: float | None = None  # deep recall: the row's share of the seeds' terms (memory.second_hop); None: not deep


@dataclass
class RecallResult:
    """Hits plus the meta the API reports about how they were found."""

    hits: list[RecallHit]
    k: int
    fallback: bool = False
    reason: str | None = None
    recall_path: str | None = None  # "exact" | "ann"; None on the fallback
    ann_iterative_scan: str | None = None  # only when the ANN index ran
    ann_iterative_scan_reason: str | None = None
    # Set by keyword and hybrid recall (memory.recall_modes); the semantic envelope never shows them.
    mode: str = "semantic"
    lane_counts: dict[str, int] | None = None
    lane_lost: str | None = None
    separation_grade: SeparationGrade | None = None  # rendered as the envelope's `meta.answer_confidence`
    asked_days: list[tuple[date, date]] | None = None  # hybrid: the [start, end) spans the query names, if any

    @property
    def underfilled(self) -> bool:
        return len(self.hits) < self.k


def recall_k(limit: int | None) -> int:
    return clamp(limit if limit is not None else DEFAULT_RECALL_K, 1, MAX_RECALL_K)


def pool_size(k: int, *, with_project: bool) -> int:
    """Reference §4.3: how many ANN candidates to fetch for k results (over-fetch for relaxed ordering)."""
    factor = POOL_FACTOR * 2 if with_project else POOL_FACTOR
    return max(min(max(k * factor, POOL_FLOOR), POOL_CAP), k)


def memory_recall(
    *,
    scope: Scope,
    tenant: Tenant,
    query: str,
    limit: int | None = None,
    include_superseded: bool = False,
    filters: MemoryFilters | None = None,
) -> RecallResult:
    """Recall the subject's memories nearest in meaning to `query`; degrade to ILIKE if embedding fails."""
    k = recall_k(limit)
    embedding = embedders.embed_query(tenant, query)
    if isinstance(embedding, embedders.EmbeddingDimensionMismatch):
        return RecallResult(hits=[], k=k, fallback=True, reason="embedding_dimension_mismatch")
    if isinstance(embedding, embedders.EmbeddingFailure):
        return recall_fallback(
            scope=scope, query=query, k=k, include_superseded=include_superseded, reason=embedding.tag, filters=filters
        )
    return recall_by_vector(
        scope=scope,
        vector=embedding.vector,
        model_id=embedding.model_id,
        k=k,
        include_superseded=include_superseded,
        filters=filters,
    )


def _candidates(
    scope: Scope, model_id: str, dimensions: int, *, include_superseded: bool, filters: MemoryFilters | None = None
) -> QuerySet[Memory]:
    # Vectors of another model are never compared: their distances would mean nothing; nor vectors of another size
    # (pgvector refuses to compare them, and the size predicate is what lets the planner use the partial index of
    # this size). Filters narrow the scoped rows (recall_candidates), so every read sees only matching rows.
    return recall_candidates(scope, include_superseded=include_superseded, filters=filters).filter(
        vector_index.same_dimensions(dimensions), embedding__isnull=False, embedding_model=model_id
    )


def recall_by_vector(
    *,
    scope: Scope,
    vector: list[float],
    model_id: str,
    k: int,
    include_superseded: bool = False,
    path: str = "auto",
    filters: MemoryFilters | None = None,
    session: scoped.ScopedSession | None = None,
) -> RecallResult:
    """Index-safe kNN inside the scope (DESIGN §5): complete for every subject size up to the quota.

    A subject with at most RECALL_EXACT_MAX_ROWS rows is read exactly: a btree-scoped scan sorted by true
    distance. A larger one is read through HNSW with the subject *inside* an iterative scan, re-ranked, and
    verified: if it comes back short, the exact read answers instead. `path` forces a read for benchmarks and
    tests: "exact", "ann" (verified), "ann_only" (unverified), "ann_post_filter" (the reference's: no iterative
    scan, unverified). `session`: read inside one the caller holds (hybrid recall reads both lanes in one).
    """
    dimensions = len(vector)
    opened = (
        scoped.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id)
        if session is None
        else contextlib.nullcontext(session)
    )
    with opened as session:
        read = _VectorRead(session, scope, vector, model_id, include_superseded=include_superseded, filters=filters)
        size = subject_size(session, scope, include_superseded=include_superseded)
        if include_superseded:
            # Superseded rows are not in the partial HNSW index: the exact, bounded read serves them.
            return _result(read.exact(k, size), k, recall_path="exact")
        if path == "auto":
            path = "exact" if size <= settings.RECALL_EXACT_MAX_ROWS else "ann"
        if path != "exact" and not vector_index.is_indexed(dimensions):
            _note_unindexed(model_id, dimensions)
            path = "exact"
        if path == "exact":
            return _result(read.exact(k, size), k, recall_path="exact")
        applied = session.configure(
            hnsw_options.ReadOptions(
                ef_search=settings.HNSW_EF_SEARCH,
                iterative_scan=path in ("ann", "ann_only"),
                max_scan_tuples=settings.HNSW_MAX_SCAN_TUPLES,
            )
        )
        pool = pool_size(k, with_project=scope.project_id is not None)
        rows = sorted(read.ann(pool), key=lambda m: (m.distance, m.id))[:k]  # type: ignore[attr-defined]
        if len(rows) < k and path == "ann":
            # Verified fill: HNSW came back short, so let the exact read decide what exists.
            exact_rows = read.exact(k, size)
            if len(exact_rows) > len(rows):
                return _result(exact_rows, k, recall_path="exact")
        return _result(
            rows,
            k,
            recall_path="ann",
            ann_iterative_scan=applied.iterative_scan,
            ann_iterative_scan_reason=applied.iterative_scan_reason,
        )


# The recall reads without filters, compiled once per shape (loopmem.reads.prepared): most recalls filter nothing.
_prepared_reads: PreparedShapes[PreparedRead[Memory]] = PreparedShapes(PreparedRead)


@dataclass(frozen=True)
class _VectorRead:
    """recall_by_vector's two reads, prepared when the caller filters nothing, else built through the ORM."""

    session: scoped.ScopedSession
    scope: Scope
    vector: list[float]
    model_id: str
    include_superseded: bool
    filters: MemoryFilters | None

    def exact(self, k: int, subject_rows: int) -> list[Memory]:
        two_step = subject_rows >= EXACT_TWO_STEP_MIN_ROWS

        def build(scope: Scope, vector: list[float], model_id: str) -> QuerySet[Memory]:
            return _exact(scope, self._candidates(scope, vector, model_id), vector, k, subject_rows)

        return self._read(("exact", k, two_step), build)

    def ann(self, pool: int) -> list[Memory]:
        def build(scope: Scope, vector: list[float], model_id: str) -> QuerySet[Memory]:
            # Ordered by the cast the index of this size holds; the distance is the stored vector's, the figure the
            # exact read gives, and the caller re-ranks by it (ties broken by id, as the exact read breaks them).
            candidates = self._candidates(scope, vector, model_id)
            ranked = candidates.annotate(distance=vector_index.exact_distance(vector))
            return ranked.order_by(vector_index.ann_distance(vector))[:pool]

        return self._read(("ann", pool), build)

    def _candidates(self, scope: Scope, vector: list[float], model_id: str) -> QuerySet[Memory]:
        return _candidates(
            scope, model_id, len(vector), include_superseded=self.include_superseded, filters=self.filters
        )

    def _read(self, shape: tuple[Any, ...], build: Builder) -> list[Memory]:
        if self.filters is not None and not self.filters.is_empty:
            return self.session.fetch(build(self.scope, self.vector, self.model_id))
        with_project = self.scope.project_id is not None
        prepared = _prepared_reads.get(
            (*shape, len(self.vector), self.include_superseded, with_project),
            build,
            dimensions=len(self.vector),
            with_project=with_project,
        )
        return prepared.run(self.session, scope=self.scope, vector=self.vector, model_id=self.model_id)


def subject_size(session: scoped.ScopedSession, scope: Scope, *, include_superseded: bool = False) -> int:
    """How many rows the read scans, from a count cached per subject and process: the subject's live rows, or every
    version when the read includes superseded ones.

    It picks the read: exact up to RECALL_EXACT_MAX_ROWS rows, else ANN; and the exact read's shape (_exact).
    Live rows, not every version: the default read scans only those (`superseded_by` is a key column of the subject's
    index), so a subject within the quota is read exactly however long its correction history; counting versions
    sent a quota-full subject with one correction to the HNSW graph (recall@10 0.572 against the exact read, on a
    10,000-row subject: docs/performance.md, "Bytes per memory"). Every read is complete whatever the size (exact by
    construction; ANN verified, re-read exactly when short), so a size up to SIZE_TTL_SECONDS old costs at most
    speed, never a row; the count runs once per subject per TTL instead of before every recall.
    """
    key = (scope.tenant_id, scope.subject_id, include_superseded)
    size = subject_sizes.get(key)
    if size is None:
        size = session.count_all(Memory, live_only=not include_superseded)
        subject_sizes.put(key, size)
    return size


_unindexed_noted: set[tuple[str, int]] = set()


def _note_unindexed(model_id: str, dimensions: int) -> None:
    if (model_id, dimensions) not in _unindexed_noted:
        _unindexed_noted.add((model_id, dimensions))
        logger.info(
            "recall for model %s reads exactly: no HNSW index exists for %d-dim vectors (indexed sizes: %s)",
            model_id,
            dimensions,
            ", ".join(map(str, vector_index.INDEXED_DIMENSIONS)),
        )


# From this many rows up, a subject's exact read sorts ids alone and then fetches the k rows (_exact); below it one
# statement is cheaper (the vector travels once, and sorting a few hundred whole rows costs little).
EXACT_TWO_STEP_MIN_ROWS = 1_000


def _exact(
    scope: Scope, candidates: QuerySet[Memory], vector: list[float], k: int, subject_rows: int
) -> QuerySet[Memory]:
    """The k candidates nearest by true distance.

    For a large subject in two steps: the inner read sorts id and distance alone (sorting whole rows formed every
    candidate's 20-odd columns: about a fifth of a quota-full subject's read), the outer fetches those k rows by
    primary key.
    """
    # "+ 0" makes the sort key an expression no HNSW index can serve (nor does the uncast column match the
    # indexes' cast expressions), so the planner never swaps in an approximate, post-filtered index scan:
    # this read is exact by construction.
    distance = ExpressionWrapper(vector_index.exact_distance(vector) + Value(0.0), output_field=FloatField())
    if subject_rows < EXACT_TWO_STEP_MIN_ROWS:
        return candidates.annotate(distance=distance).order_by("distance", "id")[:k]
    nearest = candidates.annotate(distance=distance).order_by("distance", "id").values("id")[:k]
    rows = Memory.objects.for_scope(scope).filter(id__in=nearest).defer(*HEAVY_COLUMNS)
    return rows.annotate(distance=vector_index.exact_distance(vector)).order_by("distance", "id")


def _result(rows: Sequence[Memory], k: int, **meta: Any) -> RecallResult:
    similarities = [max(0.0, 1.0 - m.distance) for m in rows]  # type: ignore[attr-defined]
    hits = [RecallHit(memory=m, score=s, semantic=s) for m, s in zip(rows, similarities, strict=True)]
    return RecallResult(hits=hits, k=k, **meta)


def recall_fallback(
    *, scope: Scope, query: str, k: int, include_superseded: bool, reason: str, filters: MemoryFilters | None = None
) -> RecallResult:
    """Embedding is unavailable: substring match in the same scope, newest first, no scores (reference §4.4)."""
    rows = recall_candidates(scope, include_superseded=include_superseded, filters=filters)
    if query != "":
        rows = rows.filter(text__icontains=query)  # Django escapes %, _ and \\ in the pattern
    rows = rows.newest_first()[:k]
    with scoped.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id) as session:
        found = session.fetch(rows)
    return RecallResult(hits=[RecallHit(memory=m, score=None) for m in found], k=k, fallback=True, reason=reason)


def memory_list(
    *,
    scope: Scope,
    include_superseded: bool = False,
    source: str | None = None,
    filters: MemoryFilters | None = None,
) -> QuerySet[Memory]:
    """The subject's memories, newest first (reference §2.3: not filtered by project)."""
    rows = narrow(Memory.objects.for_scope(scope), filters)
    return _listing(rows, include_superseded=include_superseded, source=source)


def memory_list_all_subjects(
    *, tenant_id: Any, include_superseded: bool = False, source: str | None = None, filters: MemoryFilters | None = None
) -> QuerySet[Memory]:
    """Superadmin oversight: every subject of the tenant."""
    rows = narrow(Memory.objects.for_tenant(tenant_id), filters)
    return _listing(rows, include_superseded=include_superseded, source=source)


def _listing(rows: QuerySet[Memory], *, include_superseded: bool, source: str | None) -> QuerySet[Memory]:
    if not include_superseded:
        rows = rows.filter(superseded_by__isnull=True)
    if source in Memory.Source.values:
        rows = rows.filter(source=source)
    return rows.defer(*HEAVY_COLUMNS).order_by("-inserted_at", "-id")


# --- One memory, its history, and the export ---------------------------------------------------------------

# A supersede chain longer than this is not walked further (the API only ever makes linear chains).
MAX_HISTORY = 1000
EXPORT_CHUNK = 500


def memory_rows(*, scope: Scope | None = None, tenant_id: Any = None) -> QuerySet[Memory]:
    """The rows a caller may address by id: its own (tenant, subject), or a superadmin's whole tenant."""
    if scope is not None:
        return Memory.objects.for_scope(scope).defer("embedding")
    return Memory.objects.for_tenant(tenant_id).defer("embedding")


def memory_get(rows: QuerySet[Memory], memory_id: str) -> Memory:
    """One memory, superseded or live; anything not in `rows` (or a malformed id) is 404."""
    memory = rows.filter(id=path_id(memory_id)).first()
    if memory is None:
        raise NotFound()
    return memory


def memory_history(rows: QuerySet[Memory], memory_id: str) -> list[Memory]:
    """The supersede chain of a memory, oldest first, the same whichever member is asked for.

    From the member, follow `superseded_by` to the live head (or the last version), then gather every row that
    leads to it; order by distance from the head (farthest first), then insertion time.
    """
    head = memory_get(rows, memory_id)
    seen = {head.id}
    while head.superseded_by_id is not None and len(seen) < MAX_HISTORY:
        successor = rows.filter(id=head.superseded_by_id).first()
        if successor is None or successor.id in seen:
            break
        seen.add(successor.id)
        head = successor
    levels: list[list[Memory]] = [[head]]
    members = {head.id}
    while levels[-1] and len(members) < MAX_HISTORY:
        ids = [m.id for m in levels[-1]]
        older = [m for m in rows.filter(superseded_by_id__in=ids).order_by("inserted_at", "id") if m.id not in members]
        members.update(m.id for m in older)
        levels.append(older)
    return [memory for level in reversed(levels) for memory in level]


def memory_export_rows(*, scope: Scope, include_superseded: bool = False) -> Iterator[Memory]:
    """The subject's memories for export, oldest first, each with `supersedes_id` set (its predecessor, or None).

    Read in keyset-paginated chunks, with one query for each chunk's predecessors, so a large subject streams
    without a long-lived cursor and in bounded work per chunk.
    """
    rows = Memory.objects.for_scope(scope)
    if not include_superseded:
        rows = rows.live()
    rows = rows.defer("embedding").order_by("inserted_at", "id")
    last: tuple[datetime, Any] | None = None
    while True:
        page = (
            rows if last is None else rows.filter(Q(inserted_at__gt=last[0]) | Q(inserted_at=last[0], id__gt=last[1]))
        )
        chunk = list(page[:EXPORT_CHUNK])
        links = Memory.objects.for_scope(scope).filter(superseded_by_id__in=[m.id for m in chunk])
        predecessors: dict[Any, Any] = {}
        for successor, predecessor in links.order_by("-inserted_at", "-id").values_list("superseded_by_id", "id"):
            predecessors[successor] = predecessor  # the oldest one wins
        for memory in chunk:
            memory.supersedes_id = predecessors.get(memory.id)  # type: ignore[attr-defined]
        yield from chunk
        if len(chunk) < EXPORT_CHUNK:
            return
        last = (chunk[-1].inserted_at, chunk[-1].id)


# --- Session tier reads -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionHistory:
    """{results, meta: {total_count, limit, offset}} (reference §4.15)."""

    results: list[SessionTurn]
    total_count: int
    limit: int
    offset: int


def session_turns(*, scope: Scope, session_id: str, now: datetime | None = None) -> QuerySet[SessionTurn]:
    """The live turns of one of the subject's sessions, in insertion order."""
    return (
        SessionTurn.objects.for_scope(scope).filter(session_id=session_id).unexpired(now or timezone.now()).in_order()
    )


def session_history(*, scope: Scope, session_id: str, limit: int, offset: int) -> SessionHistory:
    """A page of the session, oldest first. An unknown or foreign session is simply empty."""
    turns = session_turns(scope=scope, session_id=session_id)
    return SessionHistory(
        results=list(turns[offset : offset + limit]), total_count=turns.count(), limit=limit, offset=offset
    )
