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

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, BooleanField, Count, F, FloatField, Func, IntegerField, QuerySet
from django.db.models.sql.compiler import SQLCompiler

from loopmem.database import router
from loopmem.reads import scoped
from memory.models import KEYWORD_CONFIG, Memory

# A query longer than this many distinct terms keeps its first ones: the statistics query grows with each term.
MAX_QUERY_TERMS = 32

_QUERY_TERMS_SQL = "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) ORDER BY positions[1], lexeme LIMIT %s"


def tsquery_literal(lexemes: Sequence[str]) -> str:
    """`'a' | 'b'`: exact lexemes as tsquery input, quoted so that nothing is parsed or stemmed again."""
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " | ".join(quoted)


class _OnSearchVector(Func, abc.ABC):
    """An expression over the row's `search_vector`, rendered as one SQL fragment.

    Each is a single node, whatever the number of terms: the ORM and the heavy-read guard walk expression trees,
    and a Case/When per term made building a query cost more than running it.
    """

    def __init__(self, lexemes: Sequence[str]) -> None:
        super().__init__(F("search_vector"))
        self.lexemes = tuple(lexemes)

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, list[Any]]:
        vector, params = compiler.compile(self.get_source_expressions()[0])
        return self.render(vector, list(params))

    @abc.abstractmethod
    def render(self, vector: str, vector_params: list[Any]) -> tuple[str, list[Any]]:
        """The fragment over `vector` (the compiled `search_vector` column, with its parameters)."""


class HoldsAnyTerm(_OnSearchVector):
    """`search_vector @@ 'a' | 'b'`: the row holds at least one of the lexemes (GIN-indexable)."""

    output_field = BooleanField()

    def render(self, vector: str, vector_params: list[Any]) -> tuple[str, list[Any]]:
        return f"({vector} @@ %s::tsquery)", [*vector_params, tsquery_literal(self.lexemes)]


class TermCounts(_OnSearchVector):
    """An aggregate: for each lexeme, how many rows hold it (`ARRAY[count(*) FILTER (WHERE ...), ...]`)."""

    contains_aggregate = True
    output_field = ArrayField(IntegerField())

    def render(self, vector: str, vector_params: list[Any]) -> tuple[str, list[Any]]:
        counts = ", ".join(f"count(*) FILTER (WHERE {vector} @@ %s::tsquery)" for _ in self.lexemes)
        params = [value for lexeme in self.lexemes for value in (*vector_params, tsquery_literal([lexeme]))]
        return f"ARRAY[{counts}]::integer[]", params


class HeldTerms(_OnSearchVector):
    """Which of the lexemes the row holds, as a bitmask: bit n set when it holds lexeme n (at most 63 of them).

    An integer travels and decodes far cheaper than a boolean array, and hybrid recall reads it for every row.
    """

    output_field = BigIntegerField()

    def render(self, vector: str, vector_params: list[Any]) -> tuple[str, list[Any]]:
        if not self.lexemes:
            return "0::bigint", []
        bits = " | ".join(
            f"(CASE WHEN {vector} @@ %s::tsquery THEN {1 << n} ELSE 0 END)::bigint" for n in range(len(self.lexemes))
        )
        params = [value for lexeme in self.lexemes for value in (*vector_params, tsquery_literal([lexeme]))]
        return f"({bits})", params


def held_flags(mask: int, terms: int) -> list[bool]:
    """A `HeldTerms` bitmask as one flag per term, in order."""
    return [bool(mask >> n & 1) for n in range(terms)]


class Coverage(_OnSearchVector):
    """Σ weight of the lexemes the row holds / `total`: the keyword lane's score, 0 for a row that holds none."""

    output_field = FloatField()

    def __init__(self, lexemes: Sequence[str], weights: Sequence[float], total: float) -> None:
        super().__init__(lexemes)
        self.weights, self.total = tuple(weights), total

    def render(self, vector: str, vector_params: list[Any]) -> tuple[str, list[Any]]:
        if not self.lexemes:
            return "0.0::double precision", []
        # float8 throughout: a bare 0.0 or weight literal is numeric, whose arithmetic costs several times more.
        held = " + ".join(f"CASE WHEN {vector} @@ %s::tsquery THEN %s::float8 ELSE 0::float8 END" for _ in self.lexemes)
        params = [
            value
            for lexeme, weight in zip(self.lexemes, self.weights, strict=True)
            for value in (*vector_params, tsquery_literal([lexeme]), weight)
        ]
        return f"(({held}) / %s::float8)", [*params, self.total]


def query_terms(query: str) -> list[str]:
    """The query's distinct lexemes in the order they first occur, at most MAX_QUERY_TERMS.

    Reads no table: it only asks PostgreSQL to parse the text the way the column was built.
    """
    with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
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
    rows: int  # the candidates the weights were counted over

    @property
    def total_weight(self) -> float:
        return sum(self.weights.values())

    def matches(self) -> HoldsAnyTerm:
        return HoldsAnyTerm(self.held)

    def coverage(self) -> Coverage:
        """Σ weight of the terms the row holds / Σ weight of all the query's terms."""
        return Coverage(self.held, [self.weights[term] for term in self.held], self.total_weight)


def keyword_query(session: scoped.ScopedSession, candidates: QuerySet[Memory], query: str) -> KeywordQuery | None:
    """Weigh the query's terms over the candidates (one aggregate read); None when the query has no terms."""
    return weigh_over(session, candidates, query_terms(query))


def weigh_over(
    session: scoped.ScopedSession, candidates: QuerySet[Memory], terms: Sequence[str]
) -> KeywordQuery | None:
    """`keyword_query` for terms already parsed."""
    if not terms:
        return None
    stats = session.aggregate(candidates, rows=Count("id"), holding=TermCounts(terms))
    return weigh(terms, rows=stats["rows"], holding=stats["holding"])


def weigh(terms: Sequence[str], *, rows: int, holding: Sequence[int]) -> KeywordQuery:
    """The terms' weights, from how many of `rows` candidates hold each."""
    weights = {term: idf(rows, held) for term, held in zip(terms, holding, strict=True)}
    held = tuple(term for term, count in zip(terms, holding, strict=True) if count > 0)
    return KeywordQuery(weights=weights, held=held, rows=rows)


def coverage_from(keywords: KeywordQuery, held: Sequence[bool]) -> float:
    """`Coverage` computed from a row's held flags (one per term, in query order), the same figure as in SQL."""
    total = keywords.total_weight
    if total <= 0:
        return 0.0
    return sum(weight for weight, holds in zip(keywords.weights.values(), held, strict=True) if holds) / total


def keyword_rank(
    session: scoped.ScopedSession, candidates: QuerySet[Memory], keywords: KeywordQuery | None, limit: int
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
