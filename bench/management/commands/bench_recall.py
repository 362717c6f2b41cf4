"""bench_recall: latency and completeness of recall on a diluted corpus (DESIGN §5), per read path, plus HTTP.

Every sampled subject's true top 10 lies outside the global top 500 (the command measures that too), so a read
that filters the subject after an approximate index scan loses rows, and recall@10 shows it. Hybrid and keyword
recall are timed beside semantic on the same subjects and on a quota-full subject (bench/recall_modes_bench.py).


The filtered pass reads again with a tag filter that one row in ten of every subject carries (`memory.filters`),
against the exact filtered top 10, and prints its p95 next to the unfiltered one: a filter is applied inside the
scoped read, so it must stay complete.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import re
import statistics
import time
import uuid
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench import recall_modes_bench, scale_corpus
from bench.harness import percentiles
from bench.management.commands.seed_scale import corpus_progress, scale_tenant
from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.embedding import embedders
from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey, Tenant
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import IssuedKey, api_key_create, api_key_revoke
from memory.filters import MemoryFilters
from memory.models import Memory
from memory.selectors import RecallResult, recall_by_vector

K = 10
WARMUP = 5
DILUTION_PROBES = 20
DILUTION_DEPTH = 500
WRITER_SUBJECT = "bench-writer"
RECALL_URL = "/api/v1/memory/recall"
REMEMBER_URL = "/api/v1/memory"
GOAL_RECALL_P95_MS = 20.0
GOAL_REMEMBER_P95_MS = 15.0


@dataclass(frozen=True)
class Mode:
    """A way of reading: a recall_by_vector path, optionally with the planner pushed onto the HNSW index."""

    label: str
    path: str
    hnsw_forced: bool = False


MODES = (
    Mode("auto", "auto"),
    Mode("exact", "exact"),
    Mode("ann", "ann"),
    Mode("ann_post_filter", "ann_post_filter"),
    # For a 100-row subject the planner serves both ANN paths from the (tenant, subject) btree plus a sort,
    # which is exact. These two show what the HNSW index itself returns on the same reads.
    Mode("ann +hnsw", "ann", hnsw_forced=True),
    Mode("ann_post_filter +hnsw", "ann_post_filter", hnsw_forced=True),
)
# The filtered pass: the read paths the API can take (the reference's post-filter has no filters to apply).
FILTERED_MODES = (MODES[0], MODES[1], MODES[2], MODES[4])
TAG_FILTER = MemoryFilters(tags=(scale_corpus.FILTER_TAG,))


@dataclass(frozen=True)
class Probe:
    """One sampled subject: its query (text and vector) and its exact top 10."""

    subject: str
    query_text: str
    vector: list[float]
    truth: tuple[uuid.UUID, ...]
    nearest_own_distance: float
    filtered_truth: tuple[uuid.UUID, ...] = ()


def recall_at_k(found: Sequence[uuid.UUID], truth: Sequence[uuid.UUID]) -> float:
    return len(set(found[:K]) & set(truth)) / len(truth)


def recall_summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(values), 4),
        "min": round(min(values), 4),
        "complete_fraction": round(sum(v == 1.0 for v in values) / len(values), 4),
    }


# --- The corpus and the probes ----------------------------------------------------------------------------


def prepare_corpus(
    *, slug: str, rows: int, subjects: int, reuse: bool, seed: int, dimensions: int = scale_corpus.NATIVE_DIMENSIONS
) -> tuple[Tenant, scale_corpus.DilutedCorpus]:
    """Build the diluted corpus under a new tenant, continue a build that was killed, or describe the one already
    there (--reuse)."""
    existing = Tenant.objects.filter(slug=slug).first()
    # A build killed while it loaded rows, or while it built the index (the load drops it first), continues.
    partial = existing is not None and (
        scale_corpus.loaded_rows(existing.id) < rows or not scale_corpus.has_hnsw_index(dimensions)
    )
    if existing is not None and not reuse and not partial:
        raise CommandError(f"tenant {slug} exists: pass --reuse to measure its corpus again, or another --tenant-slug")
    if existing is not None and not partial:
        loaded = Memory.objects.for_tenant(existing.id).exclude(subject_id=WRITER_SUBJECT).count()
        if loaded != rows:
            raise CommandError(f"tenant {slug} holds {loaded} rows, not {rows}: it is not this corpus")
        load = scale_corpus.LoadStats(rows=rows, dimensions=dimensions, copy_seconds=0, index_seconds=0)
        return existing, scale_corpus.diluted_corpus_shape(
            tenant_id=existing.id, rows=rows, subjects=subjects, load=load
        )
    tenant = existing or scale_tenant(name=f"Recall benchmark ({rows} rows, {subjects} subjects)", slug=slug)
    with corpus_progress(rows) as progress:
        corpus = scale_corpus.build_diluted_corpus(
            tenant_id=tenant.id,
            rows=rows,
            subjects=subjects,
            seed=seed,
            dimensions=dimensions,
            progress=progress.rows,
            phase=progress.phase,
        )
    return tenant, corpus


def sample_probes(corpus: scale_corpus.DilutedCorpus, count: int, seed: int) -> list[Probe]:
    """`count` subjects drawn without replacement (seeded), each with its exact top 10 from SQL."""
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(corpus.subjects), size=min(count, len(corpus.subjects)), replace=False))
    probes: list[Probe] = []
    with progress_bar(total=len(chosen), desc="exact top 10") as bar:
        for index in chosen:
            subject = corpus.subjects[int(index)]
            vector = corpus.query_vector(subject)
            truth = scale_corpus.exact_neighbours(tenant_id=corpus.tenant_id, vector=vector, k=K, subject_id=subject)
            tagged = scale_corpus.exact_neighbours(
                tenant_id=corpus.tenant_id, vector=vector, k=K, subject_id=subject, tag=scale_corpus.FILTER_TAG
            )
            probes.append(
                Probe(
                    subject,
                    corpus.query_text(subject),
                    vector,
                    tuple(n.id for n in truth),
                    truth[0].distance,
                    tuple(n.id for n in tagged),
                )
            )
            bar.update(1)
    return probes


def measure_dilution(corpus: scale_corpus.DilutedCorpus, probes: Sequence[Probe]) -> dict[str, Any]:
    """For a few subjects: how many rows of the tenant are nearer to the query than the subject's nearest row."""
    nearer: list[int] = []
    with progress_bar(total=len(probes), desc="dilution check") as bar:
        for probe in probes:
            distance = probe.nearest_own_distance
            nearer.append(scale_corpus.rows_nearer(tenant_id=corpus.tenant_id, vector=probe.vector, distance=distance))
            bar.update(1)
    return {
        "subjects_checked": len(nearer),
        "foreign_rows_nearer_than_nearest_own_row": {"min": min(nearer), "median": statistics.median(nearer)},
        "top10_outside_global_top500_fraction": round(sum(n >= DILUTION_DEPTH for n in nearer) / len(nearer), 4),
    }


def measure_half_precision(corpus: scale_corpus.DilutedCorpus, probes: Sequence[Probe], seed: int) -> dict[str, float]:
    """The exact top 10 on the stored vectors (half precision) against the exact top 10 on the float32 vectors the
    build generated: what storing `halfvec` alone changes in an answer. Every read is measured against the former."""
    float32 = scale_corpus.float32_neighbours(corpus, {p.subject: p.vector for p in probes}, seed=seed, k=K)
    return recall_summary([recall_at_k(probe.truth, float32[probe.subject]) for probe in probes])


# --- Service-level reads ----------------------------------------------------------------------------------


@contextlib.contextmanager
def planner_for(mode: Mode) -> Iterator[None]:
    """Force the HNSW index scan when the mode asks: with sorts disabled it is the only ordered plan left.

    The read's own transaction nests inside this one as a savepoint, so SET LOCAL stays in force for it.
    """
    if not mode.hnsw_forced:
        yield
        return
    with transaction.atomic(using=HEAVY_READ_ALIAS):
        with connections[HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = off")
        yield


def read(mode: Mode, tenant_id: uuid.UUID, probe: Probe, filters: MemoryFilters | None = None) -> RecallResult:
    scope = Scope(tenant_id=tenant_id, subject_id=probe.subject)
    with planner_for(mode):
        return recall_by_vector(
            scope=scope,
            vector=probe.vector,
            model_id=scale_corpus.model_id_for(len(probe.vector)),
            k=K,
            path=mode.path,
            filters=filters,
        )


_INDEX_IN_PLAN = re.compile(r"(?:Index Scan|Index Only Scan|Bitmap Index Scan) (?:using|on) (\w+)")


def plan_of(mode: Mode, tenant_id: uuid.UUID, probe: Probe, filters: MemoryFilters | None = None) -> str:
    """Which indexes the mode's kNN queries run on, from EXPLAIN of the SQL the read actually sent."""
    heavy = connections[HEAVY_READ_ALIAS]
    with CaptureQueriesContext(heavy) as captured:
        read(mode, tenant_id, probe, filters)
    sent = [q["sql"] for q in captured.captured_queries]
    knn = [sql for sql in sent if "<=>" in sql and "ORDER BY" in sql]
    with transaction.atomic(using=HEAVY_READ_ALIAS), heavy.cursor() as cursor:
        if mode.hnsw_forced:
            cursor.execute("SET LOCAL enable_sort = off")
        for sql in sent:
            if "set_config" in sql:
                cursor.execute(sql)
        used: list[str] = []
        for sql in knn:
            cursor.execute(f"EXPLAIN {sql}")
            used += _INDEX_IN_PLAN.findall("\n".join(row[0] for row in cursor.fetchall()))
        transaction.set_rollback(True, using=HEAVY_READ_ALIAS)
    return " then ".join(dict.fromkeys(used)) or "sequential scan"


def measure_mode(
    mode: Mode, tenant_id: uuid.UUID, probes: Sequence[Probe], filters: MemoryFilters | None = None
) -> dict[str, Any]:
    """Latency and recall@10 of one read path; with `filters`, against each subject's exact filtered top 10."""
    for probe in probes[:WARMUP]:
        read(mode, tenant_id, probe, filters)
    latencies: list[float] = []
    recalls: list[float] = []
    paths: Counter[str] = Counter()
    underfilled = 0
    desc = f"{mode.label} (filtered)" if filters else mode.label
    with progress_bar(total=len(probes), desc=desc) as bar:
        for probe in probes:
            started = time.perf_counter()
            result = read(mode, tenant_id, probe, filters)
            latencies.append((time.perf_counter() - started) * 1000)
            truth = probe.filtered_truth if filters else probe.truth
            recalls.append(recall_at_k([hit.memory.id for hit in result.hits], truth))
            paths[str(result.recall_path)] += 1
            underfilled += result.underfilled
            bar.update(1)
    return {
        "load_average": load_average(),
        "path": mode.path,
        "hnsw_forced": mode.hnsw_forced,
        "plan": plan_of(mode, tenant_id, probes[0], filters),
        "latency_ms": percentiles(latencies),
        "recall_at_10": recall_summary(recalls),
        "underfilled": underfilled,
        "recall_path": dict(paths),
    }


# --- HTTP -------------------------------------------------------------------------------------------------


def timed(calls: Sequence[Callable[[], Any]], desc: str) -> tuple[list[float], list[Any]]:
    """Run each call once, timing it; returns (milliseconds, results)."""
    latencies: list[float] = []
    results: list[Any] = []
    with progress_bar(total=len(calls), desc=desc) as bar:
        for call in calls:
            started = time.perf_counter()
            results.append(call())
            latencies.append((time.perf_counter() - started) * 1000)
            bar.update(1)
    return latencies, results


def measure_http_recall(clients: dict[str, Client], probes: Sequence[Probe]) -> dict[str, Any]:
    def call(probe: Probe) -> Callable[[], Any]:
        body = {"query": probe.query_text, "limit": K}
        return lambda: clients[probe.subject].post(RECALL_URL, body, content_type="application/json")

    # One untimed request per key first: a key's first use writes its last_used_at (then at most once a
    # minute), which a steady agent does not pay on every request.
    for probe in probes:
        call(probe)()
    latencies, responses = timed([call(p) for p in probes], "HTTP recall")
    recalls: list[float] = []
    paths: Counter[str] = Counter()
    for probe, response in zip(probes, responses, strict=True):
        if response.status_code != 200:
            raise CommandError(f"recall failed: {response.status_code} {response.content[:200]!r}")
        body = response.json()
        recalls.append(recall_at_k([uuid.UUID(hit["memory"]["id"]) for hit in body["data"]], probe.truth))
        paths[str(body["meta"].get("recall_path"))] += 1
    return {"latency_ms": percentiles(latencies), "recall_at_10": recall_summary(recalls), "recall_path": dict(paths)}


def measure_http_hybrid(clients: dict[str, Client], probes: Sequence[recall_modes_bench.ModeProbe]) -> dict[str, Any]:
    def call(probe: recall_modes_bench.ModeProbe) -> Callable[[], Any]:
        body = {"query": probe.text, "limit": K, "mode": "hybrid"}
        return lambda: clients[probe.subject].post(RECALL_URL, body, content_type="application/json")

    latencies, responses = timed([call(p) for p in probes], "HTTP hybrid recall")
    failed = [r for r in responses if r.status_code != 200]
    if failed:
        raise CommandError(f"hybrid recall failed: {failed[0].status_code} {failed[0].content[:200]!r}")
    return {"latency_ms": percentiles(latencies)}


def measure_embedding(tenant: Tenant, probes: Sequence[Probe]) -> dict[str, Any]:
    """The query embedding the endpoint does, alone: embed_texts (provider + circuit breaker) and the bare provider."""
    hashing = embedders.HashingEmbedder()
    service, _ = timed([functools.partial(embedders.embed_texts, tenant, [p.query_text]) for p in probes], "embed")
    bare, _ = timed([functools.partial(hashing.embed, [p.query_text]) for p in probes], "hashing")
    return {"embed_texts_ms": percentiles(service), "hashing_provider_ms": percentiles(bare)}


def measure_remember(client: Client, count: int, run_id: str) -> dict[str, Any]:
    def call(n: int) -> Callable[[], Any]:
        body = {"text": f"benchmark note {run_id}-{n}: the deploy runner image is pinned to version {n}"}
        return lambda: client.post(REMEMBER_URL, body, content_type="application/json")

    warmup = min(10, count)
    latencies, responses = timed([call(n) for n in range(count + warmup)], "HTTP remember")
    failed = [r for r in responses if r.status_code != 201]
    if failed:
        raise CommandError(f"remember failed: {failed[0].status_code} {failed[0].content[:200]!r}")
    return {"latency_ms": percentiles(latencies[warmup:])}


# --- One pass and the whole run ---------------------------------------------------------------------------


def measure_pass(
    tenant: Tenant,
    probes: Sequence[Probe],
    *,
    remember: int,
    run_id: str,
    mode_probes: Sequence[recall_modes_bench.ModeProbe],
    quota: tuple[Tenant, Sequence[recall_modes_bench.ModeProbe]],
) -> dict[str, Any]:
    keys: list[IssuedKey] = []
    try:
        clients: dict[str, Client] = {}
        for subject in [*(p.subject for p in probes), WRITER_SUBJECT]:
            issued = api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=subject, name="benchmark")
            keys.append(issued)
            clients[subject] = Client(HTTP_AUTHORIZATION=f"Bearer {issued.raw_key}")
        service = {mode.label: measure_mode(mode, tenant.id, probes) for mode in MODES}
        filtered = {mode.label: measure_mode(mode, tenant.id, probes, TAG_FILTER) for mode in FILTERED_MODES}
        quota_tenant, quota_probes = quota
        figures = {
            "service": service,
            "filtered": {"filters": TAG_FILTER.as_dict(), "service": filtered},
            "modes": recall_modes_bench.measure_modes(tenant.id, mode_probes, "modes"),
            "modes_quota_full": recall_modes_bench.measure_modes(quota_tenant.id, quota_probes, "modes, quota-full"),
            "http_recall": measure_http_recall(clients, probes),
            "http_recall_hybrid": measure_http_hybrid(clients, mode_probes),
            "query_embedding": measure_embedding(tenant, probes),
            "http_remember": measure_remember(clients[WRITER_SUBJECT], remember, run_id),
        }
    finally:
        Memory.objects.for_scope(Scope(tenant_id=tenant.id, subject_id=WRITER_SUBJECT)).delete()
        for issued in keys:
            api_key_revoke(key_id=str(issued.api_key.id))
    figures["goals"] = goals(figures)
    return figures


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    auto = figures["service"]["auto"]
    filtered = figures["filtered"]["service"]["auto"]
    return {
        "recall_at_10_is_1_for_every_sampled_subject": auto["recall_at_10"]["min"] == 1.0,
        "filtered_recall_at_10_is_1_for_every_sampled_subject": filtered["recall_at_10"]["min"] == 1.0,
        "hybrid_p95_le_1.5x_semantic": figures["modes"]["goal_hybrid_p95_le_1.5x_semantic"],
        "hybrid_p95_le_1.5x_semantic_quota_full": figures["modes_quota_full"]["goal_hybrid_p95_le_1.5x_semantic"],
        "recall_p95_le_20ms_server_side": auto["latency_ms"]["p95"] <= GOAL_RECALL_P95_MS,
        "remember_p95_le_15ms": figures["http_remember"]["latency_ms"]["p95"] <= GOAL_REMEMBER_P95_MS,
    }


def load_average() -> list[float]:
    """The machine's 1/5/15-minute load, printed beside every figure: a busy machine's figures mean little."""
    return [round(x, 2) for x in os.getloadavg()]


def storage(tenant_id: uuid.UUID, dimensions: int) -> dict[str, Any]:
    """What the corpus's vectors cost on disk: the stored vector per row (this tenant's rows), and the sizes of
    the memories table, its TOAST and the HNSW index of this size (whole table: every tenant in the database)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT avg(pg_column_size(embedding)), count(*) FROM memories WHERE tenant_id = %s",
            [str(tenant_id)],
        )
        per_row, rows = cursor.fetchone() or (0, 0)
        cursor.execute(
            "SELECT pg_relation_size('memories'), coalesce(pg_total_relation_size(reltoastrelid), 0),"
            " pg_indexes_size('memories'), pg_relation_size(to_regclass(%s))"
            " FROM pg_class WHERE oid = 'memories'::regclass",
            [scale_corpus.hnsw_index_name(dimensions)],
        )
        heap, toast, indexes, hnsw = cursor.fetchone() or (0, 0, 0, 0)
    return {
        "dimensions": dimensions,
        "tenant_rows": rows,
        "embedding_bytes_per_row": round(float(per_row or 0), 1),
        "memories_heap_bytes": heap,
        "memories_toast_bytes": toast,
        "memories_all_indexes_bytes": indexes,
        "hnsw_index_bytes": hnsw,
        "load_average": load_average(),
    }


def environment() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension WHERE extname = 'vector'),"
            " current_setting('shared_buffers'), pg_total_relation_size('memories'),"
            f" pg_relation_size(to_regclass('{scale_corpus.HNSW_INDEX_NAME}'))"
        )
        row = cursor.fetchone()
    assert row is not None
    return {
        "postgres": row[0],
        "pgvector": row[1],
        "shared_buffers": row[2],
        "memories_table_bytes": row[3],
        "hnsw_index_bytes": row[4],
        "cpus": os.cpu_count(),
        "load_average": load_average(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "hnsw_ef_search": settings.HNSW_EF_SEARCH,
        "hnsw_max_scan_tuples": settings.HNSW_MAX_SCAN_TUPLES,
        "recall_exact_max_rows": settings.RECALL_EXACT_MAX_ROWS,
    }


class Command(OperatorCommand):
    help = (
        "Build (or --reuse) a diluted corpus and measure recall per read path: p50/p95/p99 latency of "
        "recall_by_vector and recall@10 against exact kNN; HTTP recall and remember through the full Django stack."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--rows", type=int, default=200_000)
        parser.add_argument("--subjects", type=int, default=2_000)
        parser.add_argument("--queries", type=int, default=200, help="sampled subjects (one query each)")
        parser.add_argument("--remember", type=int, default=500, help="POST /api/v1/memory requests to time")
        parser.add_argument("--passes", type=int, default=1, help="measure this many times (noisy machines)")
        parser.add_argument("--tenant-slug", help="default: bench-recall-<rows>-<subjects>")
        parser.add_argument("--reuse", action="store_true", help="measure the corpus the tenant already holds")
        parser.add_argument("--seed", type=int, default=scale_corpus.DEFAULT_SEED)
        parser.add_argument(
            "--quota-rows", type=int, default=None, help="rows of the quota-full subject (default: the memory quota)"
        )
        parser.add_argument(
            "--dims",
            type=int,
            action="append",
            default=[],
            help="also build the same corpus at this size (a synthetic model, e.g. 1536) in its own tenant and "
            "print its storage and service-level reads beside the native 384-dim ones; repeatable",
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        rows, subjects = options["rows"], options["subjects"]
        slug = options["tenant_slug"] or f"bench-recall-{rows}-{subjects}"
        built = not Tenant.objects.filter(slug=slug).exists()
        tenant, corpus = prepare_corpus(
            slug=slug, rows=rows, subjects=subjects, reuse=options["reuse"], seed=options["seed"]
        )
        tagged_now = scale_corpus.ensure_filter_tag(tenant_id=tenant.id, rows=rows)
        probes = sample_probes(corpus, options["queries"], options["seed"])
        mode_probes = recall_modes_bench.diluted_probes(corpus, [p.subject for p in probes], [p.vector for p in probes])
        # The quota-full subject lives in a tenant of its own: the diluted corpus and its checks stay as they are.
        quota_rows = options["quota_rows"] or settings.MEMORY_QUOTA
        quota_tenant = Tenant.objects.filter(slug=f"{slug}-quota").first() or scale_tenant(
            name=f"Recall benchmark, a quota-full subject ({quota_rows} rows)", slug=f"{slug}-quota"
        )
        recall_modes_bench.ensure_quota_subject(quota_tenant.id, rows=quota_rows, seed=options["seed"])
        quota_probes = recall_modes_bench.quota_probes(options["queries"], rows=quota_rows, seed=options["seed"])
        summary: dict[str, Any] = {
            "corpus": {**corpus_summary(corpus, tenant, built=built), "filter_tag_added_now": tagged_now},
            "quota_full_subject_rows": quota_rows,
            "environment": environment(),
            "storage": storage(tenant.id, corpus.load.dimensions),
            "dilution": measure_dilution(corpus, probes[:DILUTION_PROBES]),
            "half_precision": measure_half_precision(corpus, probes, options["seed"]),
            "passes": [
                measure_pass(
                    tenant,
                    probes,
                    remember=options["remember"],
                    run_id=f"{uuid.uuid4().hex[:8]}-{n}",
                    mode_probes=mode_probes,
                    quota=(quota_tenant, quota_probes),
                )
                for n in range(options["passes"])
            ],
        }
        summary["dimensions_compared"] = [
            compare_dimensions(dimensions, slug=slug, options=options)
            for dimensions in options["dims"]
            if dimensions != corpus.load.dimensions
        ]
        return summary, render(summary)


# The service-level reads of the size comparison (HTTP embeds with the tenant's 384-dim model: not comparable).
COMPARED_MODES = (MODES[0], MODES[1], MODES[4])


def compare_dimensions(dimensions: int, *, slug: str, options: dict[str, Any]) -> dict[str, Any]:
    """The same diluted corpus at another size, in its own tenant: storage and the recall_by_vector reads."""
    rows, subjects = options["rows"], options["subjects"]
    tenant, corpus = prepare_corpus(
        slug=f"{slug}-d{dimensions}",
        rows=rows,
        subjects=subjects,
        reuse=Tenant.objects.filter(slug=f"{slug}-d{dimensions}").exists(),
        seed=options["seed"],
        dimensions=dimensions,
    )
    probes = sample_probes(corpus, options["queries"], options["seed"])
    return {
        "dimensions": dimensions,
        "model_id": corpus.model_id,
        "storage": storage(tenant.id, dimensions),
        "service": {mode.label: measure_mode(mode, tenant.id, probes) for mode in COMPARED_MODES},
    }


def corpus_summary(corpus: scale_corpus.DilutedCorpus, tenant: Tenant, *, built: bool) -> dict[str, Any]:
    return {
        "tenant": tenant.slug,
        "rows": corpus.rows,
        "subjects": len(corpus.subjects),
        "rows_per_subject": corpus.rows // len(corpus.subjects),
        "subjects_per_hub": corpus.group_size,
        "dimensions": corpus.load.dimensions,
        "model_id": corpus.model_id,
        "built_now": built,
        "copy_seconds": round(corpus.load.copy_seconds, 1) if built else None,
        "index_build_seconds": round(corpus.load.index_seconds, 1) if built else None,
    }


# --- Rendering --------------------------------------------------------------------------------------------


def render(summary: dict[str, Any]) -> str:
    corpus, env, dilution = summary["corpus"], summary["environment"], summary["dilution"]
    built = (
        f"COPY {corpus['copy_seconds']} s, HNSW build {corpus['index_build_seconds']} s"
        if corpus["built_now"]
        else "reused"
    )
    nearer = dilution["foreign_rows_nearer_than_nearest_own_row"]
    lines = [
        f"corpus {corpus['tenant']}: {corpus['rows']:,} rows, {corpus['subjects']:,} subjects "
        f"({corpus['rows_per_subject']} rows each, hubs of {corpus['subjects_per_hub']}), {corpus['dimensions']} dims; "
        f"{built}",
        f"PostgreSQL {env['postgres']}, pgvector {env['pgvector']}, shared_buffers {env['shared_buffers']}, "
        f"{env['cpus']} CPUs, load average {env['load_average']}; ef_search {env['hnsw_ef_search']}, "
        f"max_scan_tuples {env['hnsw_max_scan_tuples']}, "
        f"exact up to {env['recall_exact_max_rows']} rows",
        f"dilution ({dilution['subjects_checked']} subjects): rows nearer than the subject's nearest own row "
        f"min {nearer['min']}, median {nearer['median']}; own top 10 outside the global top {DILUTION_DEPTH} for "
        f"{dilution['top10_outside_global_top500_fraction']:.0%}",
    ]
    if "half_precision" in summary:
        half = summary["half_precision"]
        lines.append(
            f"exact top 10 on the stored (half precision) vectors against float32: recall@10 mean {half['mean']}, "
            f"min {half['min']}, identical for {half['complete_fraction']:.1%} of subjects"
        )
    for number, figures in enumerate(summary["passes"], start=1):
        lines += ["", f"pass {number}", *render_pass(figures)]
    lines += ["", *render_sizes(summary)]
    return "\n".join(lines)


def render_sizes(summary: dict[str, Any]) -> list[str]:
    """Storage per row and the service-level reads, native size beside each compared size."""
    sizes = [
        {"storage": summary["storage"], "service": summary["passes"][0]["service"], "model_id": "native"},
        *summary.get("dimensions_compared", []),
    ]
    header = f"{'dims':>6}{'vector B/row':>14}{'heap MB':>9}{'TOAST MB':>10}{'HNSW MB':>9}  load average"
    lines = ["storage (heap/TOAST: the whole memories table; HNSW: the index of that size)", header]
    for size in sizes:
        st = size["storage"]
        lines.append(
            f"{st['dimensions']:>6}{st['embedding_bytes_per_row']:>14.0f}{st['memories_heap_bytes'] / 1e6:>9.1f}"
            f"{st['memories_toast_bytes'] / 1e6:>10.1f}{st['hnsw_index_bytes'] / 1e6:>9.1f}  {st['load_average']}"
        )
    header = f"{'read':<28}" + "".join(f"{str(s['storage']['dimensions']) + ' p50/p95 ms':>22}" for s in sizes)
    lines += ["", header]
    for mode in COMPARED_MODES:
        cells = ""
        for size in sizes:
            figures = size["service"][mode.label]
            latency, recall = figures["latency_ms"], figures["recall_at_10"]["min"]
            cells += f"{latency['p50']:>8.2f}/{latency['p95']:.2f} r{recall:.2f}".rjust(22)
        lines.append(f"{'recall_by_vector ' + mode.label:<28}{cells}")
    loads = ", ".join(
        f"{s['storage']['dimensions']}: {s['service'][COMPARED_MODES[0].label]['load_average']}" for s in sizes
    )
    lines.append(f"load average while measuring ({loads})")
    return lines


def render_pass(figures: dict[str, Any]) -> list[str]:
    header = f"{'read':<40}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'r@10 mean':>11}{'min':>6}{'=1.0':>7}  plan"
    lines = [header, "-" * len(header)]
    for label, mode in figures["service"].items():
        plan = f"{mode['plan']} (load {mode['load_average'][0]})"
        lines.append(row(f"recall_by_vector {label}", mode["latency_ms"], mode["recall_at_10"], plan))
    http = figures["http_recall"]
    lines.append(row("POST /memory/recall (in-process)", http["latency_ms"], http["recall_at_10"], "auto"))
    embedding = figures["query_embedding"]
    lines.append(row("  of which: embed_texts (hashing)", embedding["embed_texts_ms"]))
    lines.append(row("  bare hashing provider", embedding["hashing_provider_ms"]))
    lines.append(row("POST /memory/recall mode=hybrid", figures["http_recall_hybrid"]["latency_ms"]))
    lines.append(row("POST /memory (remember)", figures["http_remember"]["latency_ms"]))
    lines += ["", *render_filtered(figures)]
    lines += recall_modes_bench.render_modes("modes, sampled subjects", figures["modes"])
    lines += recall_modes_bench.render_modes("modes, a quota-full subject", figures["modes_quota_full"])
    lines.append("goals: " + ", ".join(f"{name} {'PASS' if ok else 'FAIL'}" for name, ok in figures["goals"].items()))
    return lines


def render_filtered(figures: dict[str, Any]) -> list[str]:
    """The filtered pass, each read's p95 next to the same read unfiltered."""
    filtered = figures["filtered"]
    header = (
        f"{'filtered read ' + json.dumps(filtered['filters']):<40}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}"
        f"{'r@10 mean':>11}{'min':>6}{'=1.0':>7}{'unfilt p95':>12}  plan"
    )
    lines = [header, "-" * len(header)]
    for label, mode in filtered["service"].items():
        latency, recall = mode["latency_ms"], mode["recall_at_10"]
        unfiltered = figures["service"][label]["latency_ms"]["p95"]
        lines.append(
            f"{'recall_by_vector ' + label:<40}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}"
            f"{recall['mean']:>11.3f}{recall['min']:>6.2f}{recall['complete_fraction']:>7.0%}{unfiltered:>12.2f}"
            f"  {mode['plan']}".rstrip()
        )
    return lines


def row(label: str, latency: dict[str, float], recall: dict[str, float] | None = None, plan: str = "") -> str:
    text = f"{label:<40}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}"
    if recall is not None:
        text += f"{recall['mean']:>11.3f}{recall['min']:>6.2f}{recall['complete_fraction']:>7.0%}"
    return f"{text}  {plan}".rstrip()
