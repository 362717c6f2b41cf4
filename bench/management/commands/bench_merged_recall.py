"""bench_merged_recall: latency of merged recall (POST /api/v1/recall) over memories and articles in one tenant.

The memory half reads the diluted corpus of `bench.scale_corpus` (the one `bench_recall` measures); the
knowledge half reads the topical corpus of `bench_knowledge_search` plus articles placed near the queries' vectors
(published, `shared`, tagged with the hashing model id), so both halves return rows and the diversity selector has
near-duplicates to drop. Every query is a text the `hashing` provider embeds to the memory corpus's query vector.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import itertools
import os
import platform
import random
import time
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from rest_framework.renderers import JSONRenderer

from bench import scale_corpus
from bench.harness import percentiles
from bench.management.commands import bench_knowledge_search
from bench.management.commands.bench_recall import prepare_corpus
from knowledge.models import Article
from knowledge.visibility import Viewer
from loopmem.embedding import embedders
from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey, Tenant
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import IssuedKey, api_key_create, api_key_revoke
from memory.models import Memory
from recall import envelopes as recall_envelopes
from recall.services import RecallContext, recall_context

LIMIT = 10
WARMUP = 5
RECALL_URL = "/api/v1/recall"
GOAL_P95_MS = 40.0
ARTICLE_AUTHOR = "bench-author"
BATCH = 500
# Near each hub (the queries of a group of subjects share its tokens): pairs of articles, the second a
# near-duplicate of the first, at a spread of cosines to the hub's center that straddles the memory scores.
HUB_PAIRS = 12
HUB_COSINES = (0.30, 0.75)
NEAR_DUPLICATE_COSINE = 0.97
# One article per subject holds the subject's whole query text (the keyword lane matches it) near its vector.
SUBJECT_ARTICLE_COSINE = 0.55

Vector = npt.NDArray[np.float64]

# The stages of recall_context, timed by wrapping the functions it calls (module, attribute, label).
STAGES: tuple[tuple[str, str, str], ...] = (
    ("loopmem.embedding.embedders", "embed_query", "query embedding (hashing)"),
    ("recall.services", "_memory_half", "memory half (recall_by_vector)"),
    ("recall.services", "memory_note_recalled", "recall bump (Redis cooldown, enqueue)"),
    ("recall.services", "knowledge_search", "knowledge half (combined search, with the diversity vectors)"),
    ("recall.history", "shown_ids", "containment read (Redis)"),
    ("recall.services", "select", "diversity selection (MMR)"),
    ("knowledge.ledger", "access_record_surfacing", "ledger write"),
    ("recall.history", "mark_shown", "history write (Redis)"),
)


# --- The corpus ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArticleCorpus:
    articles: int
    aligned: int
    background: int
    seconds: float


def _hashing_space(text: str) -> Vector:
    """The hashing provider's vector of `text` in its own 384 dimensions."""
    full = scale_corpus.query_vector(text)
    return np.asarray(full[: embedders.HashingEmbedder.dimensions], dtype=np.float64)


def _at_cosine(center: Vector, cosine: float, rng: np.random.Generator) -> Vector:
    """A unit vector at exactly `cosine` to the unit vector `center`, in a random direction."""
    noise = rng.standard_normal(len(center))
    noise -= (noise @ center) * center
    noise /= np.linalg.norm(noise)
    out: Vector = cosine * center + np.sqrt(1.0 - cosine**2) * noise
    return out


def aligned_article_count(subjects: int, group_size: int) -> int:
    return scale_corpus.group_count(subjects, group_size) * HUB_PAIRS * 2 + subjects


def _aligned_articles(tenant: Tenant, corpus: scale_corpus.DilutedCorpus, seed: int) -> Iterator[Article]:
    """Hub articles (pairs of near-duplicates) and one keyword-matching article per subject, all visible."""
    rng = np.random.default_rng([seed, 1])
    words = bench_knowledge_search.Space(seed=seed).words
    model_id = embedders.spec_for(tenant).model_id

    def article(title: str, body: str, vector: Vector) -> Article:
        return Article(
            tenant=tenant,
            title=title,
            body=body,
            category=Article.Category.FINDING,
            status=Article.Status.PUBLISHED,
            visibility=Article.Visibility.SHARED,
            owner_subject_id=ARTICLE_AUTHOR,
            embedding=[float(x) for x in vector],
            embedding_model=model_id,
            embedding_content_hash=embedders.content_hash(f"{title}\n\n{body}"),
        )

    def filler(count: int) -> str:
        return " ".join(words[int(i)] for i in rng.integers(0, len(words), count))

    groups = scale_corpus.group_count(len(corpus.subjects), corpus.group_size)
    for group in range(groups):
        center = _hashing_space(scale_corpus.diluted_group_text(group))
        tokens = scale_corpus.diluted_group_text(group)
        for pair, cosine in enumerate(rng.permutation(np.linspace(*HUB_COSINES, HUB_PAIRS))):
            base = _at_cosine(center, float(cosine), rng)
            twin = _at_cosine(base, NEAR_DUPLICATE_COSINE, rng)
            for copy, vector in enumerate((base, twin)):
                title = f"hub {group} note {pair}{'b' if copy else 'a'}"
                yield article(title, f"{' '.join(tokens.split()[:3])} {filler(40)}", vector)
    for name in corpus.subjects:
        text = corpus.query_text(name)
        vector = _at_cosine(_hashing_space(text), SUBJECT_ARTICLE_COSINE, rng)
        yield article(f"runbook of {name}", f"{text} {filler(40)}", vector)


def build_articles(tenant: Tenant, corpus: scale_corpus.DilutedCorpus, total: int, seed: int) -> ArticleCorpus:
    """The knowledge benchmark's topical corpus for the rest of `total`, then the articles near the queries; a build
    that was killed continues after the batches it committed."""
    aligned = aligned_article_count(len(corpus.subjects), corpus.group_size)
    background = total - aligned
    if background < 0:
        raise CommandError(f"--articles must be at least {aligned} for {len(corpus.subjects)} subjects")
    started = time.perf_counter()
    stored = Article.objects.filter(tenant=tenant).exclude(metadata__has_key="graduated_from_memory_id")
    aligned_present = stored.filter(owner_subject_id=ARTICLE_AUTHOR).count()
    background_present = stored.exclude(owner_subject_id=ARTICLE_AUTHOR).count()
    if background_present < background:
        bench_knowledge_search.corpus(
            tenant,
            background,
            random.Random(seed),
            bench_knowledge_search.Space(seed=seed),
            rebuild=False,
            present=background_present,
        )
    # Generated from the start, so the random sequence is the whole build's; the stored ones are skipped.
    rows = itertools.islice(_aligned_articles(tenant, corpus, seed), aligned_present, None)
    with progress_bar(total=aligned, desc="articles near the queries") as bar:
        bar.update(aligned_present)
        while batch := [row for _, row in zip(range(BATCH), rows, strict=False)]:
            Article.objects.bulk_create(batch)  # one statement: a batch is committed whole or not at all
            bar.update(len(batch))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE articles")
    return ArticleCorpus(total, aligned, background, time.perf_counter() - started)


def prepare(
    *, slug: str, rows: int, subjects: int, articles: int, reuse: bool, seed: int
) -> tuple[Tenant, scale_corpus.DilutedCorpus, ArticleCorpus | None]:
    """Memories (bench_recall's builder: refuses an existing tenant without --reuse) and then articles."""
    exists = Tenant.objects.filter(slug=slug).exists()
    tenant, corpus = prepare_corpus(slug=slug, rows=rows, subjects=subjects, reuse=reuse, seed=seed)
    if exists:
        found = Article.objects.filter(tenant=tenant).count()
        if found != articles:
            raise CommandError(f"tenant {slug} holds {found} articles, not {articles}: it is not this corpus")
        return tenant, corpus, None
    return tenant, corpus, build_articles(tenant, corpus, articles, seed)


# --- Probes and keys -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    subject: str
    query: str
    key: IssuedKey


def sample_subjects(corpus: scale_corpus.DilutedCorpus, count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(corpus.subjects), size=min(count, len(corpus.subjects)), replace=False)
    return [corpus.subjects[int(i)] for i in sorted(chosen)]


@contextlib.contextmanager
def agent_keys(tenant: Tenant, corpus: scale_corpus.DilutedCorpus, subjects: Sequence[str]) -> Iterator[list[Probe]]:
    """One agent key per sampled subject (agent_id = subject), revoked afterwards."""
    probes: list[Probe] = []
    try:
        for subject in subjects:
            key = api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=subject, name="merged benchmark")
            probes.append(Probe(subject, corpus.query_text(subject), key))
        yield probes
    finally:
        for probe in probes:
            api_key_revoke(key_id=str(probe.key.api_key.id))


# --- Measuring -----------------------------------------------------------------------------------------------


def call_service(tenant: Tenant, probe: Probe) -> RecallContext:
    return recall_context(
        scope=Scope(tenant_id=tenant.id, subject_id=probe.subject),
        viewer=Viewer(tenant_id=tenant.id, subject_id=probe.subject),
        tenant=tenant,
        api_key_id=probe.key.api_key.id,
        query=probe.query,
        limit=LIMIT,
    )


@dataclass
class Shape:
    """What the calls returned, summed over a series."""

    calls: int = 0
    merged_memory: int = 0
    merged_knowledge: int = 0
    memory_half: int = 0
    knowledge_selected: int = 0
    knowledge_pool: int = 0
    near_duplicates_dropped: int = 0
    degraded: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    memory_paths: Counter[str] = field(default_factory=Counter)
    semantic_paths: Counter[str] = field(default_factory=Counter)

    def add(self, *, merged_sources: Sequence[str], meta: dict[str, Any], memory_path: Any, semantic: Any) -> None:
        self.calls += 1
        self.merged_memory += sum(source == "memory" for source in merged_sources)
        self.merged_knowledge += sum(source == "knowledge" for source in merged_sources)
        self.memory_half += int(meta["memory_count"])
        self.knowledge_selected += int(meta["knowledge_count"])
        self.knowledge_pool += int(meta["candidates_considered"]["knowledge"])
        self.near_duplicates_dropped += int((meta.get("diversity") or {}).get("dropped_near_duplicates", 0))
        if meta["degraded"]:
            self.degraded += 1
            self.reasons[str(meta["degraded_reason"])] += 1
        self.memory_paths[str(memory_path)] += 1
        self.semantic_paths[str(semantic)] += 1

    def summary(self) -> dict[str, Any]:
        n = max(self.calls, 1)
        return {
            "calls": self.calls,
            "mean_items": {
                "memory": round(self.merged_memory / n, 2),
                "knowledge": round(self.merged_knowledge / n, 2),
            },
            "mean_per_half": {
                "memory_half": round(self.memory_half / n, 2),
                "knowledge_pool": round(self.knowledge_pool / n, 2),
                "knowledge_selected": round(self.knowledge_selected / n, 2),
                "near_duplicates_dropped": round(self.near_duplicates_dropped / n, 2),
            },
            "degraded": self.degraded,
            "degraded_fraction": round(self.degraded / n, 4),
            "degraded_reasons": dict(self.reasons),
            "memory_recall_path": dict(self.memory_paths),
            "knowledge_semantic_path": dict(self.semantic_paths),
        }


def _context_meta(context: RecallContext) -> dict[str, Any]:
    meta: dict[str, Any] = recall_envelopes.recall(context)["meta"]
    return meta


def measure_service(tenant: Tenant, probes: Sequence[Probe]) -> dict[str, Any]:
    for probe in probes[:WARMUP]:
        call_service(tenant, probe)
    latencies: list[float] = []
    contexts: list[RecallContext] = []
    with progress_bar(total=len(probes), desc="recall_context") as bar:
        for probe in probes:
            started = time.perf_counter()
            contexts.append(call_service(tenant, probe))
            latencies.append((time.perf_counter() - started) * 1000)
            bar.update(1)
    shape = Shape()
    for context in contexts:
        result = context.knowledge.result
        shape.add(
            merged_sources=[item.source for item in context.items],
            meta=_context_meta(context),
            memory_path=context.memory.recall_path,
            semantic=result.semantic_path if result is not None else None,
        )
    return {"latency_ms": percentiles(latencies), **shape.summary()}


def measure_embedding(tenant: Tenant, probes: Sequence[Probe]) -> dict[str, Any]:
    """The query embedding alone, as recall_context does it (embed_texts: provider + breaker) and bare."""
    hashing = embedders.HashingEmbedder()
    service: list[float] = []
    bare: list[float] = []
    for probe in probes:
        started = time.perf_counter()
        embedders.embed_texts(tenant, [probe.query])
        service.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        hashing.embed([probe.query])
        bare.append((time.perf_counter() - started) * 1000)
    return {"embed_texts_ms": percentiles(service), "hashing_provider_ms": percentiles(bare)}


def measure_http(probes: Sequence[Probe]) -> dict[str, Any]:
    clients = {p.subject: Client(HTTP_AUTHORIZATION=f"Bearer {p.key.raw_key}") for p in probes}

    def post(probe: Probe) -> Any:
        body = {"query": probe.query, "limit": LIMIT}
        return clients[probe.subject].post(RECALL_URL, body, content_type="application/json")

    # One untimed request per key first: a key's first use writes its last_used_at (then once a minute).
    for probe in probes:
        post(probe)
    latencies: list[float] = []
    responses: list[Any] = []
    with progress_bar(total=len(probes), desc="POST /api/v1/recall") as bar:
        for probe in probes:
            started = time.perf_counter()
            responses.append(post(probe))
            latencies.append((time.perf_counter() - started) * 1000)
            bar.update(1)
    shape = Shape()
    for response in responses:
        if response.status_code != 200:
            raise CommandError(f"recall failed: {response.status_code} {response.content[:300]!r}")
        body = response.json()
        shape.add(
            merged_sources=[item["source"] for item in body["data"]],
            meta=body["meta"],
            memory_path=body["memory"]["meta"].get("recall_path"),
            semantic=body["knowledge"]["meta"].get("semantic_path"),
        )
    return {"latency_ms": percentiles(latencies), **shape.summary()}


class _StageClock:
    """Milliseconds spent in each wrapped function during one call."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}

    def wrap(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = (time.perf_counter() - started) * 1000
                self.current[label] = self.current.get(label, 0.0) + elapsed

        return timed


def measure_stages(tenant: Tenant, probes: Sequence[Probe]) -> dict[str, Any]:
    """Where recall_context's time goes (a separate series: the wrappers are not in the headline figures).

    Serialization is the endpoint's rendering of the context (recall.envelopes.recall) plus JSON encoding.
    """
    clock = _StageClock()
    samples: dict[str, list[float]] = {label: [] for _, _, label in STAGES}
    samples |= {"rest of recall_context": [], "serialization (render + JSON)": [], "total": []}
    renderer = JSONRenderer()
    with contextlib.ExitStack() as stack:
        for module_name, attribute, label in STAGES:
            module = importlib.import_module(module_name)
            stack.enter_context(mock.patch.object(module, attribute, clock.wrap(label, getattr(module, attribute))))
        for probe in probes[:WARMUP]:
            call_service(tenant, probe)
        with progress_bar(total=len(probes), desc="stages") as bar:
            for probe in probes:
                clock.current.clear()
                started = time.perf_counter()
                context = call_service(tenant, probe)
                total = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                renderer.render(recall_envelopes.recall(context))
                serialization = (time.perf_counter() - started) * 1000
                for _, _, label in STAGES:
                    samples[label].append(clock.current.get(label, 0.0))
                samples["rest of recall_context"].append(total - sum(clock.current.values()))
                samples["serialization (render + JSON)"].append(serialization)
                samples["total"].append(total + serialization)
                bar.update(1)
    return {label: percentiles(values) for label, values in samples.items()}


def measure_pass(tenant: Tenant, probes: Sequence[Probe], *, stages: bool) -> dict[str, Any]:
    gc_before = _gc_collections()
    figures: dict[str, Any] = {
        "service": measure_service(tenant, probes),
        "query_embedding": measure_embedding(tenant, probes),
        "http": measure_http(probes),
    }
    if stages:
        figures["stages_ms"] = measure_stages(tenant, probes)
    figures["gc_gen2_collections"] = _gc_collections() - gc_before
    figures["goal_p95_le_40ms"] = {
        "service": figures["service"]["latency_ms"]["p95"] <= GOAL_P95_MS,
        "http": figures["http"]["latency_ms"]["p95"] <= GOAL_P95_MS,
    }
    return figures


def _gc_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def environment(tenant: Tenant) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension WHERE extname = 'vector'),"
            " current_setting('shared_buffers'), pg_total_relation_size('memories'), pg_total_relation_size('articles')"
        )
        row = cursor.fetchone()
    assert row is not None
    visible = Article.objects.visible_to(Viewer(tenant_id=tenant.id, subject_id="nobody")).filter(
        status=Article.Status.PUBLISHED
    )
    return {
        "postgres": row[0],
        "pgvector": row[1],
        "shared_buffers": row[2],
        "memories_table_bytes": row[3],
        "articles_table_bytes": row[4],
        "articles_visible_to_an_agent": visible.count(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "dimensions": embedders.HashingEmbedder.dimensions,
        "recall_exact_max_rows": settings.RECALL_EXACT_MAX_ROWS,
        "knowledge_search_exact_max_rows": settings.KNOWLEDGE_SEARCH_EXACT_MAX_ROWS,
        "hnsw_ef_search": settings.HNSW_EF_SEARCH,
        "diversity_enabled": settings.RECALL_DIVERSITY_ENABLED,
    }


class Command(OperatorCommand):
    help = (
        "Build (or --reuse) one tenant holding the diluted memory corpus and a knowledge corpus with articles near "
        "the queries, and measure merged recall: recall_context (query embedding timed separately) and POST "
        "/api/v1/recall in-process (full middleware, auth, rate limiter, ledger writes). p50/p95/p99, the mean "
        "memory and knowledge items returned, how often the call was degraded, and the time per stage."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--rows", type=int, default=200_000, help="memories")
        parser.add_argument("--subjects", type=int, default=2_000)
        parser.add_argument("--articles", type=int, default=20_000)
        parser.add_argument("--queries", type=int, default=200, help="sampled subjects (one query each per series)")
        parser.add_argument("--passes", type=int, default=1, help="measure this many times (noisy machines)")
        parser.add_argument("--no-stages", action="store_true", help="skip the per-stage series")
        parser.add_argument("--tenant-slug", help="default: bench-merged-<rows>-<subjects>-<articles>")
        parser.add_argument("--reuse", action="store_true", help="measure the corpus the tenant already holds")
        parser.add_argument("--seed", type=int, default=scale_corpus.DEFAULT_SEED)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        rows, subjects, articles = options["rows"], options["subjects"], options["articles"]
        slug = options["tenant_slug"] or f"bench-merged-{rows}-{subjects}-{articles}"
        tenant, corpus, built = prepare(
            slug=slug, rows=rows, subjects=subjects, articles=articles, reuse=options["reuse"], seed=options["seed"]
        )
        chosen = sample_subjects(corpus, options["queries"], options["seed"])
        with agent_keys(tenant, corpus, chosen) as probes:
            passes = [measure_pass(tenant, probes, stages=not options["no_stages"]) for _ in range(options["passes"])]
        summary: dict[str, Any] = {
            "corpus": {
                "tenant": tenant.slug,
                "memories": Memory.objects.for_tenant(tenant.id).count(),
                "subjects": len(corpus.subjects),
                "articles": Article.objects.filter(tenant=tenant).count(),
                "articles_near_queries": aligned_article_count(len(corpus.subjects), corpus.group_size),
                "model_id": corpus.model_id,
                "built_now": built is not None,
                "memory_copy_seconds": round(corpus.load.copy_seconds, 1) if built else None,
                "memory_index_build_seconds": round(corpus.load.index_seconds, 1) if built else None,
                "article_build_seconds": round(built.seconds, 1) if built else None,
            },
            "environment": environment(tenant),
            "queries": len(chosen),
            "limit": LIMIT,
            "goal_p95_ms": GOAL_P95_MS,
            "passes": passes,
        }
        return summary, render(summary)


# --- Rendering -----------------------------------------------------------------------------------------------


def render(summary: dict[str, Any]) -> str:
    corpus, env = summary["corpus"], summary["environment"]
    built = (
        f"built: COPY {corpus['memory_copy_seconds']} s, memory HNSW {corpus['memory_index_build_seconds']} s, "
        f"articles {corpus['article_build_seconds']} s"
        if corpus["built_now"]
        else "reused"
    )
    lines = [
        f"tenant {corpus['tenant']}: {corpus['memories']:,} memories over {corpus['subjects']:,} subjects, "
        f"{corpus['articles']:,} articles ({corpus['articles_near_queries']:,} near the queries, "
        f"{env['articles_visible_to_an_agent']:,} published+visible to an agent), {env['dimensions']} dims, "
        f"model {corpus['model_id']}; {built}",
        f"PostgreSQL {env['postgres']}, pgvector {env['pgvector']}, shared_buffers {env['shared_buffers']}, "
        f"{env['cpus']} CPUs, load average {env['load_average']}; {summary['queries']} queries per series, "
        f"limit {summary['limit']}; goal p95 <= {summary['goal_p95_ms']:.0f} ms",
    ]
    for number, figures in enumerate(summary["passes"], start=1):
        lines += ["", f"pass {number} (gen-2 GCs during the pass: {figures['gc_gen2_collections']})"]
        lines += _render_pass(figures)
    return "\n".join(lines)


def _render_pass(figures: dict[str, Any]) -> list[str]:
    header = (
        f"{'series':<44}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'mem':>6}{'know':>6}{'pool':>6}{'dups':>6}"
        f"{'degraded':>10}"
    )
    lines = [header, "-" * len(header)]
    for label, key in (("recall_context (service)", "service"), ("POST /api/v1/recall (in-process)", "http")):
        series = figures[key]
        latency, half = series["latency_ms"], series["mean_per_half"]
        lines.append(
            f"{label:<44}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}"
            f"{series['mean_items']['memory']:>6.1f}{series['mean_items']['knowledge']:>6.1f}"
            f"{half['knowledge_pool']:>6.1f}{half['near_duplicates_dropped']:>6.1f}"
            f"{series['degraded_fraction']:>10.1%}"
        )
    embedding = figures["query_embedding"]
    for label, key in (
        ("  query embedding: embed_texts", "embed_texts_ms"),
        ("  bare hashing provider", "hashing_provider_ms"),
    ):
        latency = embedding[key]
        lines.append(f"{label:<44}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}")
    service = figures["service"]
    lines.append(
        f"paths: memory {service['memory_recall_path']}, knowledge semantic lane {service['knowledge_semantic_path']}; "
        f"degraded reasons {service['degraded_reasons'] or 'none'}"
    )
    if "stages_ms" in figures:
        lines += ["", f"{'stage (separate series, wrapped)':<44}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'mean':>8}"]
        for label, latency in figures["stages_ms"].items():
            lines.append(
                f"  {label:<42}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}"
                f"{latency['mean']:>8.2f}"
            )
    goal = figures["goal_p95_le_40ms"]
    lines.append("goal p95 <= 40 ms: " + ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in goal.items()))
    return lines
