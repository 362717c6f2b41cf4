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
        scored = ScoredPool(semantic=semantic.hits, keyword=keyword_rows, pool=pool)
        _fill_lane_scores(session, candidates, scored, keywords, embedding)
        _add_session_context(session, candidates, scored, keywords, embedding)
    ranked = fusion.fuse(scored.lanes(), _weights())
    hits = [
        RecallHit(
            memory=scored.rows[memory_id],
            score=score,
            semantic=scored.semantic.get(memory_id),
            keyword=scored.keyword.get(memory_id),
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


class ScoredPool:
    """The fusion candidates: each lane's pool, every row's figure in both lanes, and session predecessors.

    A lane that returned fewer rows than the pool returned everything it can score: a row missing from it holds
    no term of the query (keyword) or has no vector of the query's model yet (semantic), and that lane's figure for
    it is None. Only a lane cut at the pool leaves figures to fill.
    """

    def __init__(self, *, semantic: list[RecallHit], keyword: list[Memory], pool: int) -> None:
        self.rows: dict[uuid.UUID, Memory] = {}
        self.semantic: dict[uuid.UUID, float] = {}
        self.keyword: dict[uuid.UUID, float] = {}
        self.previous: dict[uuid.UUID, uuid.UUID] = {}
        for hit in semantic:
            self.rows[hit.memory.id] = hit.memory
            self.semantic[hit.memory.id] = hit.semantic or 0.0
        for row in keyword:
            self.rows.setdefault(row.id, row)
            self.keyword[row.id] = float(row.keyword_score)  # type: ignore[attr-defined]  # from keyword_rank
        self.semantic_cut = len(semantic) >= pool
        self.keyword_cut = len(keyword) >= pool

    def unscored(self) -> list[uuid.UUID]:
        """Rows a cut lane may score but did not reach."""
        return [
            row_id
            for row_id in self.rows
            if (self.semantic_cut and row_id not in self.semantic) or (self.keyword_cut and row_id not in self.keyword)
        ]

    def note(self, row_id: uuid.UUID, distance: float | None, coverage: float | None) -> None:
        if distance is not None:
            self.semantic[row_id] = max(0.0, 1.0 - float(distance))
        if coverage:  # 0: the row holds no term of the query
            self.keyword[row_id] = float(coverage)

    def lanes(self) -> list[fusion.LaneScores]:
        return [
            fusion.LaneScores(
                id=row_id,
                semantic=self.semantic.get(row_id),
                keyword=self.keyword.get(row_id),
                previous_id=self.previous.get(row_id),
            )
            for row_id in self.rows
        ]


def _fill_lane_scores(
    session: heavy_read.ScopedSession,
    candidates: QuerySet[Memory],
    scored: ScoredPool,
    keywords: keyword_lane.KeywordQuery | None,
    embedding: QueryEmbedding,
) -> None:
    """Score exactly, in both lanes, the pooled rows a cut lane did not reach (fusion never guesses a figure)."""
    missing = scored.unscored()
    if not missing:
        return
    rows = _with_lane_scores(candidates.filter(id__in=missing).only("id"), keywords, embedding)
    for row in session.fetch(rows):
        scored.note(row.id, row.distance, row.keyword_score)  # type: ignore[attr-defined]


def _add_session_context(
    session: heavy_read.ScopedSession,
    candidates: QuerySet[Memory],
    scored: ScoredPool,
    keywords: keyword_lane.KeywordQuery | None,
    embedding: QueryEmbedding,
) -> None:
    """Link each pooled row to the memory written just after it in its session, adding that memory if new.

    One read: the candidates whose predecessor in their session (by write order) is a pooled row, with both lanes'
    figures. The predecessor is taken among the candidates, so a superseded or out-of-partition memory never passes
    context on, and a memory written without a session has none.
    """
    sessions = sorted({row.source_session_id for row in scored.rows.values() if row.source_session_id})
    if not sessions:
        return
    pooled_ids = list(scored.rows)
    following = (
        candidates.filter(source_session_id__in=sessions)
        .annotate(
            previous_id=Window(
                Lag("id"), partition_by=[F("source_session_id")], order_by=[F("inserted_at").asc(), F("id").asc()]
            )
        )
        .filter(previous_id__in=pooled_ids)
    )
    for row in session.fetch(_with_lane_scores(following, keywords, embedding)):
        scored.previous[row.id] = row.previous_id  # type: ignore[attr-defined]
        if row.id not in scored.rows:
            scored.rows[row.id] = row
            scored.note(row.id, row.distance, row.keyword_score)  # type: ignore[attr-defined]


def _with_lane_scores(
    rows: QuerySet[Memory], keywords: keyword_lane.KeywordQuery | None, embedding: QueryEmbedding
) -> QuerySet[Memory]:
    """`distance` (NULL unless embedded with the query's model) and `keyword_score` (0 if no term is held)."""
    embedded = Q(embedding__isnull=False, embedding_model=embedding.model_id)
    distance = Case(When(embedded, then=CosineDistance("embedding", embedding.vector)), output_field=FloatField())
    coverage = keywords.coverage() if keywords is not None else Value(0.0, output_field=FloatField())
    return rows.annotate(distance=distance, keyword_score=coverage)
