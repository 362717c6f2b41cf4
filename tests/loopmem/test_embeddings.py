"""The embedding layer: the hashing and MiniLM embedders, native sizes and model ids, per-tenant specs, and the real
OpenAI SDK against a loopback server, with each failure's reason tag."""

from __future__ import annotations

import base64
import email.utils
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from loopmem.embedding import embedders
from loopmem.embedding.embedders import (
    DEFAULT_MODELS,
    EMBEDDING_MAX_CHARS,
    EmbedderSpec,
    EmbeddingCrash,
    EmbeddingDimensionMismatch,
    EmbeddingProviderError,
    EmbeddingRequestFailed,
    EmbeddingTimeout,
    HashingEmbedder,
    MiniLMEmbedder,
    NoEmbeddingKey,
    content_hash,
    embed_texts,
    is_transient,
    spec_for,
)
from loopmem.tenancy.services import tenant_set_provider


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- HashingEmbedder ---------------------------------------------------------------------------------------


def test_hashing_gives_the_same_vector_for_the_same_text_in_any_instance():
    first = HashingEmbedder().embed(["the deploy failed on friday"])
    second = HashingEmbedder().embed(["the deploy failed on friday"])
    assert first == second


def test_hashing_is_stable_across_processes_not_seeded_by_python_hash():
    # blake2b, not hash(): the same words land in the same buckets in every process and every release.
    (vector,) = HashingEmbedder().embed(["hello world"])
    nonzero = {index: value for index, value in enumerate(vector) if value}
    assert nonzero == {216: pytest.approx(1 / math.sqrt(2)), 295: pytest.approx(1 / math.sqrt(2))}


def test_hashing_ignores_case():
    assert HashingEmbedder().embed(["Hello World"]) == HashingEmbedder().embed(["hello world"])


@pytest.mark.parametrize("text", ["a", "the cat sat on the mat", "Ünïcödé wörds too", "x " * 5000])
def test_hashing_vectors_have_384_dimensions_and_unit_length(text):
    (vector,) = HashingEmbedder().embed([text])
    assert len(vector) == 384
    assert np.linalg.norm(vector) == pytest.approx(1.0)


def test_hashing_puts_texts_sharing_words_closer_than_unrelated_texts():
    cat_mat, cat_rug, invoices = HashingEmbedder().embed(
        ["the cat sat on the mat", "the cat sat on the rug", "quarterly invoice totals"]
    )
    assert cosine(cat_mat, cat_rug) > 0.8
    assert cosine(cat_mat, cat_rug) > cosine(cat_mat, invoices) + 0.5


@pytest.mark.parametrize("text", ["", "   ", "?!… —"])
def test_a_text_without_words_gets_a_finite_unit_vector_not_zeros(text):
    (vector,) = HashingEmbedder().embed([text])
    assert all(math.isfinite(x) for x in vector)
    assert np.linalg.norm(vector) == pytest.approx(1.0)


def test_words_whose_hashes_cancel_out_still_give_a_unit_vector():
    embedder = HashingEmbedder()
    words = [f"w{n}" for n in range(2000)]
    seen: dict[tuple[float, ...], str] = {}
    pair = None
    for word, vector in zip(words, embedder.embed(words), strict=True):
        opposite = tuple(-x for x in vector)
        if opposite in seen:
            pair = (seen[opposite], word)
            break
        seen[tuple(vector)] = word
    assert pair is not None, "2000 words over 384 signed buckets always contain an opposite pair"
    (vector,) = embedder.embed([" ".join(pair)])
    assert np.linalg.norm(vector) == pytest.approx(1.0)


@pytest.mark.django_db
def test_pgvector_gives_the_empty_text_a_real_cosine_distance_where_a_zero_vector_gives_nan():
    empty, hello = HashingEmbedder().embed(["", "hello"])
    zero = [0.0] * len(hello)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::halfvec <=> %s::halfvec, %s::halfvec <=> %s::halfvec",
            [str(empty), str(hello), str(zero), str(hello)],
        )
        empty_distance, zero_distance = cursor.fetchone()
    assert math.isfinite(empty_distance)
    assert math.isnan(zero_distance)


# --- MiniLMEmbedder: the real int8 ONNX model and the committed tokenizer ---------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    # The process-wide instance: loading the model once serves these tests and the `local` provider's.
    return embedders._minilm()


def test_minilm_gives_384_dimension_unit_vectors(minilm):
    vectors = minilm.embed(["a cat sat on the mat", "quarterly invoice totals", ""])
    assert [len(v) for v in vectors] == [384, 384, 384]
    for vector in vectors:
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_minilm_places_a_paraphrase_closer_than_an_unrelated_text(minilm):
    cat, kitten, invoices = minilm.embed(
        ["a cat sat on the mat", "a kitten rested on the rug", "quarterly invoice totals"]
    )
    assert cosine(cat, kitten) > 0.4
    assert cosine(cat, kitten) > cosine(cat, invoices) + 0.3


def test_minilm_batches_give_the_same_vectors_as_one_by_one(minilm, monkeypatch):
    texts = [
        "short",
        "a much longer sentence about deploying the billing service on friday afternoon",
        "a cat sat on the mat",
        "",
        "quarterly invoice totals",
    ]
    one_by_one = np.array([minilm.embed([text])[0] for text in texts])
    in_one_batch = np.array(minilm.embed(texts))
    # Batches of 2, 2 and 1: padding differs per batch and the chunks must be stitched back in order.
    monkeypatch.setattr(minilm, "batch_size", 2)
    in_small_batches = np.array(minilm.embed(texts))
    np.testing.assert_allclose(in_one_batch, one_by_one, atol=1e-5)
    np.testing.assert_allclose(in_small_batches, one_by_one, atol=1e-5)


@pytest.fixture
def widths(minilm, monkeypatch) -> list[tuple[int, int]]:
    """The (texts, padded tokens) shape of every batch the model runs while the test runs."""
    shapes: list[tuple[int, int]] = []
    session = minilm._session

    class Recording:
        def run(self, outputs, feeds):
            shapes.append(feeds["input_ids"].shape)
            return session.run(outputs, feeds)

    monkeypatch.setattr(minilm, "_session", Recording())
    return shapes


def test_minilm_pads_each_batch_to_its_own_longest_text_and_batches_texts_of_similar_length(
    minilm, monkeypatch, widths
):
    # The model's time grows with the padded width: a short text padded to a long neighbour's length (or to the
    # committed tokenizer's 128) costs as much as the long one (docs/performance.md, "Local embedder").
    monkeypatch.setattr(minilm, "batch_size", 2)
    long_text = "a much longer sentence about deploying the billing service on friday afternoon " * 3
    minilm.embed(["short", long_text, "a cat", long_text + "again"])
    assert [rows for rows, _ in widths] == [2, 2]
    (_, short_width), (_, long_width) = widths
    assert short_width <= 5  # [CLS] a cat [SEP]: not 128, not the long texts' width
    assert long_width > 40


def test_minilm_caps_a_batch_at_its_padded_tokens(minilm, monkeypatch, widths):
    monkeypatch.setattr(minilm, "batch_tokens", 24)
    texts = [f"note {n} about the billing service" for n in range(5)]  # 8 tokens each, [CLS] and [SEP] included
    vectors = minilm.embed(texts)
    assert [rows for rows, _ in widths] == [3, 2]  # 3 x 8 fits in 24 padded tokens, a fourth would not
    one_by_one = [minilm.embed([text])[0] for text in texts]
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)


def test_minilm_truncates_a_long_text_to_its_first_256_tokens(minilm):
    long_text = "memory " * 600
    truncated, with_tail = minilm.embed([long_text, long_text + "quarterly invoice totals"])
    assert len(truncated) == 384
    np.testing.assert_allclose(truncated, with_tail, atol=1e-6)


@pytest.mark.usefixtures("minilm")
def test_the_local_provider_embeds_with_minilm_at_its_native_384_dimensions(tenant):
    tenant_set_provider(tenant=tenant, embedding="local")
    vectors, model_id = embed_texts(tenant, ["a cat sat on the mat", "quarterly invoice totals"])
    assert model_id == "local:all-MiniLM-L6-v2-int8"
    assert [len(v) for v in vectors] == [384, 384]
    assert vectors[0] == pytest.approx(embedders._minilm().embed(["a cat sat on the mat"])[0], abs=1e-6)


# --- embed_texts, dimensions, content_hash ------------------------------------------------------------------


def test_embed_texts_returns_the_models_native_vectors_unpadded_and_names_the_model(tenant):
    vectors, model_id = embed_texts(tenant, ["first memory", "second memory"])
    assert model_id == "hashing:v1"
    assert settings.EMBEDDING_DIMENSIONS == 1536  # asked of sizeable models only; the hashing model makes 384
    assert vectors == HashingEmbedder().embed(["first memory", "second memory"])
    assert [len(v) for v in vectors] == [384, 384]
    (a, b), _ = embed_texts(tenant, ["the cat sat on the mat", "the cat sat on the rug"])
    assert cosine(a, b) < 1.0


def test_embed_texts_of_nothing_is_nothing(tenant):
    assert embed_texts(tenant, []) == ([], "hashing:v1")


def test_only_the_first_32000_characters_are_embedded(tenant):
    head = "alpha " * (EMBEDDING_MAX_CHARS // 6) + "x" * (EMBEDDING_MAX_CHARS % 6)
    assert len(head) == EMBEDDING_MAX_CHARS
    (with_tail, just_head), _ = embed_texts(tenant, [head + " omega gamma delta", head])
    assert with_tail == just_head
    assert content_hash(head + " omega gamma delta") == content_hash(head)
    assert content_hash(head) != content_hash(head[:-1])


def test_content_hash_is_the_lowercase_sha256_hex_of_the_text():
    assert content_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_a_provider_answering_with_another_size_than_its_model_makes_is_refused(tenant, monkeypatch):
    monkeypatch.setitem(embedders.NATIVE_DIMENSIONS, "hashing", 100)
    with pytest.raises(EmbeddingDimensionMismatch) as caught:
        embed_texts(tenant, ["not the size this model makes"])
    assert caught.value.tag == "embedding_dimension_mismatch"
    assert str(caught.value) == "dimension mismatch: hashing:v1 makes 100, got 384"
    assert not is_transient(caught.value)


def test_vectors_of_two_sizes_in_one_answer_or_beyond_pgvector_are_refused():
    spec = embedders.EmbedderSpec(provider="openai", model="bge-small")  # a size the provider alone knows
    embedders.check_dimensions(spec, [[0.1] * 768, [0.2] * 768])
    with pytest.raises(EmbeddingDimensionMismatch, match=r"sizes \[384, 768\]"):
        embedders.check_dimensions(spec, [[0.1] * 384, [0.2] * 768])
    with pytest.raises(EmbeddingDimensionMismatch):
        embedders.check_dimensions(spec, [[0.1] * 16_001])


@pytest.mark.parametrize(
    ("model", "setting", "asked"),
    [("text-embedding-3-small", 1536, 1536), ("text-embedding-3-small", 3072, 1536),
     ("text-embedding-3-large", 3072, 3072), ("text-embedding-3-large", 256, 256), ("bge-small", 1536, None)],
)  # fmt: skip
def test_the_dimensions_setting_is_only_what_sizeable_models_are_asked_for(model, setting, asked):
    with override_settings(EMBEDDING_DIMENSIONS=setting):
        assert embedders.requested_dimensions(model) == asked


# --- spec_for: tenant overrides over deployment defaults ------------------------------------------------------

DEPLOYMENT = {
    "EMBEDDING_PROVIDER": "openai",
    "EMBEDDING_MODEL": "text-embedding-3-large",
    "EMBEDDING_BASE_URL": "https://deployment.example/v1",
    "EMBEDDING_API_KEY": "sk-deployment",
}


@override_settings(**DEPLOYMENT)
def test_a_tenant_without_overrides_uses_the_deployment_settings(tenant):
    assert spec_for(tenant) == EmbedderSpec(
        provider="openai",
        model="text-embedding-3-large",
        base_url="https://deployment.example/v1",
        api_key="sk-deployment",
    )


@override_settings(EMBEDDING_PROVIDER="openai", EMBEDDING_MODEL="", EMBEDDING_BASE_URL="", EMBEDDING_API_KEY="")
def test_without_any_model_setting_the_provider_default_model_is_used(tenant):
    spec = spec_for(tenant)
    assert (spec.model, spec.model_id) == ("text-embedding-3-small", "openai:text-embedding-3-small")


@override_settings(**DEPLOYMENT)
def test_a_tenant_model_and_key_override_the_deployment_on_the_default_provider(tenant):
    tenant_set_provider(tenant=tenant, embedding_model="text-embedding-3-small", embedding_api_key="sk-tenant")
    assert spec_for(tenant) == EmbedderSpec(
        provider="openai",
        model="text-embedding-3-small",
        base_url="https://deployment.example/v1",
        api_key="sk-tenant",
    )


@override_settings(**DEPLOYMENT)
def test_a_tenant_base_url_overrides_the_deployment_base_url(tenant):
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_base_url="http://tenant.example/v1")
    assert spec_for(tenant).base_url == "http://tenant.example/v1"


@override_settings(**DEPLOYMENT)
def test_a_tenant_on_another_provider_does_not_inherit_the_deployment_model_or_base_url(tenant):
    tenant_set_provider(tenant=tenant, embedding="hashing")
    spec = spec_for(tenant)
    assert (spec.provider, spec.model, spec.base_url) == ("hashing", DEFAULT_MODELS["hashing"], "")
    assert embed_texts(tenant, ["hello"])[1] == "hashing:v1"


@override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_MODEL="my-local-model", EMBEDDING_BASE_URL="")
def test_a_tenant_choosing_openai_gets_the_openai_default_model_not_the_deployment_model(tenant):
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url="http://tenant.example/v1", embedding_api_key="sk-t"
    )
    assert spec_for(tenant) == EmbedderSpec(
        provider="openai", model="text-embedding-3-small", base_url="http://tenant.example/v1", api_key="sk-t"
    )


def test_clearing_a_tenant_override_falls_back_to_the_deployment_again(tenant):
    tenant_set_provider(tenant=tenant, embedding="local", embedding_model="custom")
    assert spec_for(tenant).model_id == "local:custom"
    tenant_set_provider(tenant=tenant, embedding="", embedding_model="")
    assert spec_for(tenant).model_id == "hashing:v1"


# --- The OpenAI provider: the real SDK against a loopback server ---------------------------------------------


@dataclass
class FakeOpenAI:
    """A loopback OpenAI-compatible `/v1/embeddings`: records each request, answers as the test sets it up."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    shuffled: bool = False
    stalled: bool = False
    released: threading.Event = field(default_factory=threading.Event)

    def vector(self, index: int, dimensions: int) -> list[float]:
        # Exactly representable in float32, so the base64 wire format round-trips them unchanged.
        return [float(index + 1), *([0.25] * (dimensions - 1))]


class _FakeOpenAIServer(ThreadingHTTPServer):
    fake: FakeOpenAI


class _FakeOpenAIHandler(BaseHTTPRequestHandler):
    server: _FakeOpenAIServer

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake.requests.append({"path": self.path, "authorization": self.headers["Authorization"], "body": body})
        if fake.stalled:
            fake.released.wait(timeout=5)  # bounded: the fixture releases it at teardown
            return
        if fake.status != 200:
            error = {"message": f"fake error {fake.status}", "type": "invalid_request_error", "param": None}
            self._reply(fake.status, {"error": {**error, "code": None}})
            return
        inputs = body["input"]
        data = []
        for index in range(len(inputs)):
            vector = fake.vector(index, body.get("dimensions", 3))
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(np.array(vector, dtype=np.float32).tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        if fake.shuffled:
            data = data[1::2] + data[0::2]
        usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
        self._reply(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in self.server.fake.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = _FakeOpenAIServer(("127.0.0.1", 0), _FakeOpenAIHandler)
    server.fake = FakeOpenAI(url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.fake
    server.fake.released.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def openai_tenant(tenant, fake_openai):
    return tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=fake_openai.url, embedding_api_key="sk-tenant-key"
    )


def test_openai_sends_the_model_the_key_and_the_dimensions_for_text_embedding_3(openai_tenant, fake_openai):
    vectors, model_id = embed_texts(openai_tenant, ["first", "second"])
    assert model_id == "openai:text-embedding-3-small"
    [request] = fake_openai.requests
    assert request["path"] == "/v1/embeddings"
    assert request["authorization"] == "Bearer sk-tenant-key"
    assert request["body"]["model"] == "text-embedding-3-small"
    assert request["body"]["input"] == ["first", "second"]
    assert request["body"]["dimensions"] == 1536
    assert vectors == [fake_openai.vector(0, 1536), fake_openai.vector(1, 1536)]


def test_openai_vectors_come_back_in_index_order_when_the_server_shuffles_them(openai_tenant, fake_openai):
    fake_openai.shuffled = True
    vectors, _ = embed_texts(openai_tenant, ["one", "two", "three", "four", "five"])
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_openai_models_outside_text_embedding_3_get_no_dimensions_and_keep_their_size(openai_tenant, fake_openai):
    tenant_set_provider(tenant=openai_tenant, embedding_model="nomic-embed-text")
    vectors, model_id = embed_texts(openai_tenant, ["hello"])
    assert model_id == "openai:nomic-embed-text"
    [request] = fake_openai.requests
    assert request["body"]["model"] == "nomic-embed-text"
    assert "dimensions" not in request["body"]
    assert vectors == [[1.0, 0.25, 0.25]]


@override_settings(EMBEDDING_API_KEY="")
def test_openai_without_an_api_key_fails_before_any_request(tenant, fake_openai):
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_base_url=fake_openai.url)
    with pytest.raises(NoEmbeddingKey) as caught:
        embed_texts(tenant, ["hello"])
    assert caught.value.tag == "no_embedding_key"
    assert not is_transient(caught.value)
    assert fake_openai.requests == []


def test_a_tenant_on_the_deployment_endpoint_uses_the_deployment_key(tenant, fake_openai):
    with override_settings(
        EMBEDDING_PROVIDER="openai", EMBEDDING_BASE_URL=fake_openai.url, EMBEDDING_API_KEY="sk-deployment"
    ):
        embed_texts(tenant, ["hello"])
    assert [r["authorization"] for r in fake_openai.requests] == ["Bearer sk-deployment"]


@override_settings(EMBEDDING_API_KEY="sk-deployment")
def test_the_deployment_key_is_never_sent_to_a_tenants_own_endpoint(tenant, fake_openai):
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_base_url=fake_openai.url)
    with pytest.raises(NoEmbeddingKey):
        embed_texts(tenant, ["hello"])
    assert fake_openai.requests == []


@pytest.mark.parametrize(
    ("status", "transient"),
    [(400, False), (401, False), (403, False), (404, False), (408, True), (429, True), (500, True), (503, True)],
)
def test_openai_http_errors_carry_their_status_in_the_tag(openai_tenant, fake_openai, status, transient):
    fake_openai.status = status
    with pytest.raises(EmbeddingProviderError) as caught:
        embed_texts(openai_tenant, ["hello"])
    assert caught.value.status == status
    assert caught.value.tag == f"embedding_provider_error_{status}"
    assert is_transient(caught.value) is transient
    assert caught.value.retry_after is None
    assert len(fake_openai.requests) == 1, "the SDK must not retry on its own"


def test_openai_429_retry_after_seconds_are_parsed(openai_tenant, fake_openai):
    fake_openai.status = 429
    fake_openai.headers = {"retry-after": "7"}
    with pytest.raises(EmbeddingProviderError) as caught:
        embed_texts(openai_tenant, ["hello"])
    assert caught.value.tag == "embedding_provider_error_429"
    assert is_transient(caught.value)
    assert caught.value.retry_after == 7.0


def test_openai_429_with_an_http_date_retry_after_is_still_a_429(openai_tenant, fake_openai):
    # RFC 9110 allows Retry-After as an HTTP-date as well as seconds.
    fake_openai.status = 429
    fake_openai.headers = {"retry-after": email.utils.formatdate(time.time() + 120, usegmt=True)}
    with pytest.raises(EmbeddingProviderError) as caught:
        embed_texts(openai_tenant, ["hello"])
    assert caught.value.tag == "embedding_provider_error_429"
    assert caught.value.retry_after is not None
    assert 100 < caught.value.retry_after <= 120


def test_openai_429_with_a_garbled_retry_after_is_still_a_429(openai_tenant, fake_openai):
    fake_openai.status = 429
    fake_openai.headers = {"retry-after": "soon"}
    with pytest.raises(EmbeddingProviderError) as caught:
        embed_texts(openai_tenant, ["hello"])
    assert caught.value.tag == "embedding_provider_error_429"
    assert caught.value.retry_after is None


def test_a_server_slower_than_the_timeout_is_an_embedding_timeout(openai_tenant, fake_openai, monkeypatch):
    monkeypatch.setattr(embedders, "EMBEDDING_TIMEOUT_SECONDS", 0.3)
    fake_openai.stalled = True
    with pytest.raises(EmbeddingTimeout) as caught:
        embed_texts(openai_tenant, ["hello"])
    assert caught.value.tag == "embedding_timeout"
    assert is_transient(caught.value)
    assert len(fake_openai.requests) == 1


def test_a_closed_port_is_a_failed_request(tenant):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    tenant_set_provider(
        tenant=tenant,
        embedding="openai",
        embedding_base_url=f"http://127.0.0.1:{closed_port}/v1",
        embedding_api_key="k",
    )
    with pytest.raises(EmbeddingRequestFailed) as caught:
        embed_texts(tenant, ["hello"])
    assert caught.value.tag == "embedding_request_failed"
    assert is_transient(caught.value)


class _BrokenProvider:
    """An outside provider with a bug of its own."""

    def __init__(self, spec: EmbedderSpec) -> None:
        pass

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise KeyError("data")


@override_settings(EMBEDDING_PROVIDER="broken")
def test_an_unexpected_provider_exception_becomes_embedding_crash(tenant, monkeypatch, caplog):
    monkeypatch.setitem(embedders.PROVIDERS, "broken", _BrokenProvider)
    with pytest.raises(EmbeddingCrash) as caught:
        embed_texts(tenant, ["hello"])
    assert caught.value.tag == "embedding_crash"
    assert str(caught.value) == "KeyError: 'data'"
    assert isinstance(caught.value.__cause__, KeyError)
    assert is_transient(caught.value)
    assert "embedding provider broken crashed" in caplog.text
