"""The keyword lane of memory recall: what the agent typed, found by full-text match and ranked by how much of the
query's information a memory holds.

- Terms: the query parsed by the generated column's text-search configuration (`memory.models.KEYWORD_CONFIG`):
  words stemmed, english stop words dropped, identifiers kept whole or split as the memory's were.
- Weights: BM25's inverse document frequency over the candidate rows (the subject's memories in the partition), so a
  rare name or code outweighs a word half the memories share.
- Score: the weight of the terms a memory holds over the weight of all the query's terms ("coverage", in (0, 1]).
  That is BM25 with binary term frequency and no length normalisation: a memory is a short statement, and counting
  repeats or penalising length bought nothing on the evaluation set (docs/quality.md).

Complete by construction: the match is exact (the GIN index returns every row holding a term; nothing is
approximate) and every matching candidate is scored and sorted before the cut. The read is bounded by the subject,
whose live rows never exceed the quota (`LOOPMEM_MEMORY_QUOTA`), and runs inside the guarded, (tenant, subject)
scoped heavy-read session like the vector lane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchQueryField
from django.db import connections
from django.db.models import BooleanField, Case, Count, Expression, F, FloatField, Func, QuerySet, Value, When
from django.db.models.functions import Cast

from loopmem import heavy_read
from memory.models import KEYWORD_CONFIG, Memory

# A query longer than this many distinct terms keeps its first ones: the statistics query grows with each term.
MAX_QUERY_TERMS = 32

_QUERY_TERMS_SQL = "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) ORDER BY positions[1], lexeme LIMIT %s"


def tsquery_literal(lexemes: Sequence[str]) -> str:
    """`'a' | 'b'`: exact lexemes as tsquery input, quoted so that nothing is parsed or stemmed again."""
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " | ".join(quoted)


class HoldsAnyTerm(Func):
    """`search_vector @@ '<a>' | '<b>'::tsquery`: the row holds at least one of the lexemes (GIN-indexable)."""

    arg_joiner = " @@ "
    template = "(%(expressions)s)"
    output_field = BooleanField()

    def __init__(self, lexemes: Sequence[str]) -> None:
        super().__init__(F("search_vector"), Cast(Value(tsquery_literal(lexemes)), SearchQueryField()))


def query_terms(query: str) -> list[str]:
    """The query's distinct lexemes in the order they first occur, at most MAX_QUERY_TERMS.

    Reads no table: it only asks PostgreSQL to parse the text the way the column was built.
    """
    with connections[heavy_read.HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute(_QUERY_TERMS_SQL, [KEYWORD_CONFIG, query, MAX_QUERY_TERMS])
        return [row[0] for row in cursor.fetchall()]


def idf(rows: int, holding: int) -> float:
    """BM25's inverse document frequency: near 0 for a term every row holds, large for a rare one; never negative."""
    return math.log(1.0 + (rows - holding + 0.5) / (holding + 0.5))


@dataclass(frozen=True)
class KeywordQuery:
    """The query's terms with their weights over this candidate set."""

    weights: dict[str, float]  # every term of the query, in query order
    held: tuple[str, ...]  # the terms at least one candidate holds

    @property
    def total_weight(self) -> float:
        return sum(self.weights.values())

    def matches(self) -> HoldsAnyTerm:
        return HoldsAnyTerm(self.held)

    def coverage(self) -> Expression:
        """Σ weight of the terms the row holds / Σ weight of all terms: 0 for a row that holds none."""
        parts = [
            Case(When(HoldsAnyTerm([term]), then=Value(self.weights[term])), default=Value(0.0)) for term in self.held
        ]
        if not parts:
            return Value(0.0, output_field=FloatField())
        held: Any = parts[0]
        for part in parts[1:]:
            held = held + part
        return Cast(held, FloatField()) / Value(self.total_weight)


def keyword_query(session: heavy_read.ScopedSession, candidates: QuerySet[Memory], query: str) -> KeywordQuery | None:
    """Weigh the query's terms over the candidates (one aggregate read); None when the query has no terms."""
    terms = query_terms(query)
    if not terms:
        return None
    counts = {f"term_{n}": Count("id", filter=HoldsAnyTerm([term])) for n, term in enumerate(terms)}
    stats = session.aggregate(candidates, rows=Count("id"), **counts)
    holding = {term: int(stats[f"term_{n}"]) for n, term in enumerate(terms)}
    weights = {term: idf(stats["rows"], holding[term]) for term in terms}
    return KeywordQuery(weights=weights, held=tuple(term for term in terms if holding[term] > 0))


def keyword_rank(
    session: heavy_read.ScopedSession, candidates: QuerySet[Memory], keywords: KeywordQuery | None, limit: int
) -> list[Memory]:
    """The `limit` candidates holding the most of the query, best first (ties by id); each has `keyword_score`."""
    if keywords is None or not keywords.held:
        return []
    ranked = (
        candidates.filter(keywords.matches())
        .annotate(keyword_score=keywords.coverage())
        .order_by("-keyword_score", "id")[:limit]
    )
    return session.fetch(ranked)
