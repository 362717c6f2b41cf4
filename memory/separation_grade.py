"""A memory recall's separation grade, `high | medium | low | none`: how far its top hit stands out.

Keyword and hybrid memory recall render it as their envelope's `meta.answer_confidence`. It is not merged recall's
`meta.answer_confidence` (`recall.knowledge_verdict`, `answer | weak | none`): both grade the one ratio
(`loopmem.ranking.separation`), this one in three steps over the whole memory ranking, that one as a yes or no over
the knowledge rows.

The ratio is the top score over the median of the next ones in this query's own ranking. `medium` is where the
knowledge verdict says `answer` (the top at least LOOPMEM_RECALL_ANSWER_SEPARATION, 1.5, times the median); `high`
stands out twice as far; `none` found nothing. It says whether the top hit stands out from its neighbours: on the
evaluation set a `high` top hit holds the evidence far more often than a `low` one, but a question about something
never said, phrased with names that were said, still finds a confident-looking neighbour (docs/quality.md has the
confusion table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from django.conf import settings

from loopmem.ranking.separation import separation

SeparationGrade = Literal["high", "medium", "low", "none"]

# The top score against the median of the next ones: a ranking longer than this says nothing more about the top.
GRADE_DEPTH = 10
HIGH_SEPARATION = 2.0


def separation_grade(ranked_scores: Sequence[float]) -> SeparationGrade:
    """The grade of one query's scores, best first (the whole ranking, not the page the caller asked for)."""
    if not ranked_scores:
        return "none"
    ratio = separation(ranked_scores[:GRADE_DEPTH])
    if ratio is None:
        return "low"
    if ratio >= HIGH_SEPARATION:
        return "high"
    if ratio >= settings.RECALL_ANSWER_SEPARATION:
        return "medium"
    return "low"
