"""Hybrid recall's fusion: a weighted sum of the two lanes' scores, each divided by its best in this query, plus
the session context a memory inherits from the one written just before it.

    own(m)   = w * semantic(m) / max semantic  +  (1 - w) * keyword(m) / max keyword
    score(m) = (q(m) * own(m) + c * own(previous(m))) / (1 + c)   in [0, 1]

q(m) is 1, or the question share when m is a question (its text ends with a question mark): a question matches a
question in both lanes, yet holds its answer only rarely; the answer is the memory after it, which still inherits
the question's whole own score.

When the query names days, own(m) also weighs how close m's event days come to them (`memory.time_lane`):
own(m) = (w * ... + (1 - w) * ... + t * time(m) / max time) / (1 + t).

(a keyword lane that found none of the query's terms in m adds 0; a memory not embedded yet, which the semantic
lane cannot score, is ranked by its keyword share alone, as degraded hybrid ranks every memory).
Dividing each lane by its best score keeps either lane's scale out of the mix: a small embedder's cosine
similarities sit near 0.3 while keyword coverage reaches 1, so w = 0.5 weighs the lanes equally whatever the
embedder. previous(m) is the memory written just before m in the same session (`source_session_id`): in memories
taken from a conversation a reply ("Dana Whitfield, the animation director.") says little without the turn it
answers ("Who is your boss at Lumen Forge?"). Both choices, and the weighted sum over reciprocal-rank fusion, were
made by measurement (docs/quality.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class LaneScores:
    """One candidate: each lane's own figure (None where that lane has none) and its predecessor in its session."""

    id: uuid.UUID
    semantic: float | None  # cosine similarity; None: not embedded with the query's model
    keyword: float | None  # keyword query coverage; None: holds none of the query's terms
    previous_id: uuid.UUID | None = None
    time: float | None = None  # closeness of its event days to the days the query names; None: it names none
    asks: bool = False  # its text is a question (`memory.hybrid_lanes.AsksQuestion`)


@dataclass(frozen=True)
class FusionWeights:
    semantic: float  # w: the semantic lane's share of a row's own score
    context: float  # c: the share inherited from the previous memory of the session
    time: float = 0.0  # t: the weight of the time lane, when the query names days
    question: float = 1.0  # q: the share of its own score a question keeps in its own rank


def fuse(candidates: Iterable[LaneScores], weights: FusionWeights) -> list[tuple[uuid.UUID, float]]:
    """(id, score) for every candidate, best first; ties by id, so an unchanged corpus ranks identically."""
    rows = list(candidates)
    best_semantic = max((row.semantic for row in rows if row.semantic is not None), default=0.0)
    best_keyword = max((row.keyword for row in rows if row.keyword is not None), default=0.0)
    best_time = max((row.time for row in rows if row.time is not None), default=0.0)
    timed = best_time > 0

    def share(value: float | None, best: float) -> float:
        return value / best if value is not None and best > 0 else 0.0

    def by_content(row: LaneScores) -> float:
        if row.semantic is None:
            # Not embedded yet (read-your-writes): the keyword lane is the only judge it has, as in degraded hybrid.
            return share(row.keyword, best_keyword)
        return weights.semantic * share(row.semantic, best_semantic) + (1.0 - weights.semantic) * share(
            row.keyword, best_keyword
        )

    def own_score(row: LaneScores) -> float:
        if not timed:
            return by_content(row)
        return (by_content(row) + weights.time * share(row.time, best_time)) / (1.0 + weights.time)

    own = {row.id: own_score(row) for row in rows}

    def inherited(row: LaneScores) -> float:
        # A predecessor outside the candidates scored too low in both lanes to have been fetched: it adds nothing.
        return own.get(row.previous_id, 0.0) if row.previous_id is not None else 0.0

    def ranked_own(row: LaneScores) -> float:
        return own[row.id] * weights.question if row.asks else own[row.id]

    fused = [(row.id, (ranked_own(row) + weights.context * inherited(row)) / (1.0 + weights.context)) for row in rows]
    return sorted(fused, key=lambda pair: (-pair[1], str(pair[0])))
