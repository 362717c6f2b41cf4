"""`meta.answer_confidence` of keyword and hybrid memory recall: `high | medium | low | none`.

The knowledge rule (`recall.confidence`), graded: the separation of the top score from the median of the next ones
in this query's own ranking (`loopmem.ranking.separation`). `medium` is the knowledge rule's "answer" (the top at least
LOOPMEM_RECALL_ANSWER_SEPARATION, 1.5, times the median); `high` stands out twice as far; `none` found nothing. It
says whether the top hit stands out from its neighbours: on the evaluation set a `high` top hit holds the evidence
far more often than a `low` one, but a question about something never said, phrased with names that were said,
still finds a confident-looking neighbour (docs/quality.md has the confusion table).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from loopmem.ranking.separation import separation

# The top score against the median of the next ones: a ranking longer than this says nothing more about the top.
CONFIDENCE_DEPTH = 10
HIGH_SEPARATION = 2.0


def answer_confidence(ranked_scores: Sequence[float]) -> str:
    """The verdict for one query's scores, best first (the whole ranking, not the page the caller asked for)."""
    if not ranked_scores:
        return "none"
    ratio = separation(ranked_scores[:CONFIDENCE_DEPTH])
    if ratio is None:
        return "low"
    if ratio >= HIGH_SEPARATION:
        return "high"
    if ratio >= settings.RECALL_ANSWER_SEPARATION:
        return "medium"
    return "low"
