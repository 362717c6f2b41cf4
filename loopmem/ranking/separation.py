"""How far the top score stands out from the rest of one query's ranking: the basis of every answer-confidence rule.

Semantic and fused scores have no absolute "this is an answer" level, so confidence is read from separation within
the query's own rows (reference §4.9), never from an absolute threshold. Merged recall's knowledge verdict
(`recall.knowledge_verdict`) and memory recall's separation grade (`memory.separation_grade`) both read this ratio,
and only this module computes it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def separation(scores: Sequence[float | None]) -> float | None:
    """The top score over the median of the others; None with fewer than two scores or a zero median.

    Rows without a score are left out. A zero median has nothing to separate from, so it decides nothing.
    """
    ranked = sorted((s for s in scores if s is not None), reverse=True)
    if len(ranked) < 2:
        return None
    median = statistics.median(ranked[1:])
    if median <= 0:
        return None
    return ranked[0] / median
