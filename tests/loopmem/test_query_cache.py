"""The query-embedding cache: a repeated query within a tenant and model reaches the provider once; another tenant,
another model, an expired entry or an earlier failure reach it again."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from loopmem.embedding import embedders
from loopmem.embedding.embedders import EmbeddingRequestFailed, QueryEmbedding, embed_query
from loopmem.embedding.query_cache import CacheKey, QueryEmbeddingCache
from loopmem.tenancy.services import tenant_set_provider


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(text: str = "q", *, tenant: uuid.UUID | None = None, model: str = "hashing:v1") -> CacheKey:
    return CacheKey(tenant or uuid.UUID(int=1), model, embedders.content_hash(text))


# --- The cache itself ----------------------------------------------------------------------------------------


def test_an_entry_is_returned_until_its_ttl_and_not_after():
    clock = Clock()
    cache = QueryEmbeddingCache(size=8, ttl_seconds=60, clock=clock)
    cache.put(key(), [0.5, 0.25])
    clock.now += 59.9
    assert cache.get(key()) == [0.5, 0.25]
    clock.now += 0.1
    assert cache.get(key()) is None
    assert len(cache) == 0


def test_the_least_recently_used_entry_leaves_first_when_full():
    cache = QueryEmbeddingCache(size=2, ttl_seconds=60, clock=Clock())
    cache.put(key("a"), [1.0])
    cache.put(key("b"), [2.0])
    assert cache.get(key("a")) == [1.0]  # now "b" is the least recently used
    cache.put(key("c"), [3.0])
    assert cache.get(key("b")) is None
    assert cache.get(key("a")) == [1.0]
    assert cache.get(key("c")) == [3.0]


def test_the_vector_comes_back_with_the_same_floats_and_as_a_new_list():
    cache = QueryEmbeddingCache(size=2, ttl_seconds=60, clock=Clock())
    vector = [0.1, 1 / 3, -2.0e-7]
    cache.put(key(), vector)
    first = cache.get(key())
    assert first == vector
    assert first is not None
    first[0] = 9.0
    assert cache.get(key()) == vector


@pytest.mark.parametrize(("size", "ttl"), [(0, 60), (8, 0)])
def test_a_size_or_ttl_of_zero_disables_the_cache(size, ttl):
    cache = QueryEmbeddingCache(size=size, ttl_seconds=ttl, clock=Clock())
    cache.put(key(), [1.0])
    assert cache.get(key()) is None
    assert len(cache) == 0


def test_hits_and_misses_are_counted():
    def sample(result: str) -> float:
        return REGISTRY.get_sample_value("loopmem_query_embedding_cache_total", {"result": result}) or 0.0

    hits, misses = sample("hit"), sample("miss")
    cache = QueryEmbeddingCache(size=8, ttl_seconds=60, clock=Clock())
    cache.get(key())
    cache.put(key(), [1.0])
    cache.get(key())
    cache.get(key())
    assert (sample("hit") - hits, sample("miss") - misses) == (2, 1)


# --- embed_query through the cache -----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_cache():
    # One cache per process: entries of another test must not answer for this one.
    with override_settings(QUERY_EMBEDDING_CACHE_SIZE=64, QUERY_EMBEDDING_CACHE_TTL_SECONDS=300):
        embedders._query_cache.cache_clear()
        yield
    embedders._query_cache.cache_clear()


def test_a_repeated_query_is_not_sent_to_the_provider_again(tenant, recording_embedder):
    first = embed_query(tenant, "where did we deploy")
    second = embed_query(tenant, "where did we deploy")
    assert recording_embedder.texts == ["where did we deploy"]
    assert isinstance(first, QueryEmbedding)
    assert second == first


def test_another_text_is_embedded(tenant, recording_embedder):
    embed_query(tenant, "where did we deploy")
    embed_query(tenant, "where did we deploy it")
    assert recording_embedder.texts == ["where did we deploy", "where did we deploy it"]


def test_another_tenant_asking_the_same_query_is_embedded_for_itself(tenant, other_tenant, recording_embedder):
    embed_query(tenant, "where did we deploy")
    embed_query(other_tenant, "where did we deploy")
    assert recording_embedder.texts == ["where did we deploy", "where did we deploy"]


def test_a_tenant_whose_model_changed_is_embedded_with_the_new_model(tenant, recording_embedder):
    before = embed_query(tenant, "where did we deploy")
    changed = tenant_set_provider(tenant=tenant, embedding="hashing", embedding_model="v2")
    after = embed_query(changed, "where did we deploy")
    assert recording_embedder.texts == ["where did we deploy", "where did we deploy"]
    assert isinstance(before, QueryEmbedding)
    assert isinstance(after, QueryEmbedding)
    assert (before.model_id, after.model_id) == ("hashing:v1", "hashing:v2")


def test_a_failed_embedding_is_not_cached(tenant, monkeypatch, recording_embedder):
    class Failing:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise EmbeddingRequestFailed("connection refused")

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Failing())
    assert isinstance(embed_query(tenant, "where did we deploy"), EmbeddingRequestFailed)
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: recording_embedder)
    assert isinstance(embed_query(tenant, "where did we deploy"), QueryEmbedding)
    assert recording_embedder.texts == ["where did we deploy"]


def test_an_expired_query_is_embedded_again(tenant, recording_embedder, monkeypatch):
    now = [5000.0]
    monkeypatch.setattr(embedders._query_cache(64, 300), "_clock", lambda: now[0])
    embed_query(tenant, "where did we deploy")
    now[0] += 299
    embed_query(tenant, "where did we deploy")
    now[0] += 2
    embed_query(tenant, "where did we deploy")
    assert recording_embedder.texts == ["where did we deploy", "where did we deploy"]


@override_settings(QUERY_EMBEDDING_CACHE_SIZE=0)
def test_with_the_cache_disabled_every_query_is_embedded(tenant, recording_embedder):
    embed_query(tenant, "where did we deploy")
    embed_query(tenant, "where did we deploy")
    assert recording_embedder.texts == ["where did we deploy", "where did we deploy"]
