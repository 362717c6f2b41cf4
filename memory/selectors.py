"""Long-term memory reads: recall by meaning (index-safe, complete), the ILIKE fallback, and lists."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import ExpressionWrapper, FloatField, QuerySet, Value
from django.utils import timezone
from pgvector.django import CosineDistance

from loopmem import embeddings, heavy_read
from loopmem.models import Tenant
from loopmem.params import clamp
from loopmem.scope import Scope
from memory.candidates import HEAVY_COLUMNS, recall_candidates
from memory.models import Memory, SessionTurn

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
    answer_confidence: str | None = None

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
    *, scope: Scope, tenant: Tenant, query: str, limit: int | None = None, include_superseded: bool = False
) -> RecallResult:
    """Recall the subject's memories nearest in meaning to `query`; degrade to ILIKE if embedding fails."""
    k = recall_k(limit)
    embedding = embeddings.embed_query(tenant, query)
    if isinstance(embedding, embeddings.EmbeddingDimensionMismatch):
        return RecallResult(hits=[], k=k, fallback=True, reason="embedding_dimension_mismatch")
    if isinstance(embedding, embeddings.EmbeddingFailure):
        return recall_fallback(
            scope=scope, query=query, k=k, include_superseded=include_superseded, reason=embedding.tag
        )
    return recall_by_vector(
        scope=scope,
        vector=embedding.vector,
        model_id=embedding.model_id,
        k=k,
        include_superseded=include_superseded,
    )


def _candidates(scope: Scope, model_id: str, *, include_superseded: bool) -> QuerySet[Memory]:
    # Vectors of another model are never compared: their distances would mean nothing.
    return recall_candidates(scope, include_superseded=include_superseded).filter(
        embedding__isnull=False, embedding_model=model_id
    )


def recall_by_vector(
    *,
    scope: Scope,
    vector: list[float],
    model_id: str,
    k: int,
    include_superseded: bool = False,
    path: str = "auto",
    session: heavy_read.ScopedSession | None = None,
) -> RecallResult:
    """Index-safe kNN inside the scope (DESIGN §5): complete for every subject size up to the quota.

    A subject with at most RECALL_EXACT_MAX_ROWS rows is read exactly: a btree-scoped scan sorted by true
    distance. A larger one is read through HNSW with the subject *inside* an iterative scan, re-ranked, and
    verified: if it comes back short, the exact read answers instead. `path` forces a read for benchmarks and
    tests: "exact", "ann" (verified), "ann_only" (unverified), "ann_post_filter" (the reference's: no iterative
    scan, unverified). `session`: read inside one the caller holds (hybrid recall reads both lanes in one).
    """
    candidates = _candidates(scope, model_id, include_superseded=include_superseded)
    opened = (
        heavy_read.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id)
        if session is None
        else contextlib.nullcontext(session)
    )
    with opened as session:
        if include_superseded:
            # Superseded rows are not in the partial HNSW index: the exact, bounded read serves them.
            return _result(session.fetch(_exact(candidates, vector, k)), k, recall_path="exact")
        if path == "auto":
            subject_rows = session.count(Memory.objects.for_scope(scope))
            path = "exact" if subject_rows <= settings.RECALL_EXACT_MAX_ROWS else "ann"
        if path == "exact":
            return _result(session.fetch(_exact(candidates, vector, k)), k, recall_path="exact")
        applied = session.configure(
            heavy_read.ReadOptions(
                ef_search=settings.HNSW_EF_SEARCH,
                iterative_scan=path in ("ann", "ann_only"),
                max_scan_tuples=settings.HNSW_MAX_SCAN_TUPLES,
            )
        )
        pool = pool_size(k, with_project=scope.project_id is not None)
        ann = candidates.annotate(distance=CosineDistance("embedding", vector)).order_by("distance")[:pool]
        rows = sorted(session.fetch(ann), key=lambda m: (m.distance, m.id))[:k]  # type: ignore[attr-defined]
        if len(rows) < k and path == "ann":
            # Verified fill: HNSW came back short, so let the exact read decide what exists.
            exact_rows = session.fetch(_exact(candidates, vector, k))
            if len(exact_rows) > len(rows):
                return _result(exact_rows, k, recall_path="exact")
        return _result(
            rows,
            k,
            recall_path="ann",
            ann_iterative_scan=applied.iterative_scan,
            ann_iterative_scan_reason=applied.iterative_scan_reason,
        )


def _exact(candidates: QuerySet[Memory], vector: list[float], k: int) -> QuerySet[Memory]:
    # "+ 0" makes the sort key an expression the HNSW index cannot serve, so the planner never swaps in an
    # approximate, post-filtered index scan: this read is exact by construction.
    distance = ExpressionWrapper(CosineDistance("embedding", vector) + Value(0.0), output_field=FloatField())
    return candidates.annotate(distance=distance).order_by("distance", "id")[:k]


def _result(rows: Sequence[Memory], k: int, **meta: Any) -> RecallResult:
    similarities = [max(0.0, 1.0 - m.distance) for m in rows]  # type: ignore[attr-defined]
    hits = [RecallHit(memory=m, score=s, semantic=s) for m, s in zip(rows, similarities, strict=True)]
    return RecallResult(hits=hits, k=k, **meta)


def recall_fallback(*, scope: Scope, query: str, k: int, include_superseded: bool, reason: str) -> RecallResult:
    """Embedding is unavailable: substring match in the same scope, newest first, no scores (reference §4.4)."""
    rows = recall_candidates(scope, include_superseded=include_superseded)
    if query != "":
        rows = rows.filter(text__icontains=query)  # Django escapes %, _ and \\ in the pattern
    rows = rows.newest_first()[:k]
    with heavy_read.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id) as session:
        found = session.fetch(rows)
    return RecallResult(hits=[RecallHit(memory=m, score=None) for m in found], k=k, fallback=True, reason=reason)


def memory_list(*, scope: Scope, include_superseded: bool = False, source: str | None = None) -> QuerySet[Memory]:
    """The subject's memories, newest first (reference §2.3: not filtered by project)."""
    return _listing(Memory.objects.for_scope(scope), include_superseded=include_superseded, source=source)


def memory_list_all_subjects(
    *, tenant_id: Any, include_superseded: bool = False, source: str | None = None
) -> QuerySet[Memory]:
    """Superadmin oversight: every subject of the tenant."""
    return _listing(Memory.objects.for_tenant(tenant_id), include_superseded=include_superseded, source=source)


def _listing(rows: QuerySet[Memory], *, include_superseded: bool, source: str | None) -> QuerySet[Memory]:
    if not include_superseded:
        rows = rows.filter(superseded_by__isnull=True)
    if source in Memory.Source.values:
        rows = rows.filter(source=source)
    return rows.defer(*HEAVY_COLUMNS).order_by("-inserted_at", "-id")


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
