"""`answer_confidence` (reference §4.9, newest version): are the knowledge rows answers, or just neighbours?

Semantic search has no no-answer mode, so the verdict is the separation of the top knowledge score from the
rest within this query's own rows (`loopmem.ranking.separation`), never an absolute threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from loopmem.ranking.separation import separation


def answer_confidence(
    *, knowledge_scores: Sequence[float | None], knowledge_ids: Sequence[str], curated_article_id: str | None
) -> str:
    """`answer` | `weak` | `none`, from the merged (post-cap) knowledge rows only."""
    if not knowledge_ids:
        return "none"
    if curated_article_id is not None and curated_article_id in knowledge_ids:
        return "answer"
    ratio = separation(knowledge_scores)
    if ratio is not None and ratio >= settings.RECALL_ANSWER_SEPARATION:
        return "answer"
    return "weak"  # a single score, or a zero median, is weak: nothing to separate from
