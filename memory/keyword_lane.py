"""The keyword lane of memory recall: what the agent typed, found by full-text match and ranked by how much of the
query's information a memory holds.

- Terms: the query parsed by the generated column's text-search configuration (`memory.models.KEYWORD_CONFIG`):
  words stemmed, english stop words dropped, identifiers kept whole or split as the memory's were.
- Weights: BM25's inverse document frequency over the candidate rows (the subject's memories in the partition), so a
  rare name or code outweighs a word half the memories share.
- Score: the weight of the terms a memory holds over the weight of all the query's terms ("coverage", in (0, 1]).
  That is BM25 with binary term frequency and no length normalisation: a memory is a short statement, and counting
  repeats or penalising length bought nothing on the evaluation set (docs/quality.md).

One pass over the candidates: each row's text-search vector is matched against each term once, giving which terms
it holds as a bitmask (`HeldTerms`); the term counts, the weights and the ranking are then computed from the masks
(a subject has a few distinct masks, not thousands), inside the same statement (`RANKING_CTES`).

Complete by construction: every candidate is matched and every matching one is scored and sorted before the cut.
The read is bounded by the subject, whose live rows never exceed the quota (`LOOPMEM_MEMORY_QUOTA`), and runs inside
the guarded, (tenant, subject) scoped heavy-read session like the vector lane.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, F, Func, QuerySet
from django.db.models.sql.compiler import SQLCompiler

from loopmem.database import router
from loopmem.reads import scoped
from memory.models import KEYWORD_CONFIG, Memory

# A query longer than this many distinct terms keeps its first ones: each term is one match per candidate, and a
# mask holds at most 63.
MAX_QUERY_TERMS = 32

_QUERY_TERMS_SQL = "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) ORDER BY positions[1], lexeme LIMIT %s"


def tsquery_literal(lexemes: Sequence[str]) -> str:
    """`'a' | 'b'`: exact lexemes as tsquery input, quoted so that nothing is parsed or stemmed again."""
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " | ".join(quoted)


class HeldTerms(Func):
    """Which of the lexemes the row's `search_vector` holds, as a bitmask: bit n set when it holds lexeme n.

    One SQL fragment whatever the number of terms (the ORM and the heavy-read guard walk expression trees, and a node
    per term made building a query cost more than running it); an integer travels and groups far cheaper than a
    boolean array.
    """

    output_field = BigIntegerField()

    def __init__(self, lexemes: Sequence[str], *, as_queries: bool = False) -> None:
        """`as_queries`: `lexemes` are each term's tsquery text already (`term_queries`), each passed as one
        parameter, unchanged: the form a prepared read binds (`loopmem.reads.prepared`)."""
        super().__init__(F("search_vector"))
        self.queries = tuple(lexemes) if as_queries else tuple(term_queries(lexemes))

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, list[Any]]:
        if not self.queries:
            return "0::bigint", []
        vector, vector_params = compiler.compile(self.get_source_expressions()[0])
        bits = " | ".join(
            f"(CASE WHEN {vector} @@ %s::tsquery THEN {1 << n} ELSE 0 END)::bigint" for n in range(len(self.queries))
        )
        params = [value for query in self.queries for value in (*vector_params, query)]
        return f"({bits})", params


def term_queries(lexemes: Sequence[str]) -> list[str]:
    """Each lexeme as the tsquery text `HeldTerms` matches it by."""
    return [tsquery_literal([lexeme]) for lexeme in lexemes]


def held_flags(mask: int, terms: int) -> list[bool]:
    """A `HeldTerms` bitmask as one flag per term, in order."""
    return [bool(mask >> n & 1) for n in range(terms)]


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

    @property
    def total_weight(self) -> float:
        return sum(self.weights.values())


def coverage(keywords: KeywordQuery | None, mask: int) -> float:
    """Σ weight of the terms a `HeldTerms` mask holds / Σ weight of all the query's terms: the lane's score, 0 for a
    row that holds none (and without weights: a query with no term, or one no candidate holds)."""
    if keywords is None or keywords.total_weight <= 0:
        return 0.0
    held = held_flags(mask, len(keywords.weights))
    return sum(weight for weight, holds in zip(keywords.weights.values(), held, strict=True) if holds) / (
        keywords.total_weight
    )


def weigh(terms: Sequence[str], *, rows: int, holding: Sequence[int]) -> KeywordQuery:
    """The terms' weights, from how many of `rows` candidates hold each."""
    return KeywordQuery(weights={term: idf(rows, held) for term, held in zip(terms, holding, strict=True)})


# Over `candidates` (id, held, ...; see scoped.ScopedSession.values_over), with parameters (term count, limit,
# limit):
# masks — each distinct held-terms mask and how many candidates have it; term_bits — how many hold each term;
# mask_weights — each matching mask's summed weight (BM25 idf, as `idf`), the coverage's order (its denominator is
# the same for every row); contending — the masks with fewer than `limit` rows of a strictly greater weight, the
# only ones whose rows can make the cut; by_words — the `limit` best candidates by weight, ties by id: their columns
# and rank.
# Every aggregate after `masks` runs over the distinct masks, not the rows.
RANKING_CTES = """
, masks AS (SELECT held, count(*) AS n FROM candidates GROUP BY held)
, term_bits AS (
    SELECT b, coalesce(sum(n) FILTER (WHERE held & (1::bigint << b) <> 0), 0)::bigint AS holding
    FROM masks CROSS JOIN generate_series(0, %s - 1) AS b GROUP BY b)
, mask_weights AS (
    SELECT m.held, m.n,
           sum(ln(1.0 + ((SELECT sum(n) FROM masks) - t.holding + 0.5) / (t.holding + 0.5))::float8)
             FILTER (WHERE m.held & (1::bigint << t.b) <> 0) AS weight
    FROM masks m CROSS JOIN term_bits t WHERE m.held <> 0 GROUP BY m.held, m.n)
, contending AS (
    SELECT held, weight FROM (
        SELECT held, weight, coalesce(sum(n) OVER (
            ORDER BY weight DESC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE GROUP), 0) AS ahead
        FROM mask_weights) counted
    WHERE ahead < %s)
, by_words AS (
    SELECT *, row_number() OVER () AS rank FROM (
        SELECT c.* FROM candidates c JOIN contending w USING (held) ORDER BY w.weight DESC, c.id LIMIT %s
    ) best)
"""
# The term counts and the candidate count, as two columns of every row (each computed once).
STATISTICS_COLUMNS = "(SELECT array_agg(holding ORDER BY b) FROM term_bits), (SELECT sum(n) FROM masks)::bigint"

_KEYWORD_RANK_SQL = f"""{RANKING_CTES}
SELECT id, held, {STATISTICS_COLUMNS} FROM by_words ORDER BY rank
"""


def weights_from(terms: Sequence[str], holding: Sequence[int] | None, rows: int | None) -> KeywordQuery:
    """The KeywordQuery of the statistics columns (NULL when the query has no term)."""
    return weigh(terms, rows=int(rows or 0), holding=[int(count) for count in holding or [0] * len(terms)])


def rank_by_words(
    session: scoped.ScopedSession, candidates: QuerySet[Memory], terms: Sequence[str], limit: int
) -> tuple[KeywordQuery | None, list[tuple[uuid.UUID, int]]]:
    """The `limit` candidates holding the most of the query, best first (ties by id), as (id, held mask), and the
    weights. One statement. (None, []) when no candidate holds a term of the query (or it has none)."""
    if not terms:
        return None, []
    light = candidates.order_by().annotate(held=HeldTerms(terms)).values_list("id", "held")
    rows = session.values_over(light, _KEYWORD_RANK_SQL, [len(terms), limit, limit])
    if not rows:
        return None, []
    _, _, holding, total = rows[0]
    return weights_from(terms, holding, total), [(memory_id, mask) for memory_id, mask, *_ in rows]


def keyword_rank(
    session: scoped.ScopedSession, candidates: QuerySet[Memory], query: str, limit: int
) -> list[tuple[Memory, float]]:
    """The `limit` candidates holding the most of the query, best first (ties by id), each with its coverage."""
    keywords, ranked = rank_by_words(session, candidates, query_terms(query), limit)
    if keywords is None:
        return []
    rows = {row.id: row for row in session.fetch(candidates.filter(id__in=[memory_id for memory_id, _ in ranked]))}
    # A row forgotten since the ranking read (its own statement) is no longer there to return.
    return [(rows[memory_id], coverage(keywords, mask)) for memory_id, mask in ranked if memory_id in rows]
