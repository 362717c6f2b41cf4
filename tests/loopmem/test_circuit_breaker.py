"""The embedding circuit breaker: state in the real Redis, per (tenant, provider), failing open without Redis."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis
from django.core.cache import cache
from django.test import override_settings

from loopmem.embedding import embedders
from loopmem.embedding.embedders import (
    EmbedderSpec,
    EmbeddingCircuitOpen,
    EmbeddingFailure,
    EmbeddingProviderError,
    EmbeddingRequestFailed,
    EmbeddingTimeout,
    NoEmbeddingKey,
    embed_texts,
    is_transient,
)
from loopmem.providers import circuit_breaker
from loopmem.tenancy.services import tenant_set_provider

THRESHOLD = circuit_breaker.FAILURE_THRESHOLD


class FakeProvider:
    """The outside embedding service: counts the calls that reach it and fails while told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.failure: Callable[[], Exception] | None = None

    def __call__(self, spec: EmbedderSpec) -> FakeProvider:
        return self

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.failure is not None:
            raise self.failure()
        return [[1.0] + [0.0] * 383 for _ in texts]  # the hashing model's 384 dims


@pytest.fixture
def provider(monkeypatch, settings) -> FakeProvider:
    fake = FakeProvider()
    monkeypatch.setitem(embedders.PROVIDERS, "fake", fake)
    settings.EMBEDDING_PROVIDER = "fake"
    return fake


def fail_times(tenant, provider: FakeProvider, times: int, failure: Callable[[], Exception] = EmbeddingTimeout):
    """Call `times` times with the provider failing; every call must reach it and raise its own failure."""
    provider.failure = failure
    for _ in range(times):
        with pytest.raises(EmbeddingFailure) as caught:
            embed_texts(tenant, ["hello"])
        assert not isinstance(caught.value, EmbeddingCircuitOpen)
    provider.failure = None


def test_five_transient_failures_open_the_circuit_and_the_provider_is_not_called_again(tenant, provider):
    assert THRESHOLD == 5
    fail_times(tenant, provider, 5)
    assert provider.calls == 5
    for _ in range(3):
        with pytest.raises(EmbeddingCircuitOpen) as caught:
            embed_texts(tenant, ["hello"])
        assert caught.value.tag == "embedding_circuit_open"
    assert provider.calls == 5


def test_four_transient_failures_leave_the_circuit_closed(tenant, provider):
    fail_times(tenant, provider, 4)
    vectors, _ = embed_texts(tenant, ["hello"])
    assert vectors[0][:3] == [1.0, 0.0, 0.0]
    assert provider.calls == 5


def test_an_open_circuit_is_transient_and_says_when_to_retry(tenant, provider):
    fail_times(tenant, provider, 5)
    with pytest.raises(EmbeddingCircuitOpen) as caught:
        embed_texts(tenant, ["hello"])
    assert is_transient(caught.value)
    assert caught.value.retry_after is not None
    assert 0 < caught.value.retry_after <= circuit_breaker.OPEN_SECONDS


@pytest.mark.parametrize(
    "failure",
    [
        EmbeddingTimeout,
        EmbeddingRequestFailed,
        lambda: EmbeddingProviderError(503),
        lambda: EmbeddingProviderError(429, retry_after=1.0),
        lambda: RuntimeError("provider bug"),  # becomes embedding_crash
    ],
    ids=["timeout", "request_failed", "http_503", "http_429", "crash"],
)
def test_every_kind_of_transient_failure_counts_towards_opening(tenant, provider, failure):
    fail_times(tenant, provider, 5, failure)
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])
    assert provider.calls == 5


@pytest.mark.parametrize(
    "failure",
    [NoEmbeddingKey, lambda: EmbeddingProviderError(401), lambda: EmbeddingProviderError(400)],
    ids=["no_key", "http_401", "http_400"],
)
def test_permanent_failures_never_open_the_circuit(tenant, provider, failure):
    fail_times(tenant, provider, 10, failure)
    assert provider.calls == 10
    embed_texts(tenant, ["hello"])
    assert provider.calls == 11


@override_settings(EMBEDDING_API_KEY="")
def test_a_real_missing_openai_key_never_opens_the_circuit(tenant):
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_base_url="http://127.0.0.1:9/v1")
    for _ in range(10):
        with pytest.raises(EmbeddingFailure) as caught:
            embed_texts(tenant, ["hello"])
        assert caught.value.tag == "no_embedding_key"


def test_a_success_resets_the_failure_count(tenant, provider):
    fail_times(tenant, provider, 4)
    embed_texts(tenant, ["hello"])
    # Without the reset the first of these would be the fifth failure and the rest would fail fast.
    fail_times(tenant, provider, 4)
    embed_texts(tenant, ["hello"])
    assert provider.calls == 10


def test_another_tenant_is_unaffected_by_an_open_circuit(tenant, other_tenant, provider):
    fail_times(tenant, provider, 5)
    vectors, _ = embed_texts(other_tenant, ["hello"])
    assert len(vectors) == 1
    assert provider.calls == 6
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])


def test_another_provider_of_the_same_tenant_is_unaffected(tenant, provider):
    fail_times(tenant, provider, 5)
    tenant_set_provider(tenant=tenant, embedding="hashing")
    _, model_id = embed_texts(tenant, ["hello"])
    assert model_id == "hashing:v1"
    tenant_set_provider(tenant=tenant, embedding="")
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])


def test_the_open_state_lives_in_the_cache_not_in_the_process(tenant, provider):
    fail_times(tenant, provider, 5)
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])
    cache.clear()
    embed_texts(tenant, ["hello"])
    assert provider.calls == 6


def test_the_circuit_closes_after_open_seconds_and_counts_from_zero_again(tenant, provider, monkeypatch):
    monkeypatch.setattr(circuit_breaker, "OPEN_SECONDS", 1)
    fail_times(tenant, provider, 5)
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])
    time.sleep(1.1)
    fail_times(tenant, provider, 4)
    embed_texts(tenant, ["hello"])
    assert provider.calls == 10


def test_failures_older_than_the_window_are_forgotten(tenant, provider, monkeypatch):
    monkeypatch.setattr(circuit_breaker, "FAILURE_WINDOW_SECONDS", 1)
    fail_times(tenant, provider, 4)
    time.sleep(1.1)
    fail_times(tenant, provider, 4)
    embed_texts(tenant, ["hello"])
    assert provider.calls == 9


def open_elsewhere(tenant) -> None:
    """Another process opened the circuit: the state is in Redis, this process has not read it."""
    cache.set(
        f"breaker:{embedders.breaker_key(tenant.id, embedders.spec_for(tenant))}:open_until", time.time() + 30, 30
    )


def test_a_circuit_seen_closed_is_trusted_until_the_recheck_interval_passes(tenant, provider, monkeypatch):
    monkeypatch.setattr(circuit_breaker, "CLOSED_RECHECK_SECONDS", 3600)
    embed_texts(tenant, ["hello"])
    open_elsewhere(tenant)
    embed_texts(tenant, ["hello"])  # seen closed a moment ago: no Redis read, the call goes through
    assert provider.calls == 2
    monkeypatch.setattr(circuit_breaker, "CLOSED_RECHECK_SECONDS", 0)
    with pytest.raises(EmbeddingCircuitOpen):
        embed_texts(tenant, ["hello"])
    assert provider.calls == 2


def test_a_success_resets_failures_another_process_counted_once_it_has_read_them(tenant, provider, monkeypatch):
    monkeypatch.setattr(circuit_breaker, "CLOSED_RECHECK_SECONDS", 0)
    cache.set(f"breaker:{embedders.breaker_key(tenant.id, embedders.spec_for(tenant))}:failures", THRESHOLD - 1, 60)
    embed_texts(tenant, ["hello"])
    fail_times(tenant, provider, THRESHOLD - 1)
    embed_texts(tenant, ["hello"])
    assert provider.calls == 1 + (THRESHOLD - 1) + 1


DEAD_REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "unix:///nonexistent/loopmem-test-redis.sock",
        "OPTIONS": {"socket_connect_timeout": 0.1, "socket_timeout": 0.1},
    }
}


def test_without_redis_the_breaker_stays_closed_and_calls_go_through(tenant, provider):
    with override_settings(CACHES=DEAD_REDIS):
        with pytest.raises(redis.ConnectionError):
            cache.get("anything")
        fail_times(tenant, provider, 10)
        vectors, _ = embed_texts(tenant, ["hello"])
    assert len(vectors) == 1
    assert provider.calls == 11


def test_without_redis_the_breaker_methods_never_raise():
    breaker = circuit_breaker.Breaker("tenant:provider")
    with override_settings(CACHES=DEAD_REDIS):
        for _ in range(THRESHOLD + 1):
            breaker.record_failure()
        assert breaker.open_for() is None
        breaker.record_success()


def test_a_failing_reembed_target_does_not_open_the_circuit_of_the_model_reads_use(tenant, provider):
    # Same provider, another model (or endpoint): a reembed's target has its own circuit.
    target = embedders.EmbedderSpec(provider="fake", model="the-next-model")
    provider.failure = EmbeddingTimeout
    for _ in range(THRESHOLD):
        with pytest.raises(EmbeddingTimeout):
            embedders.embed_with(target, tenant, ["hello"])
    with pytest.raises(EmbeddingCircuitOpen):
        embedders.embed_with(target, tenant, ["hello"])
    provider.failure = None
    embed_texts(tenant, ["hello"])  # the live model's circuit is still closed: the call reaches the provider
    assert provider.calls == THRESHOLD + 1
