"""Merged recall (reference §4.6): memory and knowledge in one ranked, diversified, explained answer.

The query is embedded once and shared by both halves. Knowledge candidates are over-fetched and reduced by the
diversity selector; the merged order is deterministic (score DESC, source, id ASC), so an unchanged corpus renders
a byte-identical list. A half that cannot run degrades; it never turns the call into a 5xx.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from knowledge import ledger, ordering
from knowledge.diversity import DiversityConfig, DiversityStats, select
from knowledge.hits import SearchHit, SearchResult
from knowledge.models import Article
from knowledge.selectors import knowledge_search
from knowledge.visibility import Viewer
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.errors import (
    HeavyReadOverloaded,
    NotSurfaced,
    RecordingFailed,
)
from loopmem.http.outcome import UNRUNNABLE_KNOWLEDGE
from loopmem.models import Tenant
from loopmem.params import clamp
from loopmem.reads import tenant_gate
from loopmem.tenancy.scope import Scope
from memory.filters import MemoryFilters
from memory.models import Memory
from memory.recall_bump import memory_note_recalled
from memory.recall_modes import DEFAULT_MODE, RecallMode, recall_lanes
from memory.selectors import RecallHit, RecallResult, recall_by_vector, recall_fallback
from projects.selectors import project_in_tenant
from recall import history
from recall.knowledge_verdict import KnowledgeVerdict, knowledge_verdict

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 10
MAX_LIMIT = 50


def tokens_estimate(text: str) -> int:
    """ceil(bytes / 4): an estimate of what pasting the text costs, never a tokenizer count."""
    return math.ceil(len(text.encode()) / 4)


@dataclass
class MergedItem:
    """One row of the merged list: a memory or a knowledge article, with its ledger fields."""

    source: str  # "knowledge" | "memory"
    id: str
    score: float | None
    selection_reason: str
    tokens_estimate: int
    memory: Memory | None = None
    hit: SearchHit | None = None
    rank: int = 0

    @property
    def merge_key(self) -> tuple[float, str, str]:
        return (-(self.score or 0.0), self.source, self.id)


@dataclass
class KnowledgeHalf:
    """The knowledge half: the search that ran (or why it could not), and the diversified selection."""

    result: SearchResult | None
    degraded: bool
    fallback_reason: str | None
    pool: list[MergedItem] = field(default_factory=list)
    selected: list[MergedItem] = field(default_factory=list)
    diversity: DiversityStats | None = None


@dataclass
class RecallContext:
    recall_id: uuid.UUID
    query: str
    project_id: uuid.UUID | None
    limit: int
    memory: RecallResult
    knowledge: KnowledgeHalf
    items: list[MergedItem]
    memory_items: list[MergedItem]
    degraded: bool
    degraded_reason: str | None
    search_mode: str | None
    knowledge_verdict: KnowledgeVerdict  # rendered as the envelope's `meta.answer_confidence`
    tokens_selected: int
    tokens_candidates: int


def recall_context(
    *,
    scope: Scope,
    viewer: Viewer,
    tenant: Tenant,
    api_key_id: uuid.UUID,
    query: str,
    limit: int | None = None,
    session_id: str | None = None,
    diversity: dict[str, Any] | None = None,
    filters: MemoryFilters | None = None,
    mode: RecallMode = DEFAULT_MODE,
) -> RecallContext:
    """Run both halves and merge them. `query` is already validated and trimmed by the caller.

    `mode` is how the memory half reads (memory.recall_modes); the knowledge half is always its combined search.
    """
    limit = clamp(limit if limit is not None else DEFAULT_LIMIT, 1, MAX_LIMIT)
    config = DiversityConfig.from_settings(**(diversity or {}))
    recall_id = uuid.uuid4()
    embedding = embedders.embed_query(tenant, query)

    # Both halves' heavy reads under one gate slot: one admission a request, not one a half.
    with tenant_gate.request_slot(scope.tenant_id):
        memory_result = _memory_half(scope, query, limit, embedding, mode, filters)
        memory_note_recalled(tenant_id=scope.tenant_id, result=memory_result, include_superseded=False)
        memory_items = [_memory_item(hit, memory_result) for hit in memory_result.hits]
        # Diversity compares vectors of the query's model only (the tenant's current one if embedding failed).
        model_id = embedding.model_id if isinstance(embedding, QueryEmbedding) else embedders.spec_for(tenant).model_id
        knowledge = _knowledge_half(
            viewer,
            scope,
            query,
            embedding,
            config,
            limit=limit,
            recall_id=recall_id,
            session_id=session_id,
            model_id=model_id,
        )

    eligible = sorted([*memory_items, *knowledge.selected], key=lambda item: item.merge_key)
    merged = eligible[:limit]
    for rank, item in enumerate(merged, start=1):
        item.rank = rank

    surfaced = [item.hit.article for item in merged if item.hit is not None]
    ledger_ok = ledger.access_record_surfacing(
        tenant_id=scope.tenant_id,
        api_key_id=api_key_id,
        search_id=recall_id,
        query=query,
        articles=surfaced,
        project_id=scope.project_id,
        extra_metadata={
            "recall": True,
            "mode": ordering.surfacing_mode(knowledge.result.provenance if knowledge.result else None),
        },
    )
    if config.enabled:
        published = [str(a.id) for a in surfaced if a.status == Article.Status.PUBLISHED]
        history.mark_shown(tenant_id=scope.tenant_id, subject_id=scope.subject_id, session_id=session_id, ids=published)

    degraded_reason, search_mode = _degradation(memory_result, knowledge)
    if not ledger_ok:
        degraded_reason, search_mode = "recall_ledger_unavailable", None
    degraded = (
        knowledge.degraded
        or memory_result.reason in ("embedding_dimension_mismatch", "heavy_read_overloaded")
        or not ledger_ok
    )
    merged_knowledge = [item for item in merged if item.source == "knowledge"]
    return RecallContext(
        recall_id=recall_id,
        query=query,
        project_id=scope.project_id,
        limit=limit,
        memory=memory_result,
        knowledge=knowledge,
        items=merged,
        memory_items=memory_items,
        degraded=degraded,
        degraded_reason=degraded_reason,
        search_mode=search_mode,
        knowledge_verdict=knowledge_verdict(
            knowledge_scores=[item.score for item in merged_knowledge],
            knowledge_ids=[item.id for item in merged_knowledge],
            curated_article_id=knowledge.result.curated_article_id if knowledge.result is not None else None,
        ),
        tokens_selected=sum(item.tokens_estimate for item in merged),
        tokens_candidates=sum(item.tokens_estimate for item in eligible),
    )


def _memory_half(
    scope: Scope,
    query: str,
    k: int,
    embedding: QueryEmbedding | embedders.EmbeddingFailure,
    mode: RecallMode,
    filters: MemoryFilters | None = None,
) -> RecallResult:
    try:
        if mode != "semantic":
            return recall_lanes(
                scope=scope, query=query, k=k, include_superseded=False, mode=mode, embedding=embedding, filters=filters
            )
        if isinstance(embedding, embedders.EmbeddingDimensionMismatch):
            return RecallResult(hits=[], k=k, fallback=True, reason=embedding.tag)
        if isinstance(embedding, embedders.EmbeddingFailure):
            return recall_fallback(
                scope=scope, query=query, k=k, include_superseded=False, reason=embedding.tag, filters=filters
            )
        return recall_by_vector(scope=scope, vector=embedding.vector, model_id=embedding.model_id, k=k, filters=filters)
    except HeavyReadOverloaded:
        # On merged recall a shed read degrades the memory half instead of failing the call.
        shed = RecallResult(hits=[], k=k, fallback=True, reason="heavy_read_overloaded")
        if mode != "semantic":
            shed.mode, shed.lane_counts, shed.separation_grade = mode, {}, "none"
        return shed


def _memory_item(hit: RecallHit, result: RecallResult) -> MergedItem:
    return MergedItem(
        source="memory",
        id=str(hit.memory.id),
        score=hit.score,
        selection_reason=_memory_selection_reason(hit, result),
        tokens_estimate=tokens_estimate(hit.memory.text),
        memory=hit.memory,
    )


def _memory_selection_reason(hit: RecallHit, result: RecallResult) -> str:
    """semantic mode: `semantic` | `ilike_fallback`; keyword, hybrid and deep: which lanes scored the row, like
    knowledge; a row no lane scored came by its session predecessor, or (deep) by the hop."""
    if result.mode == "semantic":
        return "ilike_fallback" if result.fallback else "semantic"
    if result.fallback:
        return "keyword_fallback"  # hybrid without an embedding: the keyword lane alone
    if hit.semantic is not None and hit.keyword is not None:
        return "keyword+semantic"
    if hit.keyword is not None:
        return "keyword"
    if hit.semantic is not None:
        return "semantic"
    if hit.hop:
        return "second_hop"  # neither lane scored it: it shares the best hits' terms
    return "session_context"  # neither lane scored it: it follows a hit in its session


def _knowledge_half(
    viewer: Viewer,
    scope: Scope,
    query: str,
    embedding: QueryEmbedding | embedders.EmbeddingFailure,
    config: DiversityConfig,
    *,
    limit: int,
    recall_id: uuid.UUID,
    session_id: str | None,
    model_id: str,
) -> KnowledgeHalf:
    try:
        result = knowledge_search(
            viewer=viewer,
            query=query,
            mode="combined",
            embedding=embedding,
            project_id=scope.project_id,
            limit=config.pool_size(limit),
            status=Article.Status.PUBLISHED,
            search_id=recall_id,
            vectors=config.enabled,  # for the diversity selection: read with the rows, not by a second query
        )
    except HeavyReadOverloaded:
        return KnowledgeHalf(result=None, degraded=True, fallback_reason="heavy_read_overloaded")
    except Exception:
        logger.exception("knowledge half of recall %s failed", recall_id)
        return KnowledgeHalf(result=None, degraded=True, fallback_reason="request_error")
    half = KnowledgeHalf(result=result, degraded=result.fallback, fallback_reason=result.fallback_reason)
    half.pool = [_knowledge_item(hit, degraded=half.degraded) for hit in result.hits]
    half.selected, half.diversity = _diversify(
        scope, half.pool, config, limit=limit, session_id=session_id, model_id=model_id
    )
    half.selected.sort(key=lambda item: item.merge_key)
    return half


def _knowledge_item(hit: SearchHit, *, degraded: bool) -> MergedItem:
    score = ordering.absolute_score(hit)
    if degraded:
        reason = "keyword_fallback"
    elif hit.relevance is not None and hit.similarity is not None:
        reason = "keyword+semantic"
    elif hit.relevance is not None:
        reason = "keyword"
    elif hit.similarity is not None:
        reason = "semantic"
    else:
        reason = "unscored"
    snippet = getattr(hit.article, "snippet", None)
    return MergedItem(
        source="knowledge",
        id=str(hit.article.id),
        score=score,
        selection_reason=reason,
        tokens_estimate=tokens_estimate(snippet or hit.article.title or ""),
        hit=hit,
    )


def _diversify(
    scope: Scope,
    pool: list[MergedItem],
    config: DiversityConfig,
    *,
    limit: int,
    session_id: str | None,
    model_id: str,
) -> tuple[list[MergedItem], DiversityStats]:
    """The selector reduces the pool to `limit`, containing what the session was already shown. Nothing is pinned
    (reference §4.6 step 6): the curated winner has the top score, so it is chosen first unless the session saw it."""
    ids = [item.id for item in pool]
    seen = history.shown_ids(tenant_id=scope.tenant_id, subject_id=scope.subject_id, session_id=session_id, ids=ids)
    candidates = [
        ordering.candidate(item.hit, score=item.score or 0.0, model_id=model_id, with_vector=config.enabled)
        for item in pool
        if item.hit is not None
    ]
    chosen, stats = select(candidates, limit, config, exclude_ids=seen)
    by_id = {item.id: item for item in pool}
    return [by_id[c.id] for c in chosen], stats


def _degradation(memory: RecallResult, knowledge: KnowledgeHalf) -> tuple[str | None, str | None]:
    """(degraded_reason, search_mode override) by the reference's precedence (§4.6 step 13)."""
    if knowledge.fallback_reason in UNRUNNABLE_KNOWLEDGE:
        return knowledge.fallback_reason, None
    if memory.reason == "embedding_dimension_mismatch":
        return memory.reason, None
    if memory.reason == "heavy_read_overloaded":
        return "heavy_read_overloaded", None
    if knowledge.degraded:
        mode = knowledge.result.search_mode if knowledge.result is not None else None
        return knowledge.fallback_reason or "knowledge_degraded", mode
    return None, None


MAX_REFERENCED = 50


@dataclass(frozen=True)
class Referenced:
    recall_id: uuid.UUID
    article_ids: list[str]
    recorded: int


def recall_referenced(
    *,
    tenant_id: uuid.UUID,
    api_key_id: uuid.UUID,
    recall_id: uuid.UUID,
    article_ids: list[uuid.UUID],
    project_id: uuid.UUID | None = None,
) -> Referenced:
    """Record that the client used articles a recall surfaced (reference §2.8): the third funnel stage.

    A client assertion, so it is bounded: only ids this recall surfaced in the caller's tenant are accepted,
    and any other id refuses the whole call. An unknown or foreign recall surfaced nothing: the same 422.
    """
    wanted = list(dict.fromkeys(str(i) for i in article_ids))
    try:
        surfaced = ledger.surfaced_article_ids(tenant_id=tenant_id, search_id=recall_id)
    except DatabaseError as exc:
        raise RecordingFailed() from exc
    missing = [i for i in wanted if i not in surfaced]
    if missing:
        raise NotSurfaced(
            f"These article ids were not surfaced by recall {recall_id}: {', '.join(missing)}",
            details={"article_ids": missing},
        )
    if project_id is not None and project_in_tenant(tenant_id=tenant_id, project_id=project_id) is None:
        project_id = None  # attribution only: a foreign or unknown project is dropped, never an error
    if not ledger.access_record_referenced(
        tenant_id=tenant_id,
        api_key_id=api_key_id,
        recall_id=recall_id,
        article_ids=[uuid.UUID(i) for i in wanted],
        project_id=project_id,
    ):
        raise RecordingFailed()
    return Referenced(recall_id=recall_id, article_ids=wanted, recorded=len(wanted))
