"""POST /api/v1/memory/recall (reference §2.2, §4.3, §4.4; DESIGN §5)."""

from __future__ import annotations

import uuid

import pytest

from loopmem.embedding import embedders
from loopmem.errors import InvalidProjectId, InvalidQuery
from loopmem.tenancy.services import tenant_halt
from memory.models import Memory
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

pytestmark = heavy_db


def _texts(body):
    return [hit["memory"]["text"] for hit in body["data"]]


def test_semantic_recall_ranks_by_meaning_with_scores(agent):
    for text in ("the invoice totals for march", "my cat likes fish", "cat food brand is purrfect"):
        remember(agent, text)
    embed_pending()
    body = recall(agent, "what does my cat eat", limit=2)
    assert _texts(body) == ["my cat likes fish", "cat food brand is purrfect"]
    scores = [hit["score"] for hit in body["data"]]
    assert all(isinstance(s, float) and 0.0 < s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert body["meta"] == {
        "total_count": 2,
        "fallback": False,
        "reason": None,
        "underfilled": False,
        "recall_path": "exact",
        "outcome": "success",
    }


def test_underfilled_when_the_scope_holds_fewer_than_k(agent):
    remember(agent, "only one")
    embed_pending()
    meta = recall(agent, "one", limit=5)["meta"]
    assert (meta["total_count"], meta["underfilled"]) == (1, True)


def test_a_healthy_empty_scope_is_not_a_fallback(agent):
    meta = recall(agent, "anything")["meta"]
    assert meta == {
        "total_count": 0,
        "fallback": False,
        "reason": None,
        "underfilled": True,
        "recall_path": "exact",
        "outcome": "empty",
    }


def test_unembedded_rows_are_not_in_semantic_results(agent):
    remember(agent, "embedded cat")
    embed_pending()
    remember(agent, "pending cat")
    assert _texts(recall(agent, "cat")) == ["embedded cat"]


def test_vectors_of_another_model_are_never_compared(agent, tenant):
    remember(agent, "cat one")
    embed_pending()
    Memory.objects.update(embedding_model="local:all-MiniLM-L6-v2-int8")
    assert recall(agent, "cat")["data"] == []


def test_superseded_rows_are_hidden_unless_asked_for(agent):
    old = remember(agent, "cat eats fish")
    new = remember(agent, "cat eats chicken now")
    embed_pending()
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    assert _texts(recall(agent, "cat eats")) == ["cat eats chicken now"]
    body = recall(agent, "cat eats fish", include_superseded="true")
    assert set(_texts(body)) == {"cat eats fish", "cat eats chicken now"}
    assert "ann_iterative_scan" not in body["meta"]
    assert body["meta"]["recall_path"] == "exact"
    # Only true / "true" switch it on.
    assert _texts(recall(agent, "cat", include_superseded="yes")) == ["cat eats chicken now"]


@pytest.mark.parametrize(("limit", "k"), [(None, 10), (0, 1), (-5, 1), (1000, 100), ("3abc", 3), ("abc", 10)])
def test_limit_is_clamped_and_read_leniently(agent, limit, k):
    for n in range(12):
        remember(agent, f"note number {n}")
    embed_pending()
    body = recall(agent, "note", **({} if limit is None else {"limit": limit}))
    assert body["meta"]["total_count"] == min(k, 12)


def test_project_partition_global_plus_the_named_project(agent, tenant):
    alpha, beta = ProjectFactory.create(tenant=tenant), ProjectFactory.create(tenant=tenant)
    remember(agent, "deploy global")
    remember(agent, "deploy alpha", project_id=str(alpha.id))
    remember(agent, "deploy beta", project_id=str(beta.id))
    embed_pending()
    assert set(_texts(recall(agent, "deploy"))) == {"deploy global"}
    assert set(_texts(recall(agent, "deploy", project_id=str(alpha.id)))) == {"deploy global", "deploy alpha"}
    # A well-formed unknown or foreign project on a read is just an empty partition.
    assert set(_texts(recall(agent, "deploy", project_id=str(uuid.uuid4())))) == {"deploy global"}
    assert set(_texts(recall(agent, "deploy", project_id="  "))) == {"deploy global"}


def test_malformed_project_id_is_422(agent):
    response = agent.post("/api/v1/memory/recall", {"query": "x", "project_id": "nope"}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


@pytest.mark.parametrize("query", [{"a": 1}, ["a"], 42, True])
def test_a_non_string_query_is_422(agent, query):
    response = agent.post("/api/v1/memory/recall", {"query": query}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "invalid_query", InvalidQuery.default_message)


def test_a_missing_query_is_the_empty_query(agent):
    remember(agent, "something")
    embed_pending()
    assert agent.post("/api/v1/memory/recall", {}, format="json").json()["meta"]["total_count"] == 1


class Unavailable:
    def embed(self, texts):
        raise embedders.EmbeddingTimeout()


@pytest.fixture
def embedding_down(monkeypatch):
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Unavailable())


def test_fallback_matches_substrings_newest_first_without_scores(agent, embedding_down):
    remember(agent, "Cat likes fish")
    remember(agent, "dog likes bones")
    remember(agent, "the CAT sleeps")
    body = recall(agent, "cat")
    assert _texts(body) == ["the CAT sleeps", "Cat likes fish"]
    assert [hit["score"] for hit in body["data"]] == [None, None]
    assert body["meta"] == {
        "total_count": 2,
        "fallback": True,
        "reason": "embedding_timeout",
        "underfilled": True,
        "outcome": "fallback",
    }


def test_fallback_escapes_like_wildcards(agent, embedding_down):
    remember(agent, "100% sure")
    remember(agent, "1000 items")
    remember(agent, "snake_case name")
    remember(agent, "snakeXcase name")
    assert _texts(recall(agent, "100%")) == ["100% sure"]
    assert _texts(recall(agent, "snake_case")) == ["snake_case name"]


def test_fallback_with_an_empty_query_matches_everything_and_an_empty_scope_is_still_fallback(agent, embedding_down):
    assert recall(agent, "x")["meta"]["fallback"] is True
    remember(agent, "a")
    remember(agent, "b")
    assert recall(agent, "")["meta"]["total_count"] == 2


def test_fallback_respects_project_and_supersede(agent, tenant, embedding_down):
    alpha = ProjectFactory.create(tenant=tenant)
    old = remember(agent, "cat old")
    new = remember(agent, "cat new")
    remember(agent, "cat alpha", project_id=str(alpha.id))
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    assert _texts(recall(agent, "cat")) == ["cat new"]
    assert _texts(recall(agent, "cat", project_id=str(alpha.id))) == ["cat alpha", "cat new"]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (embedders.NoEmbeddingKey(), "no_embedding_key"),
        (embedders.EmbeddingCircuitOpen(), "embedding_circuit_open"),
        (embedders.EmbeddingRequestFailed(), "embedding_request_failed"),
        (embedders.EmbeddingProviderError(503), "embedding_provider_error_503"),
    ],
)
def test_each_failure_reports_its_reason_tag(agent, monkeypatch, failure, reason):
    class Failing:
        def embed(self, texts):
            raise failure

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Failing())
    assert recall(agent, "x")["meta"]["reason"] == reason


def test_a_crashing_provider_is_embedding_crash(agent, monkeypatch):
    class Crashing:
        def embed(self, texts):
            raise ZeroDivisionError

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Crashing())
    assert recall(agent, "x")["meta"]["reason"] == "embedding_crash"


def test_a_query_vector_of_another_size_than_the_model_makes_is_an_error_outcome(agent, monkeypatch):
    monkeypatch.setitem(embedders.NATIVE_DIMENSIONS, "hashing", 8)
    meta = recall(agent, "x")["meta"]
    assert meta == {
        "total_count": 0,
        "fallback": True,
        "reason": "embedding_dimension_mismatch",
        "underfilled": True,
        "outcome": "error",
    }


def test_recall_goes_on_during_a_custody_halt(agent, tenant):
    tenant_halt(tenant=tenant)
    assert agent.post("/api/v1/memory/recall", {"query": "x"}, format="json").status_code == 200


def test_missing_key_is_401(client_for):
    assert client_for().post("/api/v1/memory/recall", {"query": "x"}, format="json").status_code == 401
