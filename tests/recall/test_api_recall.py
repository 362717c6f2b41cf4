"""POST /api/v1/recall: memory and knowledge merged, diversified, explained (reference §2.7, §4.6)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import override_settings

from knowledge.models import ArticleAccessEvent
from loopmem.embedding import embedders
from loopmem.tenancy.services import tenant_halt
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.memory.conftest import embed_pending, remember
from tests.recall.conftest import article, heavy_db, recall

pytestmark = heavy_db


@pytest.fixture
def corpus(agent, tenant):
    remember(agent, "the deploy pipeline runs on friday evenings")
    remember(agent, "my favourite editor is vim")
    embed_pending()
    return [
        article(tenant, "Deploy pipeline", "How the deploy pipeline is triggered and rolled back."),
        article(tenant, "Coffee machine", "Descale the coffee machine monthly."),
    ]


def test_both_halves_are_merged_ranked_and_explained(agent, corpus):
    body = recall(agent, "deploy pipeline")
    sources = [(item["source"], item["rank"]) for item in body["data"]]
    assert sources[0][1] == 1
    assert [rank for _, rank in sources] == list(range(1, len(sources) + 1))
    assert {s for s, _ in sources} == {"memory", "knowledge"}
    scores = [item["score"] or 0.0 for item in body["data"]]
    assert scores == sorted(scores, reverse=True)
    knowledge_item = next(item for item in body["data"] if item["source"] == "knowledge")
    assert set(knowledge_item) == {"source", "score", "rank", "selection_reason", "tokens_estimate", "article"}
    assert set(knowledge_item["article"]) == {"id", "title", "category", "tags", "score", "snippet"}
    assert knowledge_item["selection_reason"] in ("keyword+semantic", "keyword", "semantic")
    memory_item = next(item for item in body["data"] if item["source"] == "memory")
    assert memory_item["selection_reason"] == "semantic"
    text = memory_item["memory"]["text"]
    assert memory_item["tokens_estimate"] == -(-len(text.encode()) // 4)
    meta = body["meta"]
    assert meta["query"] == "deploy pipeline"
    assert meta["results_ranking"] == "heuristic_cross_source"
    assert (meta["degraded"], meta["degraded_reason"], meta["outcome"]) == (False, None, "success")
    assert meta["selected_count"] == meta["total_count"] == len(body["data"])
    assert (
        meta["candidates_considered"]["total"]
        == meta["candidates_considered"]["memory"] + meta["candidates_considered"]["knowledge"]
    )
    assert meta["tokens_selected"] == sum(item["tokens_estimate"] for item in body["data"])
    assert meta["tokens_saved_vs_candidates"] == meta["tokens_candidates"] - meta["tokens_selected"]
    assert meta["answer_confidence"] in ("answer", "weak")
    assert uuid.UUID(meta["recall_id"])
    assert body["memory"]["meta"]["fallback"] is False
    assert body["knowledge"]["meta"]["search_id"] == meta["recall_id"]
    assert body["knowledge"]["meta"]["limit"] == 10


def test_an_unchanged_corpus_renders_a_byte_identical_data_array(agent, corpus):
    first, second = recall(agent, "deploy pipeline"), recall(agent, "deploy pipeline")
    assert json.dumps(first["data"]) == json.dumps(second["data"])
    assert first["meta"]["recall_id"] != second["meta"]["recall_id"]


def test_surfacing_rows_are_written_under_the_recall_id(agent, corpus, agent_key):
    body = recall(agent, "deploy pipeline")
    shown = [item["article"]["id"] for item in body["data"] if item["source"] == "knowledge"]
    rows = ArticleAccessEvent.objects.filter(access_type="search", origin_search_id=body["meta"]["recall_id"])
    assert sorted(str(r.article_id) for r in rows) == sorted(shown)
    assert all(r.metadata["search_id"] == body["meta"]["recall_id"] for r in rows)
    assert all(r.api_key_id == agent_key.api_key.id for r in rows)
    assert all(r.metadata["mode"] == "hybrid_retrieved" for r in rows)


def test_limit_caps_the_merged_list(agent, corpus):
    body = recall(agent, "deploy pipeline", limit=1)
    assert len(body["data"]) == 1
    assert body["meta"]["memory_count"] + body["meta"]["knowledge_count"] >= 2  # counted before the cap


class Counting:
    calls = 0

    def embed(self, texts):
        Counting.calls += 1
        return embedders.HashingEmbedder().embed(texts)


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ({"query": 42}, 422, "invalid_query", "The `query` field must be a non-blank string."),
        ({"query": "   "}, 422, "invalid_query", "The `query` field must be a non-blank string."),
        ({}, 422, "invalid_query", "The `query` field must be a non-blank string."),
        ({"query": "x" * 501}, 422, "query_too_long", "The `query` must be at most 500 characters."),
        ({"query": "x", "project_id": "nope"}, 422, "invalid_project_id",
         "project_id must be the canonical UUID of one of your tenant's projects"),
        ({"query": "x", "session_id": 7}, 422, "invalid_session_id",
         "`session_id` must be a string of at most 200 bytes (it is never truncated)."),
        ({"query": "x", "session_id": "s" * 201}, 422, "invalid_session_id",
         "`session_id` must be a string of at most 200 bytes (it is never truncated)."),
    ],
)  # fmt: skip
def test_input_is_refused_before_anything_is_embedded(agent, monkeypatch, body, status, code, message):
    Counting.calls = 0
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Counting())
    response = agent.post("/api/v1/recall", body, format="json")
    assert response.status_code == status
    assert response.json() == error(status, code, message)
    assert Counting.calls == 0


def test_the_query_is_embedded_once_for_both_halves(agent, corpus, monkeypatch):
    Counting.calls = 0
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Counting())
    recall(agent, "deploy")
    assert Counting.calls == 1


def test_a_500_character_query_is_accepted(agent, corpus):
    recall(agent, "d" * 500)


class Down:
    def embed(self, texts):
        raise embedders.NoEmbeddingKey()


def test_without_embeddings_both_halves_fall_back_and_the_call_is_degraded(agent, corpus, monkeypatch):
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Down())
    body = recall(agent, "deploy")
    meta = body["meta"]
    assert (meta["degraded"], meta["degraded_reason"], meta["search_mode"]) == (
        True,
        "no_embedding_key",
        "keyword_only",
    )
    assert meta["outcome"] == "fallback"
    reasons = {item["source"]: item["selection_reason"] for item in body["data"]}
    assert reasons == {"memory": "ilike_fallback", "knowledge": "keyword_fallback"}
    assert body["memory"]["meta"]["reason"] == "no_embedding_key"
    assert body["knowledge"]["meta"]["degraded"] is True


def test_a_dimension_mismatch_names_itself(agent, corpus, monkeypatch):
    # The provider answers with vectors of another size than its model makes.
    monkeypatch.setitem(embedders.NATIVE_DIMENSIONS, "hashing", 8)
    meta = recall(agent, "deploy")["meta"]
    assert (meta["degraded"], meta["degraded_reason"]) == (True, "embedding_dimension_mismatch")


@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_a_shed_read_degrades_instead_of_429(agent, corpus):
    body = recall(agent, "deploy")
    meta = body["meta"]
    assert (meta["degraded"], meta["degraded_reason"], meta["outcome"]) == (True, "heavy_read_overloaded", "degraded")
    assert body["memory"]["meta"]["reason"] == "heavy_read_overloaded"


def test_a_failing_knowledge_half_is_request_error_and_memory_still_answers(agent, corpus, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("search broke")

    monkeypatch.setattr("recall.services.knowledge_search", explode)
    body = recall(agent, "deploy pipeline")
    meta = body["meta"]
    assert (meta["degraded"], meta["degraded_reason"]) == (True, "request_error")
    assert {item["source"] for item in body["data"]} == {"memory"}
    assert body["knowledge"]["meta"]["fallback_reason"] == "request_error"


def test_an_unrunnable_knowledge_half_outranks_a_memory_shed(agent, corpus, monkeypatch):
    from loopmem.errors import HeavyReadOverloaded

    def explode(**kwargs):
        raise RuntimeError("search broke")

    def shed(**kwargs):
        raise HeavyReadOverloaded()

    monkeypatch.setattr("recall.services.knowledge_search", explode)
    monkeypatch.setattr("recall.services.recall_by_vector", shed)
    assert recall(agent, "deploy")["meta"]["degraded_reason"] == "request_error"


def test_a_ledger_failure_degrades_the_call(agent, corpus, monkeypatch):
    monkeypatch.setattr("recall.services.ledger.access_record_surfacing", lambda **kwargs: False)
    meta = recall(agent, "deploy pipeline")["meta"]
    assert (meta["degraded"], meta["degraded_reason"]) == (True, "recall_ledger_unavailable")


def test_near_duplicate_articles_take_one_slot_and_the_next_fills_it(agent, tenant):
    twin_vector = embedders.HashingEmbedder().embed(["deploy pipeline"])[0]
    article(tenant, "Deploy pipeline A", "deploy pipeline notes", embedding=twin_vector)
    article(tenant, "Deploy pipeline B", "deploy pipeline notes again", embedding=twin_vector)
    article(tenant, "Rollback", "how to roll back a deploy")
    body = recall(agent, "deploy pipeline", limit=2)
    diversity = body["meta"]["diversity"]
    assert diversity["dropped_near_duplicates"] == 1
    titles = [item["article"]["title"] for item in body["data"]]
    assert len(titles) == 2
    assert "Rollback" in titles


def test_exact_hash_twins_collapse(agent, tenant):
    article(tenant, "Deploy pipeline", "deploy pipeline notes", embedding_content_hash="same")
    article(tenant, "Deploy pipeline copy", "deploy pipeline notes", embedding_content_hash="same")
    body = recall(agent, "deploy pipeline")
    assert body["meta"]["diversity"]["dropped_exact_duplicates"] == 1
    assert body["meta"]["knowledge_count"] == 1


def test_a_session_is_not_shown_the_same_article_twice_while_others_remain(agent, tenant):
    for n in range(4):
        article(tenant, f"Deploy note {n}", f"deploy step {n} {'x' * n}")
    first = recall(agent, "deploy", limit=2, session_id="task-1")
    second = recall(agent, "deploy", limit=2, session_id="task-1")
    ids = lambda body: {item["article"]["id"] for item in body["data"]}  # noqa: E731
    assert ids(first).isdisjoint(ids(second))
    assert second["meta"]["diversity"]["dropped_already_seen"] == 2
    # Without a session there is no containment.
    assert ids(recall(agent, "deploy", limit=2)) == ids(first)


@override_settings(KNOWLEDGE_CURATED_THRESHOLD=2.0)  # no curated winner here: the floor alone readmits (see below)
def test_when_everything_was_seen_the_floor_readmits_the_best(agent, tenant):
    article(tenant, "Deploy note", "deploy")
    recall(agent, "deploy", session_id="s")
    again = recall(agent, "deploy", session_id="s")
    assert again["meta"]["diversity"]["readmitted_already_seen"] == 1
    assert again["meta"]["knowledge_count"] == 1


def test_another_agents_session_token_does_not_suppress_my_rows(agent, client_for, make_key, tenant):
    article(tenant, "Deploy note", "deploy")
    other = client_for(make_key("agent", tenant, agent_id="agent-b"))
    recall(other, "deploy", session_id="shared-token")
    assert recall(agent, "deploy", session_id="shared-token")["meta"]["diversity"]["dropped_already_seen"] == 0


def test_both_halves_are_isolated(agent, client_for, make_key, tenant, other_tenant):
    remember(client_for(make_key("agent", tenant, agent_id="agent-b")), "agent b deploy secret")
    remember(client_for(make_key("agent", other_tenant, agent_id="agent-a")), "foreign deploy secret")
    embed_pending()
    article(other_tenant, "Foreign deploy", "deploy secrets of globex")
    article(tenant, "Private deploy", "deploy notes of agent b", visibility="owner", owner_subject_id="agent-b")
    article(tenant, "Draft deploy", "deploy draft", status="draft")
    assert recall(agent, "deploy secret")["data"] == []


def test_the_project_partition_applies_to_both_halves(agent, tenant):
    alpha = ProjectFactory.create(tenant=tenant)
    remember(agent, "deploy alpha memory", project_id=str(alpha.id))
    embed_pending()
    article(tenant, "Deploy alpha", "deploy alpha article", project=alpha)
    assert recall(agent, "deploy alpha")["data"] == []
    assert len(recall(agent, "deploy alpha", project_id=str(alpha.id))["data"]) == 2


def test_recall_goes_on_during_a_custody_halt(agent, corpus, tenant):
    tenant_halt(tenant=tenant)
    recall(agent, "deploy")


def test_an_unknown_or_foreign_project_on_a_read_is_never_written_as_attribution(agent, tenant, other_tenant):
    article(tenant, "Deploy pipeline", "deploy pipeline steps")
    foreign = ProjectFactory.create(tenant=other_tenant)
    for project_id in (str(uuid.uuid4()), str(foreign.id)):
        body = recall(agent, "deploy pipeline", project_id=project_id)
        assert (body["meta"]["degraded"], body["meta"]["degraded_reason"]) == (False, None)
        rows = ArticleAccessEvent.objects.filter(origin_search_id=body["meta"]["recall_id"])
        assert rows.exists()
        assert set(rows.values_list("project_id", flat=True)) == {None}


# --- The curated winner (knowledge.ordering) -----------------------------------------------------------------


@pytest.fixture
def clear_winner(tenant):
    """One article is the query's meaning (similarity 1.0), far ahead of the others."""
    [vector] = embedders.HashingEmbedder().embed(["roll back a release"])
    winner = article(tenant, "Zebra handbook", "crossing stripes", embedding=vector)
    for text in ("quarterly budget review", "printer toner supplier"):
        article(tenant, text.title(), text)
    return winner


def test_a_curated_winner_answers_even_alone_and_its_provenance_and_confidence_are_in_meta(agent, clear_winner):
    body = recall(agent, "roll back a release", limit=1)
    [item] = body["data"]
    assert item["article"]["id"] == str(clear_winner.id)
    meta = body["meta"]
    # One knowledge row has no separation to measure (weak); the curated branch makes it an answer.
    assert (meta["provenance"], meta["answer_confidence"]) == ("curated", "answer")
    assert meta["confidence"] == pytest.approx(1.0)
    assert meta["importance_strength"] is None
    knowledge_meta = body["knowledge"]["meta"]
    assert (knowledge_meta["provenance"], knowledge_meta["curated_article_id"]) == ("curated", str(clear_winner.id))
    # The surfacing row lands in retrieval metrics' curated bucket.
    [row] = ArticleAccessEvent.objects.filter(origin_search_id=meta["recall_id"])
    assert row.metadata["mode"] == "hybrid_curated"


def test_without_a_curated_winner_the_provenance_is_retrieved(agent, corpus):
    meta = recall(agent, "coffee")["meta"]
    assert (meta["provenance"], meta["importance_strength"]) == ("retrieved", None)
    assert 0.0 < meta["confidence"] <= 1.0


def test_the_curated_winner_is_contained_like_any_other_article(agent, clear_winner):
    # Merged recall pins nothing (reference §4.6): a session that was shown the winner gets the next best instead,
    # and the verdict falls back to the separation of what is left.
    first = recall(agent, "roll back a release", limit=1, session_id="task")
    again = recall(agent, "roll back a release", limit=1, session_id="task")
    assert [item["article"]["id"] for item in first["data"]] == [str(clear_winner.id)]
    assert first["meta"]["answer_confidence"] == "answer"
    assert [item["article"]["id"] for item in again["data"]] != [str(clear_winner.id)]
    assert again["meta"]["diversity"]["dropped_already_seen"] == 1
    assert again["meta"]["answer_confidence"] == "weak"  # the curated article is not among the rows


def test_a_failed_knowledge_half_has_no_provenance(agent, corpus, monkeypatch):
    from recall import services

    def broken(**kwargs):
        raise RuntimeError("knowledge is down")

    monkeypatch.setattr(services, "knowledge_search", broken)
    meta = recall(agent, "deploy pipeline")["meta"]
    assert (meta["provenance"], meta["confidence"], meta["importance_strength"]) == (None, None, None)
