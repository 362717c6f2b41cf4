"""POST /api/v1/recall with `mode`: the memory half read by keyword or hybrid, degraded, validated."""

from __future__ import annotations

import pytest
from django.test import override_settings

from loopmem.embedding import embedders
from loopmem.errors import InvalidQuery
from tests.conftest import error
from tests.memory.conftest import embed_pending, remember
from tests.recall.conftest import article, heavy_db, recall

pytestmark = heavy_db


@pytest.fixture
def corpus(agent, tenant):
    remember(agent, "the deploy pipeline runs on friday evenings")
    remember(agent, "my favourite editor is vim")
    embed_pending()
    article(tenant, "Deploy pipeline", "How the deploy pipeline is triggered and rolled back.")


def _memory_items(body):
    return [item for item in body["data"] if item["source"] == "memory"]


def test_hybrid_reads_the_memory_half_by_both_lanes(agent, corpus):
    body = recall(agent, "deploy pipeline", mode="hybrid")
    memory_meta = body["memory"]["meta"]
    assert (memory_meta["mode"], memory_meta["lane_counts"]) == ("hybrid", {"semantic": 2, "keyword": 1})
    assert memory_meta["answer_confidence"] in ("high", "medium", "low")
    items = _memory_items(body)
    reasons = {item["memory"]["text"]: item["selection_reason"] for item in items}
    assert reasons["the deploy pipeline runs on friday evenings"] == "keyword+semantic"
    # The merged memory items carry the fused score the memory envelope reports.
    fused = {hit["memory"]["id"]: hit["score"] for hit in body["memory"]["data"]}
    assert all(item["score"] == fused[item["memory"]["id"]] for item in items)


def test_the_merged_meta_keeps_its_shape_in_every_mode(agent, corpus):
    shapes = {mode: set(recall(agent, "deploy pipeline", mode=mode)["meta"]) for mode in ("keyword", "hybrid")}
    assert shapes["keyword"] == shapes["hybrid"] == set(recall(agent, "deploy pipeline")["meta"])


def test_keyword_mode_selects_memories_by_their_words(agent, corpus):
    body = recall(agent, "deploy pipeline", mode="keyword")
    assert [(item["memory"]["text"], item["selection_reason"]) for item in _memory_items(body)] == [
        ("the deploy pipeline runs on friday evenings", "keyword")
    ]
    assert body["memory"]["meta"]["mode"] == "keyword"


def test_a_memory_just_written_is_in_a_hybrid_recall(agent, corpus):
    written = remember(agent, "the release train leaves on tuesdays")
    items = _memory_items(recall(agent, "release train", mode="hybrid"))
    assert items[0]["memory"]["id"] == written["id"]
    assert items[0]["selection_reason"] == "keyword"  # not embedded yet: the keyword lane found it


class Down:
    def embed(self, texts):
        raise embedders.NoEmbeddingKey()


def test_without_embeddings_hybrid_memory_is_the_keyword_lane(agent, corpus, monkeypatch):
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Down())
    body = recall(agent, "deploy pipeline", mode="hybrid")
    assert [item["selection_reason"] for item in _memory_items(body)] == ["keyword_fallback"]
    memory_meta = body["memory"]["meta"]
    assert (memory_meta["fallback"], memory_meta["reason"], memory_meta["lane_lost"]) == (
        True,
        "no_embedding_key",
        "semantic",
    )
    meta = body["meta"]
    assert (meta["degraded"], meta["degraded_reason"], meta["search_mode"], meta["outcome"]) == (
        True,
        "no_embedding_key",
        "keyword_only",
        "fallback",
    )


@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_a_shed_hybrid_read_degrades_instead_of_429(agent, corpus):
    body = recall(agent, "deploy", mode="hybrid")
    assert (body["meta"]["degraded"], body["meta"]["degraded_reason"]) == (True, "heavy_read_overloaded")
    memory_meta = body["memory"]["meta"]
    assert (memory_meta["reason"], memory_meta["lane_counts"], memory_meta["answer_confidence"]) == (
        "heavy_read_overloaded",
        {},
        "none",
    )


@pytest.mark.parametrize("mode", ["bogus", 3, ["hybrid"]])
def test_an_unknown_mode_is_422(agent, mode):
    response = agent.post("/api/v1/recall", {"query": "x", "mode": mode}, format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422, "validation_failed", "Validation failed", {"mode": ["must be one of semantic, keyword, hybrid, deep"]}
    )


def test_the_query_is_checked_before_the_mode(agent):
    response = agent.post("/api/v1/recall", {"query": " ", "mode": "bogus"}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "invalid_query", "The `query` field must be a non-blank string.")
    assert InvalidQuery.code == "invalid_query"


def test_another_subjects_memories_never_reach_a_hybrid_recall(agent, corpus, client_for, make_key, tenant):
    other = client_for(make_key("agent", tenant, agent_id="agent-b"))
    assert _memory_items(recall(other, "deploy pipeline", mode="hybrid")) == []


def test_missing_key_is_401(client_for):
    response = client_for().post("/api/v1/recall", {"query": "x", "mode": "hybrid"}, format="json")
    assert response.status_code == 401
