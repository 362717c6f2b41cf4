"""Drill: the tenant's embedding provider (an OpenAI-compatible loopback server) answers 500, then times out, then
recovers. Recall falls back (`meta.fallback`, a reason tag) and stays fast once the circuit opens; writes are kept
unembedded; after recovery the sweep drains the backlog and recall is semantic again."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from loopmem.embedding import embedders, pipeline
from loopmem.providers import circuit_breaker
from loopmem.tenancy.services import tenant_set_provider
from memory import embedding
from memory.models import Memory
from tests.faults.conftest import timed
from tests.memory.conftest import heavy_db

pytestmark = [pytest.mark.faults, heavy_db]

PROVIDER_TIMEOUT_SECONDS = 0.5
QUERY = "cat likes fish"  # a substring of one memory: the keyword (ILIKE) fallback finds it too


class ProviderServer(ThreadingHTTPServer):
    """`POST /v1/embeddings`, answering as `mode` says: "ok" (feature-hashing vectors), "error" (500), "hang"."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = "ok"
        self.calls = 0
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ProviderServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        self.server.calls += 1
        if self.server.mode == "hang":
            self.server.release.wait(timeout=10)  # far past the client's timeout
        if self.server.mode != "ok":
            self._send(500, {"error": {"message": "provider down", "type": "server_error"}})
            return
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = embedders.HashingEmbedder().embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        self._send(200, {"object": "list", "data": data, "model": body.get("model", "m"),
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})  # fmt: skip

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:  # the client gave up (timeout) and closed the connection
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def provider(tenant: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    server = ProviderServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(embedders, "EMBEDDING_TIMEOUT_SECONDS", PROVIDER_TIMEOUT_SECONDS)
    monkeypatch.setattr(circuit_breaker, "OPEN_SECONDS", 1)  # the drill waits for the circuit to close
    monkeypatch.setattr(pipeline, "SWEEP_SETTLE_SECONDS", 0)  # the sweep may take the drill's fresh rows
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=server.url, embedding_api_key="sk-drill",
        embedding_model="drill-model",
    )  # fmt: skip
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def _recall(agent: Any, query: str) -> tuple[dict[str, Any], float]:
    response, seconds = timed(agent.post, "/api/v1/memory/recall", {"query": query}, format="json")
    assert response.status_code == 200, response.content
    # A hang check, not a performance assertion: at most one provider timeout per recall, on a busy machine.
    assert seconds < 3 * PROVIDER_TIMEOUT_SECONDS + 2
    body: dict[str, Any] = response.json()
    return body, seconds


def _open_the_circuit(agent: Any, provider: ProviderServer, failing_reason: str) -> None:
    # Every transient failure counts, the embed tasks' too: the circuit opens within FAILURE_THRESHOLD recalls.
    reasons = []
    for _ in range(circuit_breaker.FAILURE_THRESHOLD + 1):
        body, _ = _recall(agent, QUERY)
        assert body["meta"]["fallback"] is True
        reasons.append(body["meta"]["reason"])
        if reasons[-1] == "embedding_circuit_open":
            break
    assert reasons[-1] == "embedding_circuit_open"
    assert reasons[:-1], "the provider was tried before the circuit opened"
    assert set(reasons[:-1]) == {failing_reason}
    calls = provider.calls
    body, _ = _recall(agent, QUERY)
    assert (body["meta"]["fallback"], body["meta"]["reason"]) == (True, "embedding_circuit_open")
    assert provider.calls == calls, "an open circuit fails fast: the provider is not called"
    assert [hit["memory"]["text"] for hit in body["data"]][:1] == ["my cat likes fish"]  # the keyword fallback


def test_a_failing_provider_opens_the_circuit_recall_falls_back_and_the_backlog_drains_after_recovery(
    agent: Any, provider: ProviderServer, sent_tasks: list[Any]
) -> None:
    provider.mode = "error"
    for text in ("my cat likes fish", "the invoice totals for march", "cat food brand is purrfect"):
        assert agent.post("/api/v1/memory", {"text": text}, format="json").status_code == 201
    for memory_id in Memory.objects.values_list("id", flat=True):  # what the worker's embed task would do
        with pytest.raises(embedders.EmbeddingFailure):
            embedding.memory_embed(memory_id=str(memory_id))
    assert Memory.objects.filter(embedding__isnull=True).count() == 3, "writes are kept, unembedded"

    _open_the_circuit(agent, provider, "embedding_provider_error_500")
    time.sleep(1.1)  # the circuit closes

    provider.mode = "hang"
    _open_the_circuit(agent, provider, "embedding_timeout")
    time.sleep(1.1)

    provider.mode = "ok"
    report = pipeline.sweep(embedding.MEMORY_EMBEDDINGS)
    assert (report.embedded, report.failed) == (3, 0)
    assert Memory.objects.filter(embedding__isnull=True).count() == 0
    body, _ = _recall(agent, QUERY)
    assert body["meta"]["fallback"] is False
    assert body["meta"]["recall_path"] == "exact"
    assert [hit["memory"]["text"] for hit in body["data"]][:1] == ["my cat likes fish"]
    assert all(isinstance(hit["score"], float) for hit in body["data"])
