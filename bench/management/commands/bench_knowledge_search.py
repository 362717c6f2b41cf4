"""bench_knowledge_search: knowledge search latency per mode over a synthetic corpus, query embedding excluded."""

from __future__ import annotations

import itertools
import random
import time
from argparse import ArgumentParser
from typing import Any

import numpy as np
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client, override_settings

from bench.harness import bench_agent, percentiles
from knowledge.models import Article
from knowledge.selectors import SearchMode, knowledge_search
from knowledge.visibility import Viewer
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.management.operator import OperatorCommand
from loopmem.models import Tenant
from loopmem.runtime.progress import progress_bar

SLUG = "bench-knowledge"
AGENT = "bench-agent"
MODES: tuple[SearchMode, ...] = ("keyword", "semantic", "combined")
VOCABULARY = 3000
TOPIC_WORDS = 12  # each topic's own words, drawn from the rarer part of the vocabulary
BROAD_WORDS = 30  # the most frequent words: in most documents, the worst case for the keyword lane
WARM_UP = 20
BATCH = 500


class Command(OperatorCommand):
    help = (
        "Measure knowledge search (the selector behind GET /api/v1/knowledge/search) per mode as an agent over a "
        "synthetic corpus of topical articles with dense, clustered synthetic vectors; query vectors are made "
        "beforehand, so no embedding is timed. Typical queries use a topic's words; a broad mix (only the most "
        "frequent words) stresses the keyword lane. Also reports the HNSW read's recall against the exact read "
        "and the whole in-process HTTP request. The corpus is kept and reused between runs of the same size."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--articles", type=int, default=20_000, help="corpus size (one tenant)")
        parser.add_argument("--queries", type=int, default=300, help="timed queries per mode and mix")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--warm-up", type=int, default=WARM_UP, help="untimed queries before each series")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--rebuild", action="store_true", help="drop and regenerate the corpus")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        rng = random.Random(options["seed"])
        space = Space(seed=options["seed"])
        tenant, key = bench_agent(slug=SLUG, agent_id=AGENT)
        if tenant.embedding_provider != "hashing":
            tenant.embedding_provider = "hashing"
            tenant.save(update_fields=["embedding_provider", "updated_at"])
        build_seconds = corpus(tenant, options["articles"], rng, space, rebuild=options["rebuild"])
        viewer = Viewer(tenant_id=tenant.id, subject_id=AGENT)
        limit, warm_up = options["limit"], options["warm_up"]

        model_id = embedders.spec_for(tenant).model_id
        typical: list[tuple[str, QueryEmbedding]] = []
        broad: list[tuple[str, QueryEmbedding]] = []
        for _ in range(options["queries"] + warm_up):
            topic, vector = space.query(rng)
            embedding = QueryEmbedding(vector=list(vector), model_id=model_id)
            typical.append((" ".join(rng.sample(space.words_of(topic), k=rng.randint(2, 3))), embedding))
            broad.append((" ".join(rng.sample(space.words[:BROAD_WORDS], k=2)), embedding))

        figures: dict[str, dict[str, Any]] = {"typical": {}, "broad": {}}
        paths: set[str] = set()
        for mix, queries, modes in (("typical", typical, MODES), ("broad", broad, ("keyword", "combined"))):
            for mode in modes:
                samples: list[float] = []
                for n, (query, embedding) in enumerate(queries):
                    started = time.perf_counter()
                    result = knowledge_search(viewer=viewer, query=query, mode=mode, embedding=embedding, limit=limit)
                    if n >= warm_up:  # the first queries warm connections and caches
                        samples.append((time.perf_counter() - started) * 1000)
                    if result.semantic_path:
                        paths.add(f"{result.semantic_path} (iterative scan: {result.ann_iterative_scan or 'n/a'})")
                figures[mix][mode] = percentiles(samples)

        summary = {
            "articles": Article.objects.filter(tenant=tenant).count(),
            "corpus_build_seconds": build_seconds,
            "limit": limit,
            "selector_ms": figures,
            "semantic_paths": sorted(paths),
            "semantic_recall_vs_exact": recall(viewer, typical[warm_up : warm_up + 100], limit),
            "http_combined_typical_ms": http(key.raw_key, [q for q, _ in typical], limit, warm_up=warm_up),
        }
        return summary, report(summary, options["queries"])


class Space:
    """A clustered vector space like a sentence embedder's: topics → subtopics → articles, 384 dimensions.

    Each step adds noise of a fixed size, so articles of one subtopic are close, of one topic fairly close,
    and of different topics nearly orthogonal. Each topic also owns a few words, so the lanes agree.
    """

    DIMENSIONS = 384
    TOPICS = 200
    SUBTOPICS = 8

    def __init__(self, *, seed: int) -> None:
        gen = np.random.default_rng(seed)
        self.topics = _unit(gen.standard_normal((self.TOPICS, self.DIMENSIONS)))
        noise = _unit(gen.standard_normal((self.TOPICS * self.SUBTOPICS, self.DIMENSIONS)))
        self.subtopics = _unit(np.repeat(self.topics, self.SUBTOPICS, axis=0) + 0.8 * noise)
        self.words = [f"w{n:04d}" for n in range(VOCABULARY)]
        self._gen = np.random.default_rng(seed + 1)

    def words_of(self, topic: int) -> list[str]:
        start = BROAD_WORDS * 10 + (topic * TOPIC_WORDS) % (VOCABULARY - BROAD_WORDS * 10 - TOPIC_WORDS)
        return self.words[start : start + TOPIC_WORDS]

    def article(self, n: int) -> tuple[int, list[float]]:
        subtopic = n % len(self.subtopics)
        return subtopic // self.SUBTOPICS, self._near(self.subtopics[subtopic], 0.6)

    def query(self, rng: random.Random) -> tuple[int, list[float]]:
        subtopic = rng.randrange(len(self.subtopics))
        return subtopic // self.SUBTOPICS, self._near(self.subtopics[subtopic], 0.6)

    def _near(self, centre: Any, noise: float) -> list[float]:
        step = _unit(self._gen.standard_normal(self.DIMENSIONS))
        return [float(x) for x in _unit(centre + noise * step)]


def _unit(matrix: Any) -> Any:
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


def corpus(
    tenant: Tenant, size: int, rng: random.Random, space: Space, *, rebuild: bool, present: int | None = None
) -> float:
    """The tenant's articles: reused when the size matches, else regenerated. Returns the build time (s).

    With `present`, the first `present` of them are already stored (a killed build committed them, batch by batch):
    they are generated again, so the random sequence stays the same, and only the rest are inserted.

    Vectors are tagged with the tenant's model id so the HTTP path, which embeds its query with the tenant's
    (hashing) provider, reads them too: its ranking is then meaningless, its cost is not.
    """
    if present is None:
        existing = Article.objects.filter(tenant=tenant)
        if not rebuild and existing.count() == size:
            return 0.0
        existing.delete()
        present = 0
    elif present % BATCH and present != size:
        raise CommandError(f"{present} articles are not whole batches of {BATCH}: not a killed build of this corpus")
    started = time.perf_counter()
    model_id = embedders.spec_for(tenant).model_id
    # Background words ~ 1/rank, as in prose: a few are everywhere, most are rare.
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(VOCABULARY)))
    with progress_bar(total=size, desc="articles") as bar:
        for start in range(0, size, BATCH):
            rows = []
            for n in range(start, min(start + BATCH, size)):
                topic, vector = space.article(n)
                own = space.words_of(topic)
                title = f"{' '.join(rng.choices(own, k=rng.randint(2, 4)))} {rng.choice(space.words)} #{n}"
                words = rng.choices(space.words, cum_weights=cumulative, k=rng.randint(30, 70)) + rng.choices(own, k=8)
                rng.shuffle(words)
                body = " ".join(words)
                roll = rng.random()
                rows.append(
                    Article(
                        tenant=tenant,
                        title=title,
                        body=body,
                        category=rng.choice(Article.Category.values),
                        # Mostly shared knowledge; some belongs to other agents; some is still a draft.
                        status="draft" if roll < 0.05 else "published",
                        visibility="owner" if 0.05 <= roll < 0.15 else "shared",
                        owner_subject_id=f"agent-{rng.randint(0, 50)}",
                        embedding=list(vector),
                        embedding_model=model_id,
                        embedding_content_hash=embedders.content_hash(f"{title}\n\n{body}"),
                    )
                )
            if start >= present:
                Article.objects.bulk_create(rows)  # one statement: a batch is committed whole or not at all
            bar.update(len(rows))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE articles")  # the steady state autovacuum keeps in production
    return round(time.perf_counter() - started, 1)


def recall(viewer: Viewer, queries: list[tuple[str, QueryEmbedding]], limit: int) -> dict[str, float]:
    """Share of the exact top-`limit` that the default (HNSW) read returns: by id, and counting equal distances."""
    by_id = by_distance = total = 0
    for query, embedding in queries:
        ann = knowledge_search(viewer=viewer, query=query, mode="semantic", embedding=embedding, limit=limit)
        with override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=10**9):
            exact = knowledge_search(viewer=viewer, query=query, mode="semantic", embedding=embedding, limit=limit)
        if not exact.hits:
            continue
        floor = min(hit.similarity or 0.0 for hit in exact.hits) - 1e-9
        by_id += len({h.article.id for h in exact.hits} & {h.article.id for h in ann.hits})
        by_distance += min(sum((h.similarity or 0.0) >= floor for h in ann.hits), len(exact.hits))
        total += len(exact.hits)
    return {"ids": round(by_id / total, 3), "by_distance": round(by_distance / total, 3)} if total else {}


def http(raw_key: str, queries: list[str], limit: int, *, warm_up: int) -> dict[str, float]:
    """The whole request in-process: auth, rate limit, the query's embedding, search, ledger rows, JSON."""
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    samples: list[float] = []
    for n, query in enumerate(queries):
        started = time.perf_counter()
        response = client.get("/api/v1/knowledge/search", {"q": query, "limit": str(limit)})
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"search failed: {response.status_code} {response.content[:200]!r}")
        if n >= warm_up:
            samples.append(elapsed)
    return percentiles(samples)


def report(summary: dict[str, Any], queries: int) -> str:
    lines = [
        f"knowledge search over {summary['articles']} articles (agent view, limit {summary['limit']}, "
        f"{queries} queries per mode, no embedding timed)",
        f"  semantic lane read: {', '.join(summary['semantic_paths'])}",
    ]
    for mix, by_mode in summary["selector_ms"].items():
        for mode, f in by_mode.items():
            lines.append(f"  {mix:7} {mode:9} p50 {f['p50']} ms, p95 {f['p95']} ms, p99 {f['p99']} ms")
    found = summary["semantic_recall_vs_exact"]
    lines.append(
        f"  semantic lane vs the exact read, top {summary['limit']}: recall {found['ids']} by id, "
        f"{found['by_distance']} counting equally distant rows"
    )
    h = summary["http_combined_typical_ms"]
    lines.append(
        "  HTTP GET /knowledge/search (combined, typical; auth, query embedding and ledger included, in-process): "
        f"p50 {h['p50']} ms, p95 {h['p95']} ms, p99 {h['p99']} ms"
    )
    return "\n".join(lines)
