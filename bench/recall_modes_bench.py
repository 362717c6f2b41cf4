"""Latency of hybrid (and keyword) memory recall beside semantic, on the diluted corpus and on a quota-full subject.

Service-level reads with the query vector computed once (the embedding is the same for both modes and is timed
apart by bench_recall). The modes are interleaved per query, so drift on a shared machine weighs on each alike.
Keyword queries are made to match: a typical query holds two words every row of the subject holds (the lane's
worst case, every row is scored) and one that a single row holds.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from bench import scale_corpus
from bench.harness import percentiles
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.recall_modes import recall_lanes
from memory.selectors import RecallResult, recall_by_vector

K = 10
WARMUP = 5
QUOTA_SUBJECT = "bench-quota-full"
GOAL_HYBRID_P95_RATIO = 1.5
# The quota-full subject's vocabulary: a Zipf-like draw, so common words match thousands of rows and rare ones few.
VOCABULARY = [f"w{n}" for n in range(2_000)]
BATCH = 1_000


@dataclass(frozen=True)
class ModeProbe:
    """One query of one subject: the vector for the semantic lane, the text for the keyword lane."""

    subject: str
    text: str
    vector: list[float]


Read = Callable[[Scope, ModeProbe], RecallResult]


def read_semantic(scope: Scope, probe: ModeProbe) -> RecallResult:
    return recall_by_vector(scope=scope, vector=probe.vector, model_id=scale_corpus.HASHING_MODEL_ID, k=K)


def read_hybrid(scope: Scope, probe: ModeProbe) -> RecallResult:
    embedding = QueryEmbedding(vector=probe.vector, model_id=scale_corpus.HASHING_MODEL_ID)
    return recall_lanes(
        scope=scope, query=probe.text, k=K, include_superseded=False, mode="hybrid", embedding=embedding
    )


def read_deep(scope: Scope, probe: ModeProbe) -> RecallResult:
    embedding = QueryEmbedding(vector=probe.vector, model_id=scale_corpus.HASHING_MODEL_ID)
    return recall_lanes(scope=scope, query=probe.text, k=K, include_superseded=False, mode="deep", embedding=embedding)


def read_keyword(scope: Scope, probe: ModeProbe) -> RecallResult:
    return recall_lanes(scope=scope, query=probe.text, k=K, include_superseded=False, mode="keyword", embedding=None)


# deep is the opt-in mode with its own budget (docs/performance.md): timed beside the others, not held to their ratio.
READS: dict[str, Read] = {
    "semantic": read_semantic,
    "hybrid": read_hybrid,
    "keyword": read_keyword,
    "deep": read_deep,
}


def measure_modes(tenant_id: uuid.UUID, probes: Sequence[ModeProbe], desc: str) -> dict[str, Any]:
    """p50/p95/p99 per mode over the same queries, interleaved; hybrid's p95 against semantic's."""
    for probe in probes[:WARMUP]:
        for read in READS.values():
            read(Scope(tenant_id=tenant_id, subject_id=probe.subject), probe)
    latencies: dict[str, list[float]] = {mode: [] for mode in READS}
    keyword_hits: list[int] = []
    with progress_bar(total=len(probes), desc=desc) as bar:
        for number, probe in enumerate(probes):
            scope = Scope(tenant_id=tenant_id, subject_id=probe.subject)
            order = list(READS.items())
            order = order[number % len(order) :] + order[: number % len(order)]  # rotate who goes first
            for mode, read in order:
                started = time.perf_counter()
                result = read(scope, probe)
                latencies[mode].append((time.perf_counter() - started) * 1000)
                if mode == "hybrid" and result.lane_counts is not None:
                    keyword_hits.append(result.lane_counts.get("keyword", 0))
            bar.update(1)
    figures: dict[str, Any] = {mode: {"latency_ms": percentiles(values)} for mode, values in latencies.items()}
    ratio = figures["hybrid"]["latency_ms"]["p95"] / max(figures["semantic"]["latency_ms"]["p95"], 1e-9)
    figures["hybrid_p95_over_semantic_p95"] = round(ratio, 2)
    figures["keyword_pool_rows_median"] = statistics.median(keyword_hits) if keyword_hits else 0
    figures["goal_hybrid_p95_le_1.5x_semantic"] = ratio <= GOAL_HYBRID_P95_RATIO
    return figures


def diluted_probes(
    corpus: scale_corpus.DilutedCorpus, subjects: Sequence[str], vectors: Sequence[list[float]]
) -> list[ModeProbe]:
    """The bench's probes with words that match: every row of a diluted-corpus subject says "synthetic memory N"."""
    per_subject = corpus.rows // len(corpus.subjects)
    probes = []
    for subject, vector in zip(subjects, vectors, strict=True):
        first = corpus.subjects.index(subject) * per_subject
        text = f"{corpus.query_text(subject)} synthetic memory {first + per_subject // 2}"
        probes.append(ModeProbe(subject=subject, text=text, vector=vector))
    return probes


# --- The quota-full subject -------------------------------------------------------------------------------


def _sentence(rng: random.Random, n: int) -> str:
    words = rng.choices(VOCABULARY, weights=[1 / (rank + 1) for rank in range(len(VOCABULARY))], k=rng.randint(6, 14))
    return f"note {n}: " + " ".join(words)


def ensure_quota_subject(tenant_id: uuid.UUID, *, rows: int, seed: int) -> int:
    """Give the tenant a subject holding `rows` live, embedded memories (the quota by default); reused if present."""
    existing = Memory.objects.filter(tenant_id=tenant_id, subject_id=QUOTA_SUBJECT).count()
    if existing == rows:
        return existing
    Memory.objects.filter(tenant_id=tenant_id, subject_id=QUOTA_SUBJECT).delete()
    rng = random.Random(seed)
    hashing = embedders.HashingEmbedder()
    with progress_bar(total=rows, desc="quota-full subject") as bar:
        for start in range(0, rows, BATCH):
            texts = [_sentence(rng, n) for n in range(start, min(start + BATCH, rows))]
            vectors = hashing.embed(texts)
            Memory.objects.bulk_create(
                Memory(
                    tenant_id=tenant_id,
                    subject_id=QUOTA_SUBJECT,
                    text=text,
                    embedding=vector,
                    embedding_model=scale_corpus.HASHING_MODEL_ID,
                    embedding_content_hash=embedders.content_hash(text),
                )
                for text, vector in zip(texts, vectors, strict=True)
            )
            bar.update(len(texts))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories")
    return rows


def quota_probes(count: int, *, rows: int, seed: int) -> list[ModeProbe]:
    """Queries of three to five words from the same vocabulary plus one row's number."""
    rng = random.Random(seed + 1)
    probes = []
    for _ in range(count):
        text = " ".join(rng.choices(VOCABULARY[:400], k=rng.randint(3, 5))) + f" note {rng.randrange(rows)}"
        [vector] = embedders.HashingEmbedder().embed([text])
        probes.append(ModeProbe(QUOTA_SUBJECT, text, vector))
    return probes


def render_modes(label: str, figures: dict[str, Any]) -> list[str]:
    verdict = "PASS" if figures["goal_hybrid_p95_le_1.5x_semantic"] else "FAIL"
    lines = [
        f"{label}: hybrid p95 / semantic p95 = {figures['hybrid_p95_over_semantic_p95']}x "
        f"(goal <= {GOAL_HYBRID_P95_RATIO}x: {verdict}); "
        f"keyword pool rows (median) {figures['keyword_pool_rows_median']}"
    ]
    for mode in READS:
        latency = figures[mode]["latency_ms"]
        lines.append(f"  {mode:<10}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}  ms p50/p95/p99")
    return lines
