"""Merged recall's envelopes (reference §2.7): merged items, the untouched per-source envelopes, the ledger meta."""

from __future__ import annotations

from typing import Any, TypedDict

from knowledge import envelopes as knowledge_envelopes
from loopmem.http.outcome import outcome_for
from memory import envelopes as memory_envelopes
from recall.services import MergedItem, RecallContext, Referenced


def recall(context: RecallContext) -> dict[str, Any]:
    """The /recall body (reference §2.7): merged items, the untouched per-source envelopes, and the ledger meta."""
    knowledge = context.knowledge
    searched = knowledge.result
    memory_envelope = memory_envelopes.recall(context.memory)
    # The merged memory items are hits of the memory half: reuse its rendered rows.
    serialized = {
        str(hit.memory.id): row["memory"] for hit, row in zip(context.memory.hits, memory_envelope["data"], strict=True)
    }
    data = [_item(item, serialized) for item in context.items]
    knowledge_envelope = _knowledge_envelope(context)
    meta: dict[str, Any] = {
        "query": context.query,
        "project_id": str(context.project_id) if context.project_id else None,
        "total_count": len(data),
        "memory_count": len(context.memory_items),
        "knowledge_count": len(knowledge.selected),
        "degraded": context.degraded,
        "degraded_reason": context.degraded_reason,
        "search_mode": context.search_mode,
        "results_ranking": "heuristic_cross_source",
        # The knowledge verdict; the `memory` envelope's own `answer_confidence` is its separation grade.
        "answer_confidence": context.knowledge_verdict,
        "recall_id": str(context.recall_id),
        "candidates_considered": {
            "memory": len(context.memory_items),
            "knowledge": len(knowledge.pool),
            "total": len(context.memory_items) + len(knowledge.pool),
        },
        "selected_count": len(data),
        "tokens_selected": context.tokens_selected,
        "tokens_candidates": context.tokens_candidates,
        "tokens_saved_vs_candidates": max(context.tokens_candidates - context.tokens_selected, 0),
        "diversity": knowledge.diversity.as_meta() if knowledge.diversity else None,
        # From the knowledge half's search (null when it could not run); no importance priors rank it, as in
        # knowledge search's meta.
        "provenance": searched.provenance if searched else None,
        "confidence": searched.confidence if searched else None,
        "importance_strength": None,
    }
    # The outcome reads both halves' reasons: the memory half's `reason` and the knowledge half's fallback.
    meta["outcome"] = outcome_for(
        {**meta, "reason": context.memory.reason, "fallback_reason": knowledge.fallback_reason}, count=len(data)
    )
    return {"data": data, "memory": memory_envelope, "knowledge": knowledge_envelope, "meta": meta}


def _item(item: MergedItem, serialized_memories: dict[str, Any]) -> dict[str, Any]:
    common = {
        "source": item.source,
        "score": item.score,
        "rank": item.rank,
        "selection_reason": item.selection_reason,
        "tokens_estimate": item.tokens_estimate,
    }
    if item.memory is not None:
        found = serialized_memories.get(item.id)
        return {**common, "memory": found if found is not None else memory_envelopes.memory_data(item.memory)}
    assert item.hit is not None
    article = item.hit.article
    summary = {
        "id": str(article.id),
        "title": article.title,
        "category": article.category,
        "tags": list(article.tags),
        "score": item.score,
        "snippet": getattr(article, "snippet", ""),
    }
    return {**common, "article": summary}


def _knowledge_envelope(context: RecallContext) -> dict[str, Any]:
    """The diversified SELECTED set (≤ limit), with the search meta plus `degraded`; `limit` is the caller's."""
    knowledge = context.knowledge
    if knowledge.result is None:
        meta: dict[str, Any] = {
            "total_count": 0,
            "limit": context.limit,
            "offset": 0,
            "degraded": True,
            "fallback": True,
            "fallback_reason": knowledge.fallback_reason,
            "search_id": str(context.recall_id),
        }
        meta["outcome"] = outcome_for(meta, count=0)
        return {"data": [], "meta": meta}
    searched = knowledge_envelopes.search(knowledge.result)
    scores = {item.id: item.score for item in knowledge.selected}
    rows = [
        {**row, "score": scores[row["id"]]}
        for row in sorted(
            (row for row in searched["data"] if row["id"] in scores),
            key=lambda row: (-(scores[row["id"]] or 0.0), row["id"]),
        )
    ]
    meta = {**searched["meta"], "limit": context.limit, "degraded": knowledge.degraded}
    meta["diversity"] = knowledge.diversity.as_meta() if knowledge.diversity else None
    meta["outcome"] = outcome_for(meta, count=len(rows))
    return {"data": rows, "meta": meta}


class ReferencedData(TypedDict):
    recall_id: str
    article_ids: list[str]
    recorded: int


class ReferencedEnvelope(TypedDict):
    data: ReferencedData


def referenced(recorded: Referenced) -> ReferencedEnvelope:
    """The /recall/:recall_id/referenced body (reference §2.8): the recall, the ids recorded, and how many."""
    return {
        "data": {
            "recall_id": str(recorded.recall_id),
            "article_ids": recorded.article_ids,
            "recorded": recorded.recorded,
        }
    }
