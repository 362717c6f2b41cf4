"""Memory recall by mode: `semantic` (by meaning; `memory.selectors.memory_recall`), `keyword` (what
was typed; `memory.keyword_lane`), `hybrid` (both, fused; `memory.fusion`) and `deep` (hybrid, then a second hop
to the memories that complete its best hits; `memory.second_hop`).

Keyword and hybrid read every lane inside one guarded, (tenant, subject) scoped heavy-read session, from the one
candidate set every lane shares (`memory.candidates`). The keyword lane needs no embedding, so a memory is found
the moment it is written, before the worker embeds it, and while the worker is down. When the query cannot be
embedded, hybrid degrades to the keyword lane (`fallback`, the reason tag, `lane_lost: "semantic"`).

Hybrid, step by step (`memory.hybrid_lanes`): each lane's best `lane_pool(k)` candidates, every one scored in both
lanes; the memory written just after each in its session joins them, scored the same way; `memory.fusion` ranks
them; deep reranks them after its hop; the page is cut at k and only its memories are loaded.
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings

from loopmem.embedding import embedders
from loopmem.embedding.embedders import EmbeddingFailure, QueryEmbedding
from loopmem.models import Tenant
from loopmem.reads import scoped
from loopmem.tenancy.scope import Scope
from memory import fusion, hybrid_lanes, keyword_lane, second_hop, time_lane
from memory.candidates import CandidateSet
from memory.filters import MemoryFilters
from memory.models import Memory
from memory.selectors import RecallHit, RecallResult, memory_recall, recall_k
from memory.separation_grade import GRADE_DEPTH, separation_grade

RecallMode = Literal["semantic", "keyword", "hybrid", "deep"]
RECALL_MODES: tuple[RecallMode, ...] = ("semantic", "keyword", "hybrid", "deep")
DEFAULT_MODE: RecallMode = "semantic"  # the HTTP default: the reference's envelope, byte for byte
# Each lane's pool only chooses the candidates: every candidate is scored exactly by both lanes, so a pool of 10 to
# 100 gave the same evaluation figures (docs/quality.md); 20 keeps the reads small.
LANE_POOL_FLOOR = 20


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
    filters: MemoryFilters | None = None,
) -> RecallResult:
    """POST /memory/recall: the subject's memories for `query`, read the way `mode` says, inside the filters."""
    if mode == "semantic":
        return memory_recall(
            scope=scope,
            tenant=tenant,
            query=query,
            limit=limit,
            include_superseded=include_superseded,
            filters=filters,
        )
    embedding = embedders.embed_query(tenant, query) if mode in ("hybrid", "deep") else None
    return recall_lanes(
        scope=scope,
        query=query,
        k=recall_k(limit),
        include_superseded=include_superseded,
        mode=mode,
        embedding=embedding,
        filters=filters,
    )


def recall_lanes(
    *,
    scope: Scope,
    query: str,
    k: int,
    include_superseded: bool,
    mode: Literal["keyword", "hybrid", "deep"],
    embedding: QueryEmbedding | EmbeddingFailure | None,
    filters: MemoryFilters | None = None,
) -> RecallResult:
    """Keyword, hybrid or deep recall; `embedding` is the caller's attempt at embedding `query` (hybrid and deep)."""
    candidates = CandidateSet(scope, include_superseded=include_superseded, filters=filters)
    with scoped.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id) as session:
        if mode == "keyword" or not isinstance(embedding, QueryEmbedding):
            # The keyword lane alone: k rows, and enough to judge the top one's separation.
            by_words = keyword_lane.keyword_rank(session, candidates.rows, query, max(k, GRADE_DEPTH))
            result = _keyword_result(by_words, k, mode=mode)
            if isinstance(embedding, EmbeddingFailure):
                result.fallback, result.reason, result.lane_lost = True, embedding.tag, "semantic"
            return result
        terms = keyword_lane.query_terms(query)
        hybrid = hybrid_lanes.read_pool(
            session,
            candidates=candidates,
            terms=terms,
            embedding=embedding,
            pool=lane_pool(k),
            asked=time_lane.asked_spans(query),
        )
        ranked = fusion.fuse(hybrid.lanes(), _weights())
        # The verdict reads hybrid's fusion: the hop lifts its seeds by their own terms, so deep's scores would make
        # nearly every top hit stand out.
        grade = separation_grade([score for _, score in ranked])
        if mode == "deep":
            ranked = second_hop.rerank(
                session, candidates.rows, hybrid, ranked, query_terms=terms, embedding=embedding, weights=_weights()
            )
        page = ranked[:k]
        memories = hybrid_lanes.load_rows(session, candidates, hybrid, [memory_id for memory_id, _ in page])
        page = [(memory_id, score) for memory_id, score in page if memory_id in memories]
    hits = [
        RecallHit(
            memory=memories[memory_id],
            score=score,
            semantic=hybrid.semantic.get(memory_id),
            keyword=hybrid.keyword.get(memory_id),
            time=hybrid.time.get(memory_id, 0.0) if hybrid.asked else None,
            hop=hybrid.hop.get(memory_id, 0.0) if mode == "deep" else None,
        )
        for memory_id, score in page
    ]
    return RecallResult(
        hits=hits,
        k=k,
        recall_path=hybrid.recall_path,
        ann_iterative_scan=hybrid.ann_iterative_scan,
        ann_iterative_scan_reason=hybrid.ann_iterative_scan_reason,
        mode=mode,
        lane_counts=hybrid.lane_counts,
        separation_grade=grade,
        asked_days=[(span.start, span.end) for span in hybrid.asked] or None,
    )


def _weights() -> fusion.FusionWeights:
    return fusion.FusionWeights(
        semantic=settings.RECALL_HYBRID_SEMANTIC_WEIGHT,
        context=settings.RECALL_HYBRID_CONTEXT_WEIGHT,
        time=settings.RECALL_HYBRID_TIME_WEIGHT,
        question=settings.RECALL_HYBRID_QUESTION_SHARE,
    )


def _keyword_result(ranked: list[tuple[Memory, float]], k: int, *, mode: str) -> RecallResult:
    hits = [RecallHit(memory=row, score=score, keyword=score) for row, score in ranked[:k]]
    scores = [score for _, score in ranked]
    return RecallResult(
        hits=hits, k=k, mode=mode, lane_counts={"keyword": len(hits)}, separation_grade=separation_grade(scores)
    )
