"""What a knowledge search returns: ranked hits and the meta of how they were found and ordered."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from knowledge.diversity import DiversityStats
from knowledge.models import Article


@dataclass
class SearchHit:
    """One ranked article: `score` is what the mode ranks by; the lanes' raw figures ride along."""

    article: Article  # a summary: `article.snippet` holds the first 300 characters of the body
    score: float
    similarity: float | None = None  # max(0, 1 - cosine distance), when the semantic lane found it
    relevance: float | None = None  # ts_rank, when the keyword lane found it
    keyword_rank: int | None = None
    semantic_rank: int | None = None


@dataclass
class SearchResult:
    """One page of a search, plus what the API reports about how it was found."""

    hits: list[SearchHit]
    total_count: int  # the fused ranked list the page was cut from
    limit: int
    offset: int
    search_id: uuid.UUID
    search_mode: str  # keyword | semantic | combined | keyword_only (combined without an embedding)
    fallback: bool = False
    fallback_reason: str | None = None
    pool_capped: bool = False  # a lane filled its pool: more matches may exist past total_count
    semantic_path: str | None = None  # exact | ann, when the semantic lane ran
    ann_iterative_scan: str | None = None  # only when the HNSW index ran
    ann_iterative_scan_reason: str | None = None
    lane_counts: dict[str, int] = field(default_factory=dict)
    provenance: str | None = None  # curated | retrieved (knowledge.ordering); None when nothing was found
    curated_article_id: str | None = None  # the governed answer, pinned first, when curated
    confidence: float | None = None  # the best hit's absolute score
    diversity: DiversityStats | None = None  # when the selector ordered the pool
