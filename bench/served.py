"""The served benchmark: a running `scripts/serve` driven over real HTTP, beside the SQL it stands on.

It starts nothing. It is pointed at the service's database (the same `LOOPMEM_DATA_DIR` or `DATABASE_URL`), where
it builds (or reuses) one tenant holding the diluted memory corpus (`bench.scale_corpus`) and the merged-recall
article corpus (`bench_merged_recall`), both tagged with the loopback embedder's model, and points the tenant's
`openai` provider at a running loopback embedder (`manage.py loopback_embedder`). Agent keys are made through the
ORM and revoked at the end; the rows `remember` and session append write are deleted at the end.

Series, on the same sampled subjects: the bare scoped SQL of the exact read (psycopg, the very statement the ORM
sent, captured), in-process `recall_by_vector`, then over HTTP with N concurrent keep-alive clients:
`/memory/recall` semantic and hybrid, `/recall`, remember and session append. Each prints p50/p95/p99, throughput,
errors, the load average before and after, recall@10 against the exact answer where it is measurable, and the
query-embedding cache's hits and misses over the series (read from `/metrics`, so only with a metrics token).
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
from django.core.management.base import CommandError
from django.db import connections
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from bench import scale_corpus
from bench.embed_overhead import LOOPBACK_API_KEY
from bench.harness import BENCH_RATE_LIMIT, percentiles
from bench.loopback_embedder import MODEL
from knowledge.models import Article
from loopmem.database.backend.plain import plain_connection_params
from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.embedding import embedders
from loopmem.models import ApiKey, Tenant
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import IssuedKey, api_key_create, api_key_revoke, tenant_create, tenant_set_provider
from memory.models import Memory, SessionTurn
from memory.selectors import recall_by_vector

K = 10
MODEL_ID = embedders.EmbedderSpec(provider="openai", model=MODEL).model_id
WRITER_PREFIX = "bench-served-writer-"
MEMORY_RECALL = "/api/v1/memory/recall"
MERGED_RECALL = "/api/v1/recall"
REMEMBER = "/api/v1/memory"
SESSION_CONTENT = "The user asked to retry the deploy after the flaky integration test; agreed to pin the runner image."
GOALS_P95_MS = {"http_memory_recall_semantic": 10.0, "http_recall": 30.0, "http_remember": 10.0}


# --- The corpus ----------------------------------------------------------------------------------------------


def point_at_embedder(tenant: Tenant, embedder_url: str) -> Tenant:
    return tenant_set_provider(
        tenant=tenant,
        embedding="openai",
        embedding_model=MODEL,
        embedding_base_url=embedder_url,
        embedding_api_key=LOOPBACK_API_KEY,
    )


ArticleBuilder = Callable[[Tenant, scale_corpus.DilutedCorpus, int, int], object]


def corpus_memories(tenant: Tenant) -> int:
    return Memory.objects.for_tenant(tenant.id).exclude(subject_id__startswith=WRITER_PREFIX).count()


def corpus_articles(tenant: Tenant) -> int:
    # Memories the benchmark's own recalls made valuable graduate into articles between runs: not corpus.
    return Article.objects.filter(tenant=tenant).exclude(metadata__has_key="graduated_from_memory_id").count()


def prepare(
    *,
    slug: str,
    rows: int,
    subjects: int,
    articles: int,
    reuse: bool,
    seed: int,
    embedder_url: str,
    build_articles: ArticleBuilder,
    progress: scale_corpus.Progress = scale_corpus.no_progress,
    phase: scale_corpus.Phase = scale_corpus.no_phase,
) -> tuple[Tenant, scale_corpus.DilutedCorpus, bool]:
    """The tenant (built now, continued from where a killed build stopped, or --reuse of a whole one), pointed at
    `embedder_url`; True when anything was built now.

    `build_articles(tenant, corpus, total, seed)` is the merged-recall benchmark's article builder (a command
    module, which this module must not import: the command imports this one); it continues a partial build too.
    """
    existing = Tenant.objects.filter(slug=slug).first()
    if existing is None:
        tenant = tenant_create(
            name=f"Served benchmark ({rows} memories, {subjects} subjects, {articles} articles)",
            slug=slug,
            rate_limit_per_minute=BENCH_RATE_LIMIT,
        )
    else:
        tenant = existing
    tenant = point_at_embedder(tenant, embedder_url)
    loaded, found_articles = corpus_memories(tenant), corpus_articles(tenant)
    whole = (loaded, found_articles) == (rows, articles) and scale_corpus.has_hnsw_index()
    if existing is not None:
        if loaded > rows or found_articles > articles:
            raise CommandError(
                f"tenant {slug} holds {loaded} memories and {found_articles} articles, not {rows} and {articles}"
            )
        if whole and not reuse:
            raise CommandError(
                f"tenant {slug} exists: pass --reuse to measure its corpus again, or another --tenant-slug"
            )
    if loaded < rows:
        corpus = scale_corpus.build_diluted_corpus(
            tenant_id=tenant.id,
            rows=rows,
            subjects=subjects,
            seed=seed,
            model_id=MODEL_ID,
            progress=progress,
            phase=phase,
        )
    else:
        # Built at the loopback model's native size (build_diluted_corpus's default), whatever the settings say.
        load = scale_corpus.LoadStats(
            rows=rows, dimensions=scale_corpus.NATIVE_DIMENSIONS, copy_seconds=0, index_seconds=0
        )
        if not scale_corpus.has_hnsw_index():
            phase("building the HNSW index")  # the build was killed while it built the index
            load = replace(load, index_seconds=scale_corpus.build_hnsw_index())
        corpus = scale_corpus.diluted_corpus_shape(
            tenant_id=tenant.id, rows=rows, subjects=subjects, load=load, model_id=MODEL_ID
        )
    if found_articles < articles:
        build_articles(tenant, corpus, articles, seed)  # tagged with the tenant's model: the loopback one
    return tenant, corpus, not whole


# --- Probes --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One sampled subject: its query, its key, the vector the loopback embedder gives the query, the exact top 10,
    and the exact read's SQL as the ORM sent it."""

    subject: str
    query: str
    key: IssuedKey
    vector: list[float]
    truth: tuple[uuid.UUID, ...]
    exact_sql: str


def make_probes(tenant: Tenant, corpus: scale_corpus.DilutedCorpus, *, count: int, seed: int) -> list[Probe]:
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(corpus.subjects), size=min(count, len(corpus.subjects)), replace=False))
    probes: list[Probe] = []
    for index in chosen:
        subject = corpus.subjects[int(index)]
        query = corpus.query_text(subject)
        # Through the SDK and the loopback server, as the service embeds it (float32 on the wire): the ground
        # truth is computed for the very vector the served read compares.
        embedded = embedders.embed_query(tenant, query)
        if isinstance(embedded, embedders.EmbeddingFailure):
            raise CommandError(f"the loopback embedder did not answer: {embedded.tag} ({embedded})")
        truth = scale_corpus.exact_neighbours(tenant_id=tenant.id, vector=embedded.vector, k=K, subject_id=subject)
        key = api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=subject, name="served benchmark")
        probes.append(
            Probe(
                subject=subject,
                query=query,
                key=key,
                vector=embedded.vector,
                truth=tuple(n.id for n in truth),
                exact_sql=_exact_read_sql(tenant, subject, embedded.vector),
            )
        )
    return probes


def _exact_read_sql(tenant: Tenant, subject: str, vector: list[float]) -> str:
    """The SQL statement of recall's exact read, as the ORM sent it (parameters inlined by the client cursor)."""
    with CaptureQueriesContext(connections[HEAVY_READ_ALIAS]) as captured:
        recall_by_vector(
            scope=Scope(tenant_id=tenant.id, subject_id=subject), vector=vector, model_id=MODEL_ID, k=K, path="exact"
        )
    reads = [q["sql"] for q in captured.captured_queries if "<=>" in q["sql"] and "ORDER BY" in q["sql"]]
    if not reads:
        raise CommandError("could not capture the exact read's SQL")
    return reads[-1]


def recall_at_k(found: Sequence[uuid.UUID], truth: Sequence[uuid.UUID]) -> float:
    return len(set(found[:K]) & set(truth)) / max(len(truth), 1)


# --- Timing --------------------------------------------------------------------------------------------------


@dataclass
class Series:
    """One measured series: latencies, wall time, errors, and what the caller derived from the answers."""

    latencies_ms: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    errors: int = 0
    error_sample: str = ""
    recalls: list[float] = field(default_factory=list)
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)
    cache: dict[str, float | None] | None = None
    workers: int = 1

    def summary(self) -> dict[str, Any]:
        done = len(self.latencies_ms)
        return {
            "latency_ms": percentiles(self.latencies_ms) if done else None,
            "throughput_per_s": round(done / self.wall_seconds, 1) if self.wall_seconds else None,
            "errors": self.errors,
            "error_sample": self.error_sample or None,
            "recall_at_10": round(float(np.mean(self.recalls)), 4) if self.recalls else None,
            "recall_at_10_min": round(float(np.min(self.recalls)), 4) if self.recalls else None,
            "query_cache": self.cache,
            "concurrency": self.workers,
            "load_average_before": self.load_before,
            "load_average_after": self.load_after,
        }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed_sequential(calls: Sequence[Callable[[], float | None]]) -> Series:
    """Run each call in this thread; a call returns its recall@10 (or None where it is not measurable)."""
    series = Series(load_before=load_average())
    started = time.perf_counter()
    for call in calls:
        begun = time.perf_counter()
        recall = call()
        series.latencies_ms.append((time.perf_counter() - begun) * 1000)
        if recall is not None:
            series.recalls.append(recall)
    series.wall_seconds = time.perf_counter() - started
    series.load_after = load_average()
    return series


@dataclass(frozen=True)
class Request:
    path: str
    body: dict[str, Any]
    key: str
    expect: int
    score: Callable[[dict[str, Any]], float | None] | None = None  # recall@10 from the answer body

    def for_target(self, target: int) -> Request:
        """The request as sent to the `target`-th service: a write's text made its own (no duplicate rows)."""
        if target == 0:
            return self
        body = dict(self.body)
        for field_name in ("text", "content"):
            if field_name in body:
                body[field_name] = f"{body[field_name]} (service {target + 1})"
        return replace(self, body=body)


class KeptAlive:
    """One HTTP/1.1 connection a client thread keeps open (reconnecting after a failure)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._connection = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self._host, self._port, timeout=30)

    def post(self, path: str, body: dict[str, Any], key: str) -> tuple[int, bytes]:
        headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
        try:
            self._connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = self._connection.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, OSError):
            self._connection.close()
            self._connection = self._connect()
            raise

    def get(self, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        self._connection.request("GET", path, headers=headers)
        response = self._connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self._connection.close()


def timed_http(base_url: str, requests: Sequence[Request], *, clients: int) -> Series:
    """`clients` threads, each on its own kept-alive connection, take the requests in order until none is left."""
    [series] = timed_http_interleaved([base_url], requests, clients=clients)
    return series


def timed_http_interleaved(targets: Sequence[str], requests: Sequence[Request], *, clients: int) -> list[Series]:
    """Each request sent to every target in turn, the order rotating from one request to the next; a Series each.

    With two targets (`--compare-url`) both services meet the same requests under the same machine conditions: on a
    shared 2-core machine whose speed drifts by 2x over minutes, only an interleaved comparison says which is faster.
    A write is sent to each target with its own text (`Request.for_target`).
    """
    series = [Series(load_before=load_average(), workers=clients) for _ in targets]
    lock = threading.Lock()
    cursor = iter(requests)

    def next_request() -> Request | None:
        with lock:
            return next(cursor, None)

    def record(target: int, latency_ms: float, recall: float | None, error: str | None) -> None:
        with lock:
            if error is not None:
                series[target].errors += 1
                series[target].error_sample = series[target].error_sample or error
                return
            series[target].latencies_ms.append(latency_ms)
            if recall is not None:
                series[target].recalls.append(recall)

    def send(connection: KeptAlive, target: int, request: Request) -> None:
        begun = time.perf_counter()
        try:
            status, payload = connection.post(request.path, request.body, request.key)
        except (http.client.HTTPException, OSError) as exc:
            record(target, 0.0, None, f"{type(exc).__name__}: {exc}")
            return
        latency = (time.perf_counter() - begun) * 1000
        if status != request.expect:
            record(target, latency, None, f"{status} {payload[:200]!r}")
            return
        score = request.score(json.loads(payload)) if request.score is not None else None
        record(target, latency, score, None)

    def client() -> None:
        kept_alive = [KeptAlive(url) for url in targets]
        try:
            turn = 0
            while (request := next_request()) is not None:
                order = list(range(len(targets)))
                order = order[turn % len(order) :] + order[: turn % len(order)]
                turn += 1
                for target in order:
                    send(kept_alive[target], target, request.for_target(target))
        finally:
            for connection in kept_alive:
                connection.close()

    threads = [threading.Thread(target=client, name=f"bench-client-{n}") for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    for one in series:
        one.wall_seconds = wall / len(targets)  # each target had about its share of the wall time
        one.load_after = load_average()
    return series


# --- The query-embedding cache, read from the service's /metrics -----------------------------------------------


def cache_counts(base_url: str, token: str) -> dict[str, float] | None:
    """Hits and misses summed over the web workers, or None without a metrics token (or a /metrics answer)."""
    if not token:
        return None
    connection = KeptAlive(base_url)
    try:
        status, payload = connection.get("/metrics", {"authorization": f"Bearer {token}"})
    except (http.client.HTTPException, OSError):
        return None
    finally:
        connection.close()
    if status != 200:
        return None
    counts = {"hit": 0.0, "miss": 0.0}
    for family in text_string_to_metric_families(payload.decode()):
        if family.name != "loopmem_query_embedding_cache":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("result") in counts:
                counts[sample.labels["result"]] += sample.value
    return counts


def cache_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float | None] | None:
    if before is None or after is None:
        return None
    hits, misses = after["hit"] - before["hit"], after["miss"] - before["miss"]
    lookups = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / lookups, 4) if lookups else None}


# --- The series ----------------------------------------------------------------------------------------------


def bare_sql(probes: Sequence[Probe], *, repeats: int) -> Series:
    """The captured exact-read statement on a plain psycopg connection (autocommit, no ORM, no transaction)."""
    with psycopg.connect(**plain_connection_params(HEAVY_READ_ALIAS), autocommit=True) as conn:

        def call(probe: Probe) -> Callable[[], float | None]:
            def run() -> float | None:
                with conn.cursor() as cursor:
                    cursor.execute(probe.exact_sql.encode())
                    rows = cursor.fetchall()
                return recall_at_k([row[0] for row in rows], probe.truth)

            return run

        for probe in probes[:5]:
            call(probe)()
        return timed_sequential([call(p) for p in probes] * repeats)


def in_process(tenant: Tenant, probes: Sequence[Probe], *, repeats: int) -> Series:
    """recall_by_vector (path auto) with the query vector in hand: the read the endpoint makes, minus HTTP."""

    def call(probe: Probe) -> Callable[[], float | None]:
        def run() -> float | None:
            result = recall_by_vector(
                scope=Scope(tenant_id=tenant.id, subject_id=probe.subject), vector=probe.vector, model_id=MODEL_ID, k=K
            )
            return recall_at_k([hit.memory.id for hit in result.hits], probe.truth)

        return run

    for probe in probes[:5]:
        call(probe)()
    return timed_sequential([call(p) for p in probes] * repeats)


def _memory_recall_score(probe: Probe) -> Callable[[dict[str, Any]], float | None]:
    return lambda body: recall_at_k([uuid.UUID(hit["memory"]["id"]) for hit in body["data"]], probe.truth)


def recall_requests(probes: Sequence[Probe], *, mode: str, repeats: int) -> list[Request]:
    return [
        Request(
            MEMORY_RECALL,
            {"query": p.query, "limit": K, "mode": mode},
            p.key.raw_key,
            200,
            _memory_recall_score(p) if mode == "semantic" else None,
        )
        for _ in range(repeats)
        for p in probes
    ]


def merged_requests(probes: Sequence[Probe], *, repeats: int) -> list[Request]:
    body = {"limit": K}
    return [
        Request(MERGED_RECALL, {**body, "query": p.query}, p.key.raw_key, 200) for _ in range(repeats) for p in probes
    ]


def write_requests(writers: Sequence[IssuedKey], *, count: int, run_id: str, tier: str) -> list[Request]:
    requests = []
    for n in range(count):
        key = writers[n % len(writers)].raw_key
        if tier == "session":
            session = f"bench-{run_id}-{n % 50}"
            body = {"tier": "session", "session_id": session, "role": "user", "content": SESSION_CONTENT}
        else:
            body = {"text": f"served benchmark note {run_id}-{n}: the deploy runner image is pinned to version {n}"}
        requests.append(Request(REMEMBER, body, key, 201))
    return requests


@dataclass(frozen=True)
class Plan:
    base_url: str
    compare_url: str | None
    clients: int
    repeats: int
    writes: int
    metrics_token: str
    run_id: str
    embed_wait_seconds: float = 30.0


def measure(tenant: Tenant, probes: Sequence[Probe], writers: Sequence[IssuedKey], plan: Plan) -> dict[str, Any]:
    """Every series once, in order; the HTTP ones after one untimed request per key (its last_used_at write).

    The warm-up asks another text, so the first series meets the probes' queries uncached.
    """
    warm = [Request(MEMORY_RECALL, {"query": "warm-up", "limit": K}, p.key.raw_key, 200) for p in probes]
    warm += [Request(REMEMBER, {"text": f"warm-up {plan.run_id} {n}"}, w.raw_key, 201) for n, w in enumerate(writers)]
    targets = [plan.base_url] if plan.compare_url is None else [plan.base_url, plan.compare_url]
    timed_http_interleaved(targets, warm, clients=plan.clients)
    figures: dict[str, Any] = {
        "bare_sql": bare_sql(probes, repeats=plan.repeats).summary(),
        "recall_by_vector": in_process(tenant, probes, repeats=plan.repeats).summary(),
    }
    http_series: list[tuple[str, list[Request]]] = [
        ("http_memory_recall_semantic", recall_requests(probes, mode="semantic", repeats=plan.repeats)),
        ("http_memory_recall_hybrid", recall_requests(probes, mode="hybrid", repeats=plan.repeats)),
        ("http_recall", merged_requests(probes, repeats=plan.repeats)),
        ("http_remember", write_requests(writers, count=plan.writes, run_id=plan.run_id, tier="long_term")),
        ("http_session_append", write_requests(writers, count=plan.writes, run_id=plan.run_id, tier="session")),
    ]
    for name, requests in http_series:
        before = [cache_counts(url, plan.metrics_token) for url in targets]
        measured = timed_http_interleaved(targets, requests, clients=plan.clients)
        for n, (url, series) in enumerate(zip(targets, measured, strict=True)):
            series.cache = cache_delta(before[n], cache_counts(url, plan.metrics_token))
            figures[name if n == 0 else f"{name}{COMPARED}"] = series.summary()
        if name == "http_remember":
            figures["embedding_lag"] = embedding_lag(tenant, plan)
    return figures


def embedding_lag(tenant: Tenant, plan: Plan) -> dict[str, Any]:
    """How soon the run's writes are searchable by meaning: polls until every memory its writers stored holds a
    vector, from the moment the last write was answered, for at most `plan.embed_wait_seconds` (the embedding
    worker is the running service's, not this command's)."""
    written = Memory.objects.for_tenant(tenant.id).filter(subject_id__startswith=f"{WRITER_PREFIX}{plan.run_id}-")
    started = time.perf_counter()
    rows = written.count()
    while True:
        waiting = written.filter(embedding__isnull=True).count()
        elapsed = time.perf_counter() - started
        if waiting == 0 or elapsed >= plan.embed_wait_seconds:
            break
        time.sleep(0.02)
    return {
        "rows": rows,
        "embedded": rows - waiting,
        "seconds_after_last_write": round(elapsed, 3) if waiting == 0 else None,
        "waited_seconds": round(elapsed, 3),
    }


# The key suffix of a series measured at --compare-url.
COMPARED = "@compare"


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, goal in GOALS_P95_MS.items():
        latency = figures[name]["latency_ms"]
        out[f"{name}_p95_le_{goal:g}ms"] = latency is not None and latency["p95"] <= goal
    bare, read = figures["bare_sql"]["latency_ms"], figures["recall_by_vector"]["latency_ms"]
    out["recall_by_vector_p95_le_3x_bare_sql"] = read["p95"] <= 3 * bare["p95"]
    return out


# --- Keys and clean-up -----------------------------------------------------------------------------------------


def writer_keys(tenant: Tenant, *, run_id: str, count: int) -> list[IssuedKey]:
    return [
        api_key_create(
            role=ApiKey.Role.AGENT, tenant=tenant, agent_id=f"{WRITER_PREFIX}{run_id}-{n}", name="served benchmark"
        )
        for n in range(count)
    ]


def clean_up(tenant: Tenant, keys: Sequence[IssuedKey]) -> None:
    """Revoke the run's keys and delete what its writes added, so the corpus stays the corpus (--reuse)."""
    for key in keys:
        api_key_revoke(key_id=str(key.api_key.id))
    Memory.objects.for_tenant(tenant.id).filter(subject_id__startswith=WRITER_PREFIX).delete()
    SessionTurn.objects.filter(tenant_id=tenant.id, subject_id__startswith=WRITER_PREFIX).delete()
