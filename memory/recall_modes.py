"""Memory recall by mode: `semantic` (by meaning; today's read, `memory.selectors.memory_recall`), `keyword` (what
was typed; `memory.keyword_lane`) and `hybrid` (both, fused; `memory.fusion`).

Keyword and hybrid read every lane inside one guarded, (tenant, subject) scoped heavy-read session, from the one
candidate set every lane shares (`memory.candidates`). The keyword lane needs no embedding, so a memory is found
the moment it is written, before the worker embeds it, and while the worker is down. When the query cannot be
embedded, hybrid degrades to the keyword lane (`fallback`, the reason tag, `lane_lost: "semantic"`).

Hybrid, step by step: each lane ranks its best `lane_pool(k)` candidates; every candidate of either pool, and the
memory written just after it in its session, is then scored exactly by both lanes (so fusion never guesses a score a
lane could give); the fused ranking is cut at k.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Literal

from django.conf import settings
from django.db.models import Case, F, FloatField, Q, QuerySet, Value, When, Window
from django.db.models.functions import Lag
from pgvector.django import CosineDistance

from loopmem import embeddings, heavy_read
from loopmem.embeddings import EmbeddingFailure, QueryEmbedding
from loopmem.models import Tenant
from loopmem.scope import Scope
from memory import fusion, keyword_lane
from memory.answer_confidence import answer_confidence
from memory.candidates import recall_candidates
from memory.models import Memory
from memory.selectors import RecallHit, RecallResult, memory_recall, recall_by_vector, recall_k

RecallMode = Literal["semantic", "keyword", "hybrid"]
RECALL_MODES: tuple[RecallMode, ...] = ("semantic", "keyword", "hybrid")
DEFAULT_MODE: RecallMode = "semantic"  # the HTTP default: today's envelope, byte for byte
LANE_POOL_FLOOR = 30


def lane_pool(k: int) -> int:
    """How many candidates each lane contributes to the fusion for k results."""
    return max(LANE_POOL_FLOOR, 2 * k)


def memory_recall_in_mode(
    *,
    scope: Scope,
    tenant: Tenant,
    query: str,
    limit: int | None = None,
    include_superseded: bool = False,
    mode: RecallMode = DEFAULT_MODE,
) -> RecallResult:
    """POST /memory/recall: the subject's memories for `query`, read the way `mode` says."""
    if mode == "semantic":
        return memory_recall(
            scope=scope, tenant=tenant, query=query, limit=limit, include_superseded=include_superseded
        )
    embedding = embeddings.embed_query(tenant, query) if mode == "hybrid" else None
    return recall_lanes(
        scope=scope,
        query=query,
        k=recall_k(limit),
        include_superseded=include_superseded,
        mode=mode,
        embedding=embedding,
    )


def recall_lanes(
    *,
    scope: Scope,
    query: str,
    k: int,
    include_superseded: bool,
    mode: Literal["keyword", "hybrid"],
    embedding: QueryEmbedding | EmbeddingFailure | None,
) -> RecallResult:
    """Keyword or hybrid recall; `embedding` is the caller's attempt at embedding `query` (hybrid only)."""
    candidates = recall_candidates(scope, include_superseded=include_superseded)
    pool = lane_pool(k)
    with heavy_read.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id) as session:
        keywords = keyword_lane.keyword_query(session, candidates, query)
        keyword_rows = keyword_lane.keyword_rank(session, candidates, keywords, pool)
        if mode == "keyword" or not isinstance(embedding, QueryEmbedding):
            result = _keyword_result(keyword_rows, k, mode=mode)
            if isinstance(embedding, EmbeddingFailure):
                result.fallback, result.reason, result.lane_lost = True, embedding.tag, "semantic"
            return result
        semantic = recall_by_vector(
            scope=scope,
            vector=embedding.vector,
            model_id=embedding.model_id,
            k=pool,
            include_superseded=include_superseded,
            session=session,
        )
        pooled = _unique([*(hit.memory for hit in semantic.hits), *keyword_rows])
        scored = _score_pool(session, candidates, pooled, keywords, embedding)
    ranked = fusion.fuse(scored.lanes.values(), _weights())
    hits = [
        RecallHit(
            memory=scored.rows[memory_id],
            score=score,
            semantic=scored.lanes[memory_id].semantic,
            keyword=scored.lanes[memory_id].keyword,
        )
        for memory_id, score in ranked[:k]
    ]
    return RecallResult(
        hits=hits,
        k=k,
        recall_path=semantic.recall_path,
        ann_iterative_scan=semantic.ann_iterative_scan,
        ann_iterative_scan_reason=semantic.ann_iterative_scan_reason,
        mode=mode,
        lane_counts={"semantic": len(semantic.hits), "keyword": len(keyword_rows)},
        answer_confidence=answer_confidence([score for _, score in ranked]),
    )


def _weights() -> fusion.FusionWeights:
    return fusion.FusionWeights(
        semantic=settings.RECALL_HYBRID_SEMANTIC_WEIGHT, context=settings.RECALL_HYBRID_CONTEXT_WEIGHT
    )


def _keyword_result(rows: list[Memory], k: int, *, mode: str) -> RecallResult:
    scores = [float(row.keyword_score) for row in rows]  # type: ignore[attr-defined]  # annotated by keyword_rank
    hits = [RecallHit(memory=row, score=score, keyword=score) for row, score in zip(rows[:k], scores, strict=False)]
    return RecallResult(
        hits=hits, k=k, mode=mode, lane_counts={"keyword": len(rows)}, answer_confidence=answer_confidence(scores)
    )


def _unique(rows: Iterable[Memory]) -> list[Memory]:
    return list({row.id: row for row in rows}.values())


class ScoredPool:
    """Candidates with both lanes' exact figures and their session predecessors, ready for fusion."""

    def __init__(self) -> None:
        self.rows: dict[uuid.UUID, Memory] = {}
        self.lanes: dict[uuid.UUID, fusion.LaneScores] = {}

    def add(self, row: Memory, previous_id: uuid.UUID | None = None) -> None:
        distance = row.distance  # type: ignore[attr-defined]  # annotated by _with_lane_scores
        coverage = row.keyword_score  # type: ignore[attr-defined]
        self.rows[row.id] = row
        self.lanes[row.id] = fusion.LaneScores(
            id=row.id,
            semantic=None if distance is None else max(0.0, 1.0 - float(distance)),
            keyword=float(coverage) if coverage else None,  # 0: the row holds no term of the query
            previous_id=previous_id,
        )


def _score_pool(
    session: heavy_read.ScopedSession,
    candidates: QuerySet[Memory],
    pooled: list[Memory],
    keywords: keyword_lane.KeywordQuery | None,
    embedding: QueryEmbedding,
) -> ScoredPool:
    """Both lanes' figures for every pooled row and for the memory written just after each in its session.

    Two reads: the pooled rows themselves, and the rows whose predecessor in their session is a pooled row
    (which links pooled rows to each other too). The predecessor is taken among the candidates, so a
    superseded or out-of-partition memory never passes context on.
    """
    pooled_ids = [row.id for row in pooled]
    scored = ScoredPool()
    for row in session.fetch(_with_lane_scores(candidates.filter(id__in=pooled_ids), keywords, embedding)):
        scored.add(row)
    sessions = {row.source_session_id for row in pooled if row.source_session_id}
    if sessions:
        following = (
            candidates.filter(source_session_id__in=sorted(sessions))
            .annotate(
                previous_id=Window(
                    Lag("id"), partition_by=[F("source_session_id")], order_by=[F("inserted_at").asc(), F("id").asc()]
                )
            )
            .filter(previous_id__in=pooled_ids)
        )
        for row in session.fetch(_with_lane_scores(following, keywords, embedding)):
            scored.add(row, previous_id=row.previous_id)  # type: ignore[attr-defined]
    return scored


def _with_lane_scores(
    rows: QuerySet[Memory], keywords: keyword_lane.KeywordQuery | None, embedding: QueryEmbedding
) -> QuerySet[Memory]:
    """`distance` (NULL unless embedded with the query's model) and `keyword_score` (0 if no term is held)."""
    embedded = Q(embedding__isnull=False, embedding_model=embedding.model_id)
    distance = Case(When(embedded, then=CosineDistance("embedding", embedding.vector)), output_field=FloatField())
    coverage = keywords.coverage() if keywords is not None else Value(0.0, output_field=FloatField())
    return rows.annotate(distance=distance, keyword_score=coverage)
