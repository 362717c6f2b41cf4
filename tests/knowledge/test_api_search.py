"""GET /api/v1/knowledge/search (reference §2.9): the three modes, fusion, fallback, scoping, validation."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from knowledge.models import Article
from loopmem.errors import EmbeddingUnavailable, InvalidProjectId
from loopmem.tenancy.services import tenant_halt
from tests.conftest import error
from tests.factories import ProjectFactory, embedded_article
from tests.knowledge.conftest import MISSING_KEY, heavy_db, search, titles

pytestmark = heavy_db

CORPUS = {
    "Blue green deploys": "Flip the router to the idle colour after the smoke test passes; flip again to roll back.",
    "Database migrations": "Run migrations before the deploy and keep them backwards compatible with the old code.",
    "Feeding the office cat": "The cat likes fish in the evening and ignores dry food.",
    "Incident reviews": "Write the timeline first, then the contributing factors; never name a culprit.",
}


article = embedded_article


@pytest.fixture
def corpus(tenant):
    return {title: article(tenant, title, body) for title, body in CORPUS.items()}


def test_keyword_mode_ranks_full_text_matches_by_relevance(agent, corpus):
    body = search(agent, "deploy", mode="keyword")
    assert titles(body) == ["Blue green deploys", "Database migrations"]  # the title weighs more than the body
    scores = [hit["score"] for hit in body["data"]]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)
    hit = body["data"][0]
    assert set(hit) == {"id", "title", "category", "tags", "score", "snippet"}
    assert hit["snippet"] == CORPUS["Blue green deploys"]
    meta = body["meta"]
    uuid.UUID(meta.pop("search_id"))
    assert meta.pop("confidence") == pytest.approx(scores[0] / (scores[0] + 1))  # the best relevance, squashed
    assert meta.pop("diversity")["selected"] == 2
    assert meta == {
        "total_count": 2,
        "limit": 10,
        "offset": 0,
        "search_mode": "keyword",
        "fallback": False,
        "fallback_reason": None,
        "pool_capped": False,
        "total_count_scope": None,
        "remediation": None,
        "importance_strength": None,
        "provenance": "retrieved",  # the keyword lane has no similarity: never curated
        "curated_article_id": None,
        "outcome": "success",
    }


def test_keyword_mode_understands_web_search_syntax(agent, corpus):
    assert titles(search(agent, '"smoke test"', mode="keyword")) == ["Blue green deploys"]
    assert titles(search(agent, "deploy -router", mode="keyword")) == ["Database migrations"]
    assert titles(search(agent, "the and of", mode="keyword")) == []  # stop words alone match nothing


def test_semantic_mode_ranks_every_visible_article_by_similarity(agent, corpus):
    body = search(agent, "what does the cat eat in the evening", mode="semantic", limit=2)
    assert titles(body)[0] == "Feeding the office cat"
    assert all(0.0 <= hit["score"] <= 1.0 for hit in body["data"])
    meta = body["meta"]
    assert (meta["search_mode"], meta["semantic_path"], meta["total_count"]) == ("semantic", "exact", 4)
    assert "ann_iterative_scan" not in meta  # the exact read scans no index


@override_settings(RECALL_DIVERSITY_ENABLED=False)  # the fusion's own order (the selector reorders it: below)
def test_combined_mode_fuses_the_lanes_by_reciprocal_rank(agent, corpus):
    body = search(agent, "smoke test router")
    assert body["meta"]["search_mode"] == "combined"
    assert body["meta"]["total_count"] == 4  # the semantic lane brings every embedded article
    top, *rest = body["data"]
    assert top["title"] == "Blue green deploys"  # first in both lanes: 1/61 + 1/61
    assert top["score"] == pytest.approx(2 / 61)
    assert [hit["score"] for hit in rest] == pytest.approx([1 / 62, 1 / 63, 1 / 64])  # the semantic lane alone


def test_without_an_embedding_combined_degrades_to_keyword(agent, corpus, embedding_down):
    body = search(agent, "deploy")
    assert titles(body) == ["Blue green deploys", "Database migrations"]
    meta = body["meta"]
    assert (meta["search_mode"], meta["fallback"], meta["fallback_reason"]) == (
        "keyword_only",
        True,
        "embedding_timeout",
    )
    assert meta["outcome"] == "fallback"
    assert "semantic_path" not in meta
    assert "ann_iterative_scan" not in meta


def test_without_an_embedding_semantic_is_503(agent, corpus, embedding_down):
    body = search(agent, "deploy", mode="semantic", expect=503)
    assert body == error(
        503, "embedding_unavailable", EmbeddingUnavailable.default_message, {"reason": "embedding_timeout"}
    )


def test_unembedded_articles_are_found_by_keyword_only(agent, corpus):
    Article.objects.filter(title="Database migrations").update(embedding=None)
    assert "Database migrations" not in titles(search(agent, "deploy", mode="semantic"))
    assert "Database migrations" in titles(search(agent, "deploy"))


def test_vectors_of_another_model_are_never_compared(agent, corpus):
    Article.objects.update(embedding_model="local:all-MiniLM-L6-v2-int8")
    assert search(agent, "cat", mode="semantic")["data"] == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "Query parameter 'q' is required and cannot be empty"),
        ({"q": "   "}, "Query parameter 'q' is required and cannot be empty"),
        ({"q": "x" * 501}, "Query parameter 'q' exceeds maximum length of 500 characters"),
        ({"q": "x", "mode": "fuzzy"}, "Query parameter 'mode' must be one of keyword, semantic, combined"),
        (
            {"q": "x", "category": "gossip"},
            "Query parameter 'category' must be one of pattern, decision, finding, reference",
        ),
    ],
)
def test_bad_input_is_400(agent, params, message):
    response = agent.get("/api/v1/knowledge/search", params)
    assert response.status_code == 400
    assert response.json() == error(400, "bad_request", message)


def test_query_is_an_alias_of_q_and_500_characters_are_allowed(agent, corpus):
    assert titles(search(agent, query="smoke", mode="keyword")) == ["Blue green deploys"]
    assert search(agent, " " + "x" * 500 + " ")["meta"]["outcome"] in ("success", "empty")


def test_a_malformed_project_id_is_422(agent):
    body = search(agent, "x", project_id="nope", expect=422)
    assert body == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_a_project_reads_the_global_articles_plus_its_own(agent, tenant, corpus):
    alpha, beta = ProjectFactory.create(tenant=tenant), ProjectFactory.create(tenant=tenant)
    article(tenant, "Alpha deploy notes", "alpha deploys on fridays", project=alpha)
    article(tenant, "Beta deploy notes", "beta deploys on mondays", project=beta)
    for mode in ("keyword", "semantic", "combined"):
        found = set(titles(search(agent, "deploy", mode=mode, limit=50)))
        assert not found & {"Alpha deploy notes", "Beta deploy notes"}, mode
        found = set(titles(search(agent, "deploy", mode=mode, limit=50, project_id=str(alpha.id))))
        assert "Alpha deploy notes" in found, mode
        assert "Beta deploy notes" not in found, mode
    foreign = set(titles(search(agent, "deploy", limit=50, project_id=str(uuid.uuid4()))))
    assert foreign == set(CORPUS)


def test_category_and_all_tags_narrow_every_lane(agent, tenant, corpus):
    article(tenant, "Deploy freeze", "no deploys in december", category="decision", tags=["ops", "calendar"])
    article(tenant, "Deploy windows", "deploy on weekdays", category="decision", tags=["ops"])
    for mode in ("keyword", "semantic", "combined"):
        assert set(titles(search(agent, "deploy", mode=mode, category="decision"))) == {
            "Deploy freeze",
            "Deploy windows",
        }
        assert titles(search(agent, "deploy", mode=mode, tags="calendar,OPS")) == ["Deploy freeze"]


def test_drafts_and_inactive_articles_are_never_searched(user, tenant, corpus):
    for status in ("draft", "archived", "superseded"):
        article(tenant, f"Deploy {status}", "deploy", status=status)
    found = set(titles(search(user, "deploy", limit=50)))
    assert found == set(CORPUS)


def test_limit_is_clamped_and_offset_pages_through_one_ranking(agent, tenant):
    for n in range(12):
        article(tenant, f"Deploy note {n:02}", f"deploy note number {n}")
    whole = search(agent, "deploy note", limit=50)
    assert whole["meta"]["total_count"] == 12
    pages = [search(agent, "deploy note", limit=5, offset=offset) for offset in (0, 5, 10)]
    assert [t for page in pages for t in titles(page)] == titles(whole)
    assert [page["meta"]["total_count"] for page in pages] == [12, 12, 12]
    assert search(agent, "deploy note", limit=0)["meta"]["limit"] == 1
    assert search(agent, "deploy note", limit=500)["meta"]["limit"] == 50
    past = search(agent, "deploy note", offset=40)
    assert (past["data"], past["meta"]["outcome"]) == ([], "success")  # past the end is not "empty"


def test_a_search_that_finds_nothing_is_empty(agent):
    meta = search(agent, "deploy")["meta"]
    assert (meta["total_count"], meta["outcome"]) == (0, "empty")


def test_snippets_are_at_most_300_characters(agent, tenant):
    article(tenant, "Long read", "deploy " * 200)
    [hit] = search(agent, "deploy")["data"]
    assert len(hit["snippet"]) == 300


def test_search_goes_on_during_a_custody_halt(agent, tenant, corpus):
    tenant_halt(tenant=tenant)
    assert search(agent, "deploy")["meta"]["total_count"] > 0


def test_a_missing_key_is_401(client_for):
    response = client_for().get("/api/v1/knowledge/search", {"q": "x"})
    assert response.status_code == 401
    assert response.json() == MISSING_KEY
