"""An OpenAI-compatible `/v1/embeddings` server on loopback that answers at once: the benchmarks' provider.

Its vectors are the `hashing` provider's (deterministic unit vectors of the text, 384 dimensions by default), so a
corpus built in the hashing space (`bench.scale_corpus`) is queried through the real `openai` SDK path, and what the
served benchmark measures is the service's own cost, not a model's. HTTP/1.1 with keep-alive, one thread a
connection, no logging: a client that reuses its connection pays one loopback round trip a call. Like OpenAI's
API, it answers `encoding_format: base64` (what the `openai` SDK asks for by default) with little-endian float32.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from loopmem.embedding.embedders import HashingEmbedder

DEFAULT_DIMENSIONS = HashingEmbedder.dimensions
MODEL = "loopback-hashing"  # what the benchmarks configure as the tenant's model (model id `openai:<this>`)


class _Embedder(HashingEmbedder):
    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions


class LoopbackEmbedder(ThreadingHTTPServer):
    """The server; `calls`, `texts` and `connections` count what it answered and how many TCP connections it
    accepted (a client that keeps its connection alive opens one)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, dimensions: int = DEFAULT_DIMENSIONS, delay_ms: float = 0.0
    ) -> None:
        super().__init__((host, port), _Handler)
        self.embedder = _Embedder(dimensions)
        self.delay_seconds = delay_ms / 1000  # a remote provider's latency per call, to measure batching against
        self.calls = 0
        self.texts = 0
        self.connections = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL a tenant's `embedding_base_url` names (the SDK appends `/embeddings`)."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def count(self, texts: int) -> None:
        with self._lock:
            self.calls += 1
            self.texts += texts

    def count_connection(self) -> None:
        with self._lock:
            self.connections += 1


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackEmbedder
    protocol_version = "HTTP/1.1"  # keep-alive: the connection stays open between requests
    disable_nagle_algorithm = True  # TCP_NODELAY, as production servers set it: no 40 ms delayed-ACK stalls

    def setup(self) -> None:
        super().setup()
        self.server.count_connection()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(body)
            texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
            if not all(isinstance(text, str) for text in texts):
                raise TypeError("input must be strings")
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        self.server.count(len(texts))
        if self.server.delay_seconds:
            time.sleep(self.server.delay_seconds)
        vectors = self.server.embedder.embed(texts)
        encoded: list[Any] = vectors
        if request.get("encoding_format") == "base64":
            encoded = [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(encoded)]
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model", MODEL),
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )

    def do_GET(self) -> None:
        # A liveness and counting probe for scripts: how many calls and texts were answered so far.
        if self.path.rstrip("/") == "/stats":
            counts = {"calls": self.server.calls, "texts": self.server.texts, "connections": self.server.connections}
            self._send(200, counts)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        encoded = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(encoded)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may have gone (a timeout, a killed worker)
            self.wfile.write(encoded)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per request would cost more than the answer


@contextlib.contextmanager
def running(*, port: int = 0, dimensions: int = DEFAULT_DIMENSIONS) -> Iterator[LoopbackEmbedder]:
    """A loopback embedder served from a background thread for the duration of the block."""
    server = LoopbackEmbedder(port=port, dimensions=dimensions)
    thread = threading.Thread(target=server.serve_forever, name="loopback-embedder", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
