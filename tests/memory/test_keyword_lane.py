"""The keyword lane (memory.keyword_lane): terms, weights, coverage ranking, completeness, the guarded session."""

from __future__ import annotations

import math

import pytest
from django.db import connection

from loopmem.reads import scoped
from loopmem.reads.where_guard import UnscopedHeavyRead
from loopmem.tenancy.scope import Scope
from memory import keyword_lane
from memory.candidates import recall_candidates
from memory.models import Memory
from tests.memory.conftest import heavy_db

pytestmark = heavy_db


def _scope(tenant, subject="agent-a", project_id=None):
    return Scope(tenant_id=tenant.id, subject_id=subject, project_id=project_id)


def _write(tenant, texts, subject="agent-a"):
    return Memory.objects.bulk_create(Memory(tenant=tenant, subject_id=subject, text=text) for text in texts)


def _rank(tenant, query, limit=50, subject="agent-a"):
    """The lane's weights and its ranking as (text, coverage), best first."""
    scope = _scope(tenant, subject)
    candidates = recall_candidates(scope, include_superseded=False)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id=subject) as session:
        keywords, ranked = keyword_lane.rank_by_words(session, candidates, keyword_lane.query_terms(query), limit)
        rows = keyword_lane.keyword_rank(session, candidates, query, limit)
    texts = dict(Memory.objects.filter(id__in=[memory_id for memory_id, _ in ranked]).values_list("id", "text"))
    by_words = [(texts[memory_id], keyword_lane.coverage(keywords, mask)) for memory_id, mask in ranked]
    assert [(row.text, score) for row, score in rows] == by_words  # the lane as recall reads it: the same ranking
    return keywords, by_words


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        # Stemmed, english stop words dropped, in query order.
        ("The deploys were failing", ["deploy", "fail"]),
        # Identifiers stay whole or split the same way the column splits them.
        ("deploy-prod.yaml", ["deploy-prod.yaml"]),
        ("ERR_TLS_CERT", ["err", "tls", "cert"]),
        ("kl1010 v2.3.1", ["kl1010", "v2.3.1"]),
        ("Caroline", ["carolin"]),
        ("what is it", []),
        ("", []),
    ],
)
def test_query_terms(query, terms):
    assert keyword_lane.query_terms(query) == terms


def test_query_terms_keep_at_most_the_first_32():
    query = " ".join(f"word{n}x" for n in range(40))
    assert keyword_lane.query_terms(query) == [f"word{n}x" for n in range(32)]


@pytest.mark.parametrize("lexeme", ["it's", "back\\slash", "o''brien", "a | b", "x:*", "!(c)"])
def test_a_lexeme_is_matched_verbatim_however_it_is_spelled(lexeme):
    # Lexemes come from PostgreSQL's own parser, but the tsquery literal must hold whatever it is given.
    literal = keyword_lane.tsquery_literal([lexeme, "plain"])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_to_tsvector(ARRAY[%s]) @@ %s::tsquery, array_to_tsvector(ARRAY['other']) @@ %s::tsquery",
            [lexeme, literal, literal],
        )
        assert cursor.fetchone() == (True, False)


def test_idf_is_large_for_rare_terms_and_never_negative():
    assert keyword_lane.idf(100, 1) > keyword_lane.idf(100, 10) > keyword_lane.idf(100, 100) > 0
    assert keyword_lane.idf(100, 1) == pytest.approx(math.log(1 + 99.5 / 1.5))


def test_a_rare_term_outweighs_a_common_one(tenant):
    _write(tenant, [f"the meeting notes for week {n}" for n in range(8)] + ["the Zanzibar offsite notes"])
    keywords, rows = _rank(tenant, "zanzibar meeting")
    assert rows[0][0] == "the Zanzibar offsite notes"
    assert keywords is not None
    assert keywords.weights["zanzibar"] > keywords.weights["meet"]


def test_coverage_is_the_share_of_the_query_weight_a_memory_holds(tenant):
    _write(tenant, ["alpha beta gamma", "alpha", "delta"])
    keywords, rows = _rank(tenant, "alpha beta gamma omega")
    assert keywords is not None
    scores = dict(rows)
    total = sum(keywords.weights.values())
    assert scores["alpha beta gamma"] == pytest.approx(
        (keywords.weights["alpha"] + keywords.weights["beta"] + keywords.weights["gamma"]) / total
    )
    assert scores["alpha"] == pytest.approx(keywords.weights["alpha"] / total)
    assert "delta" not in scores  # holds no term: not in the lane at all
    assert keywords.weights["omega"] == pytest.approx(keyword_lane.idf(3, 0))  # held by no candidate, still weighed


def test_the_lane_is_complete_and_exact_past_any_pool(tenant):
    """Every matching candidate is scored before the cut: the top n equal a brute-force ranking of all of them."""
    texts = [f"entry {n} " + " ".join(f"t{(n * 7 + j) % 13}" for j in range(n % 5 + 1)) for n in range(120)]
    _write(tenant, texts)
    keywords, rows = _rank(tenant, "t1 t2 t3 t5 t8", limit=25)
    assert keywords is not None
    total = sum(keywords.weights.values())

    def brute(text):
        words = set(text.split())
        return sum(w for term, w in keywords.weights.items() if term in words) / total

    for term, weight in keywords.weights.items():  # the statement's term counts, counted again here
        assert weight == pytest.approx(keyword_lane.idf(120, sum(term in t.split() for t in texts)))
    expected = sorted(((brute(t), t) for t in texts if brute(t) > 0), key=lambda pair: -pair[0])[:25]
    assert [round(score, 9) for _, score in rows] == [round(score, 9) for score, _ in expected]


def test_the_weights_count_only_the_scoped_candidates(tenant, other_tenant):
    _write(tenant, ["zebra crossing"] + ["plain row"] * 3)
    _write(tenant, ["zebra"] * 50, subject="agent-b")
    _write(other_tenant, ["zebra"] * 50)
    keywords, _ = _rank(tenant, "zebra")
    assert keywords is not None
    assert keywords.weights["zebra"] == pytest.approx(keyword_lane.idf(4, 1))


def test_the_session_refuses_an_unscoped_statement(tenant):
    """values_over: the candidates must be scoped, and the statement may read nothing but them."""
    scoped_rows = recall_candidates(_scope(tenant), include_superseded=False).values_list("id")
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        assert session.values_over(scoped_rows, "SELECT count(*) FROM candidates", []) == [(0,)]
        with pytest.raises(UnscopedHeavyRead):
            session.values_over(Memory.objects.filter(tenant_id=tenant.id).values_list("id"), "SELECT 1", [])
        for statement in (
            "SELECT count(*) FROM memories",
            ", more AS (SELECT id FROM candidates) SELECT * FROM more JOIN Memories USING (id)",
            'SELECT * FROM candidates WHERE id IN (SELECT id FROM "session_memories")',
        ):
            with pytest.raises(UnscopedHeavyRead, match="names table"):
                session.values_over(scoped_rows, statement, [])


@pytest.mark.parametrize("limit", [1, 5, 7, 12, 30])
def test_ties_across_masks_of_equal_weight_break_by_id_at_any_cut(tenant, limit):
    """Terms held by as many rows weigh the same: rows holding either tie, whatever the mask; the cut falls by id."""
    rows = _write(tenant, ["apple"] * 6 + ["pear"] * 6 + ["apple pear"] * 3 + ["plum"] * 2)
    scope = _scope(tenant)
    candidates = recall_candidates(scope, include_superseded=False)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        keywords, ranked = keyword_lane.rank_by_words(session, candidates, ["appl", "pear"], limit)
    assert keywords is not None
    assert keywords.weights["appl"] == keywords.weights["pear"]  # 9 of 17 rows hold each
    held = {row.id: {"apple": 1, "pear": 2, "apple pear": 3, "plum": 0}[row.text] for row in rows}
    expected = sorted(
        (memory_id for memory_id, mask in held.items() if mask),
        key=lambda memory_id: (-keyword_lane.coverage(keywords, held[memory_id]), str(memory_id)),
    )[:limit]
    assert [memory_id for memory_id, _ in ranked] == expected
