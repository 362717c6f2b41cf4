"""Deep recall's second hop: the memories that complete what hybrid recall found first.

A question whose answer spans several memories ("which office does the person who replaced Amara's manager work
from?") finds the first part by its own words; the other parts share words with that first part (a name, a flight
number, a ticket), not with the question. So, after hybrid's fusion:

1. the best SEEDS hits are the seeds; their terms (lexemes, the best seed's first and each seed's in the order its
   text says them, the query's own left out, at most `keyword_lane.MAX_QUERY_TERMS`) are the hop's query;
2. the keyword lane ranks the subject's candidates by that query, exactly and in one statement, as it ranks any
   query (`keyword_lane.rank_by_words`: BM25 weights over the candidates, coverage in [0, 1]); its best HOP_POOL
   rows are the linked ones, each with its `link` (that coverage), and those not pooled yet join the pool, scored
   in every lane;
3. every pooled row is fused again and a linked row's score multiplied by (1 + HOP_WEIGHT * link); the whole list
   is then scaled so that its best row keeps hybrid's best score (deep's scores read like hybrid's, in [0, 1]).

Bounded: three reads beyond hybrid's (the seeds' terms, the hop's ranking, the rows it adds), never a walk. A seed
holds its own terms, so it is linked too, and a long best seed can take most of the 32 terms: taking the seeds'
terms in turn instead, and giving the rows the hop adds their session context, were both measured and both lost
on dev (docs/quality.md, "Deep recall"), where the constants were chosen.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.contrib.postgres.fields import ArrayField
from django.db.models import F, Func, QuerySet, TextField

from loopmem.embedding.embedders import QueryEmbedding
from loopmem.reads import scoped
from memory import fusion, hybrid_lanes, keyword_lane
from memory.hybrid_lanes import HybridPool
from memory.models import Memory

SEEDS = 4  # dev plateau: 3 to 5 seeds
HOP_POOL = 20  # the linked rows: a hybrid lane's pool
HOP_WEIGHT = 3.0  # dev plateau 3 to 4; 5 lost single-evidence questions


class _TermsInOrder(Func):
    """The lexemes of the row's text-search vector, in the order the text first says them."""

    template = "ARRAY(SELECT lexeme FROM unnest(%(expressions)s) ORDER BY positions[1], lexeme)"
    output_field = ArrayField(TextField())

    def __init__(self) -> None:
        super().__init__(F("search_vector"))


def rerank(
    session: scoped.ScopedSession,
    candidates: QuerySet[Memory],
    hybrid: HybridPool,
    ranked: list[tuple[uuid.UUID, float]],
    *,
    query_terms: Sequence[str],
    embedding: QueryEmbedding,
    weights: fusion.FusionWeights,
) -> list[tuple[uuid.UUID, float]]:
    """`ranked` (hybrid's fusion of `hybrid`) after the second hop, best first, ties by id."""
    terms = _seed_terms(session, candidates, [memory_id for memory_id, _ in ranked[:SEEDS]], set(query_terms))
    hop_keywords, linked = keyword_lane.rank_by_words(session, candidates, terms, HOP_POOL)
    hybrid.lane_counts["hop"] = len(linked)
    if not linked:
        return ranked
    hybrid.hop = {memory_id: keyword_lane.coverage(hop_keywords, mask) for memory_id, mask in linked}
    added = [memory_id for memory_id in hybrid.hop if memory_id not in hybrid.session_of]
    # They join without session context: a row whose predecessor was pooled is pooled already, as its successor.
    hybrid_lanes.add_scored(session, candidates, hybrid, added, embedding)
    boosted = {
        memory_id: score * (1.0 + HOP_WEIGHT * hybrid.hop.get(memory_id, 0.0))
        for memory_id, score in fusion.fuse(hybrid.lanes(), weights)
    }
    # Scaled so that the best row keeps hybrid's best score: deep's scores read like hybrid's, beside knowledge
    # articles in merged recall too.
    scale = ranked[0][1] / max(boosted.values()) if ranked and max(boosted.values()) > 0 else 0.0
    return sorted(
        ((memory_id, score * scale) for memory_id, score in boosted.items()), key=lambda p: (-p[1], str(p[0]))
    )


def _seed_terms(
    session: scoped.ScopedSession, candidates: QuerySet[Memory], seeds: list[uuid.UUID], asked: set[str]
) -> list[str]:
    """The seeds' lexemes, best seed first and each in text order, without the query's; at most MAX_QUERY_TERMS."""
    if not seeds:
        return []
    rows = dict(
        session.values(candidates.filter(id__in=seeds).annotate(terms=_TermsInOrder()).values_list("id", "terms"))
    )
    terms: list[str] = []
    for seed in seeds:
        for term in rows.get(seed) or []:
            if term not in asked and term not in terms:
                terms.append(term)
    return terms[: keyword_lane.MAX_QUERY_TERMS]
