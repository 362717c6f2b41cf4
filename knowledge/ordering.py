"""The order a search hands out its ranked pool: the curated winner pinned first, then diversity.

Knowledge search uses both; merged recall reads the curated winner (for its knowledge verdict,
`recall.knowledge_verdict`) and reduces its pool with the same selector and scores, pinning nothing (reference §4.6,
§4.7; `agent-memory.md` on hybrid search):

- **Curated**: when one article is clearly *the* answer (its semantic similarity reaches
  KNOWLEDGE_CURATED_THRESHOLD and leads every other hit's by KNOWLEDGE_CURATED_MARGIN), the search's provenance is
  `curated` and that article is pinned first, so `provenance == "curated"` guarantees the first row is it; otherwise
  the provenance is `retrieved`. Rank fusion alone cannot promise that: RRF ranks by rank, and a keyword lane can put
  a weaker match first.
- **Diversity**: the one selector (knowledge.diversity.select), fed each hit's absolute score (a similarity or a
  squashed keyword relevance: RRF's rank scores are too close together to weigh against a similarity) and its
  stored vector. Search REORDERS its pool with it: the first `pool_size(limit)` hits are put in selection order,
  the hits past that window keep their rank, and what the selection dropped (duplicates) goes last; so paging
  one query still partitions the pool. Merged recall REDUCES its pool with it (recall.services).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from knowledge.diversity import Candidate, DiversityConfig, DiversityStats, select
from knowledge.hits import SearchHit
from knowledge.vectors import article_vector


@dataclass(frozen=True)
class Curated:
    """The search's provenance, its governed answer (when curated), and the confidence in its best hit."""

    provenance: str | None  # curated | retrieved; None when nothing was found
    article_id: str | None  # the pinned winner, when curated
    confidence: float | None  # the best hit's absolute score in [0, 1]; None when nothing was found


def curated(hits: Sequence[SearchHit]) -> Curated:
    """Whether one hit is clearly the answer: similarity ≥ the threshold, ahead of the runner-up by the margin."""
    if not hits:
        return Curated(provenance=None, article_id=None, confidence=None)
    confidence = max(absolute_score(hit) for hit in hits)
    similar = sorted((hit for hit in hits if hit.similarity is not None), key=lambda h: -(h.similarity or 0.0))
    if similar:
        best = similar[0].similarity or 0.0
        runner_up = (similar[1].similarity or 0.0) if len(similar) > 1 else 0.0
        if best >= settings.KNOWLEDGE_CURATED_THRESHOLD and best - runner_up >= settings.KNOWLEDGE_CURATED_MARGIN:
            return Curated(provenance="curated", article_id=str(similar[0].article.id), confidence=confidence)
    return Curated(provenance="retrieved", article_id=None, confidence=confidence)


def surfacing_mode(provenance: str | None) -> str:
    """The ledger's bucket for a search's surfacing rows (reference §4.17: retrieval metrics split curated and
    retrieved answers by `metadata.mode`)."""
    return "hybrid_curated" if provenance == "curated" else "hybrid_retrieved"


def absolute_score(hit: SearchHit) -> float:
    """A hit's score on one scale whatever lane found it: the similarity, else the keyword relevance squashed
    as raw / (raw + 1), else 0.0 (reference §4.6, `absolute_result_score`)."""
    if hit.similarity is not None:
        return hit.similarity
    if hit.relevance is not None:
        return hit.relevance / (hit.relevance + 1)
    return 0.0


def pinned_first(hits: list[SearchHit], article_id: str | None) -> list[SearchHit]:
    """`hits` with the curated winner moved to the front (unchanged when there is none)."""
    if article_id is None:
        return hits
    winner = [hit for hit in hits if str(hit.article.id) == article_id]
    return winner + [hit for hit in hits if str(hit.article.id) != article_id]


def candidate(hit: SearchHit, *, score: float, model_id: str | None, with_vector: bool) -> Candidate:
    """The selector's view of a hit: its score, content fingerprint and (when read) its stored vector."""
    found = article_vector(hit.article, model_id=model_id) if with_vector else None
    return Candidate(
        id=str(hit.article.id),
        score=score,
        content_hash=found.content_hash if found else None,
        vector=found.vector if found else None,
    )


def diversified(
    hits: list[SearchHit], *, limit: int, config: DiversityConfig, pinned_id: str | None, model_id: str | None
) -> tuple[list[SearchHit], DiversityStats]:
    """The ranked hits reordered by the selector over the window `config.pool_size(limit)` (see the module doc)."""
    window = hits[: config.pool_size(limit)]
    candidates = [
        candidate(hit, score=absolute_score(hit), model_id=model_id, with_vector=config.enabled) for hit in window
    ]
    pinned = [c for c in candidates if c.id == pinned_id]
    rest = [c for c in candidates if c.id != pinned_id]
    chosen, stats = select(rest, len(window), config, pinned=pinned)
    by_id = {str(hit.article.id): hit for hit in window}
    chosen_ids = {c.id for c in chosen}
    dropped = [hit for hit in window if str(hit.article.id) not in chosen_ids]
    return [by_id[c.id] for c in chosen] + hits[len(window) :] + dropped, stats
