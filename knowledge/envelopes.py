"""Knowledge's response envelopes (reference §2.9), typed; merged recall reuses the search envelope."""

from __future__ import annotations

from typing import Any, TypedDict

from knowledge.hits import SearchResult
from knowledge.models import Article
from knowledge.serializers import ArticleSummaryOut
from loopmem.http.outcome import outcome_for


class SearchHitData(TypedDict):
    id: str
    title: str
    category: str
    tags: list[str]
    score: float
    snippet: str


class SearchEnvelope(TypedDict):
    data: list[SearchHitData]
    meta: dict[str, Any]


def search(result: SearchResult) -> SearchEnvelope:
    """{data: [{id, title, category, tags, score, snippet}], meta} (reference §2.9); the merged recall reuses it.

    `semantic_path` says which read answered the semantic lane; `ann_iterative_scan` is present only when the
    HNSW index ran (the exact read scans no index), as in memory recall. `provenance`, `curated_article_id` and
    `confidence` come from knowledge.ordering; `diversity` is present when the selector ordered the pool.
    """
    data: list[SearchHitData] = [
        {
            "id": str(hit.article.id),
            "title": hit.article.title,
            "category": hit.article.category,
            "tags": list(hit.article.tags),
            "score": hit.score,
            "snippet": hit.article.snippet,  # type: ignore[attr-defined]  # annotated by ArticleQuerySet.summaries
        }
        for hit in result.hits
    ]
    meta: dict[str, Any] = {
        "total_count": result.total_count,
        "limit": result.limit,
        "offset": result.offset,
        "search_mode": result.search_mode,
        "search_id": str(result.search_id),
        "fallback": result.fallback,
        "fallback_reason": result.fallback_reason,
        "pool_capped": result.pool_capped,
        # The reference's scope-count and remediation hints, and its importance priors: loopmem ranks without
        # them (docs/api.md), so they stay null.
        "total_count_scope": None,
        "remediation": None,
        "importance_strength": None,
        "provenance": result.provenance,
        "curated_article_id": result.curated_article_id,
        "confidence": result.confidence,
    }
    if result.diversity is not None:
        meta["diversity"] = result.diversity.as_meta()
    if result.semantic_path is not None:
        meta["semantic_path"] = result.semantic_path
    if result.ann_iterative_scan is not None:
        meta["ann_iterative_scan"] = result.ann_iterative_scan
        if result.ann_iterative_scan_reason:
            meta["ann_iterative_scan_reason"] = result.ann_iterative_scan_reason
    meta["outcome"] = outcome_for(meta, count=len(data), offset=result.offset)
    return {"data": data, "meta": meta}


def proposal(*, verdict: str, created: bool, article: Article | None) -> dict[str, Any]:
    """{data: {verdict, created, article}}: the novelty gate's answer to a proposal (and a graduation)."""
    summary = ArticleSummaryOut(article).data if article is not None else None
    return {"data": {"verdict": verdict, "created": created, "article": summary}}
