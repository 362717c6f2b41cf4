"""What an embedding call costs over the provider's own round trip, against a loopback server that answers at once.

The server runs in this process (a thread) or is one already running (`manage.py loopback_embedder`, the one the
served benchmark uses): a provider in its own process is the served case, with no handler thread in the client's
process to share its GIL.

Each sample is a pair, run back to back on the same warm connection state: a raw HTTP POST of the body the SDK
sends (stdlib `http.client`, one kept-alive connection; the answer read, not decoded), then `embed_texts` for a
tenant on the `openai` provider pointed at the same server (the cached SDK client, the circuit breaker (a Redis
read at most once a second), decoding, the size check, metrics). The overhead is the pair's difference. The
query-embedding cache is not in this path (`embed_texts` is the provider call itself), so every call reaches the
server.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bench.harness import BENCH_RATE_LIMIT, percentiles
from bench.loopback_embedder import MODEL
from loopmem.embedding import embedders
from loopmem.models import Tenant
from loopmem.tenancy.services import tenant_set_provider

GOAL_OVERHEAD_MS = 1.0  # the call costs at most this much over the provider's own round trip (docs/performance.md)
TENANT_SLUG = "bench-embed-overhead"
LOOPBACK_API_KEY = "loopback-bench"  # the loopback server checks no key; the provider refuses to run without one


def loopback_tenant(*, base_url: str, slug: str = TENANT_SLUG) -> Tenant:
    """A tenant on the `openai` provider at `base_url` with the loopback model (created once, re-pointed each run)."""
    tenant, _ = Tenant.objects.get_or_create(
        slug=slug, defaults={"name": f"Benchmark {slug}", "rate_limit_requests_per_minute": BENCH_RATE_LIMIT}
    )
    return tenant_set_provider(
        tenant=tenant,
        embedding="openai",
        embedding_model=MODEL,
        embedding_base_url=base_url,
        embedding_api_key=LOOPBACK_API_KEY,
    )


@dataclass
class RawClient:
    """One kept-alive HTTP/1.1 connection posting the SDK's request body."""

    base_url: str

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        self._path = f"{parts.path.rstrip('/')}/embeddings"
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=10)
        self._headers = {"content-type": "application/json", "authorization": f"Bearer {LOOPBACK_API_KEY}"}

    def post(self, text: str) -> bytes:
        body = json.dumps({"model": MODEL, "input": [text], "encoding_format": "base64"})
        self._connection.request("POST", self._path, body=body, headers=self._headers)
        response = self._connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"loopback embedder answered {response.status}: {payload[:200]!r}")
        return payload

    def close(self) -> None:
        self._connection.close()


def connections_opened(base_url: str) -> int:
    """How many TCP connections the loopback server at `base_url` has accepted so far (its `/stats`)."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=10)
    try:
        connection.request("GET", "/stats")
        return int(json.loads(connection.getresponse().read())["connections"])
    finally:
        connection.close()


def measure(base_url: str, *, calls: int, warmup: int = 20) -> dict[str, Any]:
    """p50/p95/p99 of the raw round trip, of `embed_texts`, and of their difference, pair by pair."""
    tenant = loopback_tenant(base_url=base_url)
    raw = RawClient(base_url)
    texts = [f"what did we decide about deploy {n}" for n in range(calls + warmup)]
    raw_ms: list[float] = []
    service_ms: list[float] = []
    overhead_ms: list[float] = []
    connections_before = connections_opened(base_url)
    try:
        for number, text in enumerate(texts):
            started = time.perf_counter()
            raw.post(text)
            middle = time.perf_counter()
            embedders.embed_texts(tenant, [text])
            ended = time.perf_counter()
            if number < warmup:
                continue
            raw_ms.append((middle - started) * 1000)
            service_ms.append((ended - middle) * 1000)
            overhead_ms.append(((ended - middle) - (middle - started)) * 1000)
    finally:
        raw.close()
    overhead = percentiles(overhead_ms)
    return {
        "calls": calls,
        "raw_http_ms": percentiles(raw_ms),
        "embed_texts_ms": percentiles(service_ms),
        "overhead_ms": overhead,
        # One for the raw client, one for the SDK's pool: more means a connection per call (no keep-alive).
        # Each /stats probe counts its own connection before it answers: the later probe's is taken off.
        "connections_opened": connections_opened(base_url) - connections_before - 1,
        "goal_overhead_le_1ms": {q: overhead[q] <= GOAL_OVERHEAD_MS for q in ("p50", "p95")},
    }
