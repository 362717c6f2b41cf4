"""Merged recall's knowledge verdict, `answer | weak | none` (reference §4.9, newest version): are the knowledge rows
answers, or just neighbours?

Merged recall renders it as its envelope's `meta.answer_confidence`. It is not the `meta.answer_confidence` of a
keyword or hybrid memory recall (`memory.separation_grade`, `high | medium | low | none`), which the merged body
also carries in its `memory` envelope: both read the one ratio (`loopmem.ranking.separation`), this one over the
knowledge rows only. Semantic search has no no-answer mode, so the verdict is the separation of the top knowledge
score from the rest within this query's own rows, never an absolute threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from django.conf import settings

from loopmem.ranking.separation import separation

KnowledgeVerdict = Literal["answer", "weak", "none"]


def knowledge_verdict(
    *, knowledge_scores: Sequence[float | None], knowledge_ids: Sequence[str], curated_article_id: str | None
) -> KnowledgeVerdict:
    """`answer` | `weak` | `none`, from the merged (post-cap) knowledge rows only."""
    if not knowledge_ids:
        return "none"
    if curated_article_id is not None and curated_article_id in knowledge_ids:
        return "answer"
    ratio = separation(knowledge_scores)
    if ratio is not None and ratio >= settings.RECALL_ANSWER_SEPARATION:
        return "answer"
    return "weak"  # a single score, or a zero median, is weak: nothing to separate from
