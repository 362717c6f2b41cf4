"""One `openai` client per endpoint per process, shared by threads, keeping its connections alive: the embedding
path against the benchmarks' loopback server, through the real SDK."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bench import loopback_embedder
from bench.embed_overhead import loopback_tenant
from loopmem.embedding.embedders import HashingEmbedder, embed_texts
from loopmem.providers import clients


@pytest.fixture
def server() -> Iterator[loopback_embedder.LoopbackEmbedder]:
    with loopback_embedder.running() as running:
        yield running


def test_the_same_endpoint_key_and_timeout_get_the_same_client():
    first = clients.openai_client(base_url="http://127.0.0.1:9/v1", api_key="k", timeout=8.0, max_retries=0)
    again = clients.openai_client(base_url="http://127.0.0.1:9/v1", api_key="k", timeout=8.0, max_retries=0)
    other_key = clients.openai_client(base_url="http://127.0.0.1:9/v1", api_key="k2", timeout=8.0, max_retries=0)
    assert again is first
    assert other_key is not first


def test_threads_asking_at_once_share_one_client():
    made: list[object] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        barrier.wait()
        made.append(clients.openai_client(base_url="http://127.0.0.1:9/v2", api_key="k", timeout=1, max_retries=0))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 8
    assert len({id(client) for client in made}) == 1


@pytest.mark.django_db
def test_successive_embedding_calls_reuse_one_kept_alive_connection(server):
    tenant = loopback_tenant(base_url=server.url, slug="loopback")
    for n in range(10):
        vectors, model_id = embed_texts(tenant, [f"query {n}"])
        assert model_id == f"openai:{loopback_embedder.MODEL}"
        assert len(vectors) == 1
    assert server.calls == 10
    assert server.connections == 1


@pytest.mark.django_db
def test_the_loopback_vectors_are_the_hashing_providers_through_the_sdk(server):
    tenant = loopback_tenant(base_url=server.url, slug="loopback")
    [vector], _ = embed_texts(tenant, ["deploy the runner image"])
    [expected] = HashingEmbedder().embed(["deploy the runner image"])
    # The SDK asks for base64 float32: the same vector to float32 precision, at the model's native size.
    assert len(vector) == len(expected)
    assert vector == pytest.approx(expected, abs=1e-7)


@pytest.mark.django_db(transaction=True)
def test_concurrent_embedding_calls_from_threads_all_succeed_on_a_few_connections(server):
    tenant = loopback_tenant(base_url=server.url, slug="loopback-threads")
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for n in range(10):
                embed_texts(tenant, [f"thread {thread} query {n}"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert server.calls == 60
    assert server.connections <= 6  # one pool: at most a connection per concurrent caller, not one per call
