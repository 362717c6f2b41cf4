"""Knowledge reads: list, get, hybrid search (keyword, semantic, reciprocal-rank fused), and gate neighbours.

Every read starts from `Article.objects.visible_to(viewer)`. Search and kNN run on the heavy-read alias
through the tenant-scoped guarded session.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import ExpressionWrapper, F, FloatField, QuerySet, Value

from knowledge import ordering
from knowledge.diversity import DiversityConfig
from knowledge.hits import SearchHit, SearchResult
from knowledge.models import SEARCH_CONFIG, Article, ArticleQuerySet
from knowledge.vectors import with_vectors
from knowledge.visibility import Viewer
from loopmem.embedding import embedders, vector_index
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.errors import EmbeddingUnavailable, NotFound
from loopmem.models import Tenant
from loopmem.params import clamp, path_id
from loopmem.reads import hnsw_options, scoped
from loopmem.reads.size_cache import visible_article_counts

SearchMode = Literal["keyword", "semantic", "combined"]
SEARCH_MODES: tuple[SearchMode, ...] = ("keyword", "semantic", "combined")
DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 50


# --- list and get --------------------------------------------------------------------------------------


def article_list(
    *,
    viewer: Viewer,
    status: str | None = None,
    category: str | None = None,
    tags: Sequence[str] = (),
    project_id: uuid.UUID | None = None,
) -> ArticleQuerySet:
    """The articles the viewer may see, newest first, as summaries. `project_id` is an exact filter here."""
    rows = Article.objects.visible_to(viewer)
    if status:
        rows = rows.filter(status=status)
    if category:
        rows = rows.filter(category=category)
    if tags:
        rows = rows.filter(tags__contains=list(tags))
    if project_id is not None:
        rows = rows.filter(project_id=project_id)
    return rows.summaries().newest_first()


def article_get(*, viewer: Viewer, article_id: str) -> Article:
    """One visible article with its body; a hidden, missing or malformed id is the same 404."""
    parsed = path_id(article_id)
    article = Article.objects.visible_to(viewer).defer("embedding", "search_vector").filter(id=parsed).first()
    if article is None:
        raise NotFound()
    return article


def article_visible_ids(*, viewer: Viewer, article_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of `article_ids` the viewer may see (cross-link validation strips the others)."""
    if not article_ids:
        return set()
    return set(Article.objects.visible_to(viewer).filter(id__in=list(article_ids)).values_list("id", flat=True))


# --- search --------------------------------------------------------------------------------------------


def search_pool(*, limit: int, offset: int) -> int:
    """How many candidates each lane ranks: enough for the page, at least the fusion pool, at most the cap."""
    return min(max(offset + limit, settings.KNOWLEDGE_SEARCH_POOL), settings.KNOWLEDGE_SEARCH_MAX_POOL)


def knowledge_search(
    *,
    viewer: Viewer,
    query: str,
    mode: SearchMode = "combined",
    embedding: QueryEmbedding | embedders.EmbeddingFailure | None = None,
    project_id: uuid.UUID | None = None,
    category: str | None = None,
    tags: Sequence[str] = (),
    limit: int = DEFAULT_SEARCH_LIMIT,
    offset: int = 0,
    status: str = Article.Status.PUBLISHED,
    search_id: uuid.UUID | None = None,
    vectors: bool = False,
    diversity: DiversityConfig | None = None,
) -> SearchResult:
    """Search the articles the viewer may see: keyword (full text), semantic (kNN) or both fused by RRF.

    `embedding` is the caller's attempt at embedding `query`: a vector (computed once, shared with the
    memory half of a merged recall), the failure it raised, or None to embed here when a mode needs it.
    Without an embedding `semantic` raises EmbeddingUnavailable (503) and `combined` degrades to the
    keyword lane with `fallback` and the failure's reason tag. `project_id` reads the global articles plus
    that project's. `vectors` reads each hit's stored vector with it (`knowledge.vectors.article_vector`).

    The ranked list is ordered for the caller (knowledge.ordering): a curated winner is pinned first, and with
    `diversity` the selector reorders the pool before the page is cut. Raises HeavyReadOverloaded when the
    tenant's heavy reads are saturated.
    """
    limit = clamp(limit, 1, MAX_SEARCH_LIMIT)
    offset = max(offset, 0)
    pool = search_pool(limit=limit, offset=offset)
    result = SearchResult(
        hits=[], total_count=0, limit=limit, offset=offset, search_id=search_id or uuid.uuid4(), search_mode=mode
    )
    query_embedding: QueryEmbedding | None = None
    if mode != "keyword":
        if embedding is None:
            embedding = _try_embed(viewer, query)
        if isinstance(embedding, embedders.EmbeddingFailure):
            if mode == "semantic":
                raise EmbeddingUnavailable(details={"reason": embedding.tag})
            result.search_mode, result.fallback, result.fallback_reason = "keyword_only", True, embedding.tag
        else:
            query_embedding = embedding

    candidates = _search_candidates(
        Article.objects.visible_to(viewer), project_id=project_id, category=category, tags=tags, status=status
    )
    keyword_rows: list[Article] = []
    semantic_rows: list[Article] = []
    with scoped.tenant_scoped_session(tenant_id=viewer.tenant_id) as session:
        if mode != "semantic":
            keyword = _keyword(candidates, query, pool)
            keyword_rows = session.fetch(with_vectors(keyword) if vectors else keyword)
            result.lane_counts["keyword"] = len(keyword_rows)
        if query_embedding is not None:
            # What the candidates are, for the cached count that picks the read (the viewer is frozen).
            filters = (project_id, category, tuple(tags), status)
            floor = None
            if not viewer.sees_all:
                # An agent's candidates include the tenant's shared ones: counted once for every agent, not per agent.
                shared = Article.objects.shared_with_every_agent(viewer.tenant_id)
                floor = Floor(
                    _search_candidates(shared, project_id=project_id, category=category, tags=tags, status=status),
                    reach=("search-shared", viewer.tenant_id, *filters),
                )
            read = _nearest(
                session,
                candidates,
                query_embedding,
                pool,
                reach=("search", viewer, *filters),
                floor=floor,
                vectors=vectors,
            )
            semantic_rows = read.rows
            result.lane_counts["semantic"] = len(semantic_rows)
            result.semantic_path = read.path
            if read.applied is not None:
                result.ann_iterative_scan = read.applied.iterative_scan
                result.ann_iterative_scan_reason = read.applied.iterative_scan_reason

        ranked = _rank(keyword_rows, semantic_rows, fused=mode == "combined" and query_embedding is not None)
        found = ordering.curated(ranked)
        ranked = ordering.pinned_first(ranked, found.article_id)
        if diversity is not None and diversity.enabled and not vectors:
            # Only the selector's window is compared: its vectors, not every pooled row's (up to 500 per lane).
            _read_vectors(session, viewer, ranked[: diversity.pool_size(limit)])

    result.provenance, result.confidence = found.provenance, found.confidence
    result.curated_article_id = found.article_id
    if diversity is not None:
        model_id = None
        if diversity.enabled:
            model_id = query_embedding.model_id if query_embedding is not None else _model_id(viewer)
        ranked, result.diversity = ordering.diversified(
            ranked, limit=limit, config=diversity, pinned_id=found.article_id, model_id=model_id
        )
    result.total_count = len(ranked)
    result.pool_capped = any(count >= pool for count in result.lane_counts.values())
    result.hits = ranked[offset : offset + limit]
    return result


def _read_vectors(session: scoped.TenantScopedSession, viewer: Viewer, hits: Sequence[SearchHit]) -> None:
    """Give each hit's article its stored vector (`vector_bytes`, as `with_vectors` does), in one read by id."""
    if not hits:
        return
    rows = Article.objects.visible_to(viewer).filter(id__in=[hit.article.id for hit in hits]).only("id")
    found = {row.id: row.vector_bytes for row in session.fetch(with_vectors(rows))}  # type: ignore[attr-defined]
    for hit in hits:
        hit.article.vector_bytes = found.get(hit.article.id)  # type: ignore[attr-defined]


def _model_id(viewer: Viewer) -> str:
    """The model the tenant embeds with now: only its vectors are compared when the query has none."""
    return embedders.spec_for(Tenant.objects.get(id=viewer.tenant_id)).model_id


def _try_embed(viewer: Viewer, query: str) -> QueryEmbedding | embedders.EmbeddingFailure:
    return embedders.embed_query(Tenant.objects.get(id=viewer.tenant_id), query)


def _search_candidates(
    rows: ArticleQuerySet, *, project_id: uuid.UUID | None, category: str | None, tags: Sequence[str], status: str
) -> ArticleQuerySet:
    rows = rows.filter(status=status).in_partition(project_id)
    if category:
        rows = rows.filter(category=category)
    if tags:
        rows = rows.filter(tags__contains=list(tags))
    return rows.summaries()


def _keyword(candidates: ArticleQuerySet, query: str, pool: int) -> QuerySet[Article]:
    # websearch syntax: quoted phrases, OR, -exclusions; a query of stop words alone matches nothing.
    tsquery = SearchQuery(query, search_type="websearch", config=SEARCH_CONFIG)
    return (
        candidates.filter(search_vector=tsquery)
        .annotate(relevance=SearchRank(F("search_vector"), tsquery))
        .order_by("-relevance", "id")[:pool]
    )


def _rank(keyword_rows: list[Article], semantic_rows: list[Article], *, fused: bool) -> list[SearchHit]:
    """One lane keeps its own order and score; two are fused: score = Σ 1 / (rrf_k + rank), ties by id."""
    hits: dict[uuid.UUID, SearchHit] = {}
    rrf_k = settings.KNOWLEDGE_RRF_K
    for rank, article in enumerate(keyword_rows, start=1):
        relevance = float(article.relevance)  # type: ignore[attr-defined]  # annotated by _keyword
        hit = hits.setdefault(article.id, SearchHit(article=article, score=0.0))
        hit.relevance, hit.keyword_rank = relevance, rank
        hit.score += 1.0 / (rrf_k + rank) if fused else relevance
    for rank, article in enumerate(semantic_rows, start=1):
        similarity = max(0.0, 1.0 - float(article.distance))  # type: ignore[attr-defined]  # annotated by _nearest
        hit = hits.setdefault(article.id, SearchHit(article=article, score=0.0))
        hit.similarity, hit.semantic_rank = similarity, rank
        hit.score += 1.0 / (rrf_k + rank) if fused else similarity
    if not fused:
        return list(hits.values())  # already in the lane's order
    return sorted(hits.values(), key=lambda h: (-h.score, str(h.article.id)))


# --- nearest neighbours (the semantic lane and the novelty gate) ------------------------------------------


@dataclass
class NearestRead:
    rows: list[Article]  # each annotated with `distance`, nearest first
    path: str  # exact | ann
    applied: hnsw_options.AppliedOptions | None = None  # None on the exact path: no index ran


@dataclass(frozen=True)
class Floor:
    """A subset of the candidates that many viewers share (an agent's candidates include the tenant's shared
    articles), and what identifies it for the cached count: when it alone is past the exact read's threshold, so
    are the candidates, and no count of the viewer's own is needed."""

    candidates: ArticleQuerySet
    reach: tuple[Hashable, ...]


def _nearest(
    session: scoped.TenantScopedSession,
    candidates: ArticleQuerySet,
    embedding: QueryEmbedding,
    k: int,
    *,
    reach: tuple[Hashable, ...],
    floor: Floor | None = None,
    vectors: bool = False,
) -> NearestRead:
    """The k visible candidates nearest to the vector, complete for every visible-set size.

    Up to KNOWLEDGE_SEARCH_EXACT_MAX_ROWS embedded candidates are read exactly (a bounded count decides, cached
    per process under `reach`: what identifies the candidates; or the `floor`'s count, when that is already past).
    Above that, HNSW with every filter (tenant, visibility, status, partition, category, tags) inside a
    relaxed iterative scan, re-sorted by distance, and verified: a short answer is re-read exactly.
    """
    embedded = candidates.embedded_with(embedding.model_id, len(embedding.vector))
    threshold = settings.KNOWLEDGE_SEARCH_EXACT_MAX_ROWS

    def fetch(rows: QuerySet[Article]) -> list[Article]:
        return session.fetch(with_vectors(rows) if vectors else rows)

    if not vector_index.is_indexed(len(embedding.vector)):
        # No index of this size: the exact read is the only one (complete; slower on a large visible set).
        return NearestRead(rows=fetch(_exact(embedded, embedding.vector, k)), path="exact")
    size_key = (embedding.model_id, len(embedding.vector), threshold)
    past_the_floor = False
    if floor is not None:
        shared = floor.candidates.embedded_with(embedding.model_id, len(embedding.vector))
        past_the_floor = _reachable(session, shared, (*floor.reach, *size_key), threshold) > threshold
    if not past_the_floor and _reachable(session, embedded, (*reach, *size_key), threshold) <= threshold:
        return NearestRead(rows=fetch(_exact(embedded, embedding.vector, k)), path="exact")
    applied = session.configure(
        hnsw_options.ReadOptions(
            ef_search=settings.HNSW_EF_SEARCH,
            iterative_scan=True,
            max_scan_tuples=settings.HNSW_MAX_SCAN_TUPLES,
            index_order=True,
        )
    )
    # Ordered by the index's cast; distances (and the re-sort) on the stored vector, as the exact read's.
    ann = embedded.annotate(distance=vector_index.exact_distance(embedding.vector)).order_by(
        vector_index.ann_distance(embedding.vector)
    )[:k]
    rows = sorted(fetch(ann), key=lambda a: (a.distance, str(a.id)))  # type: ignore[attr-defined]
    if len(rows) < k:
        exact_rows = fetch(_exact(embedded, embedding.vector, k))
        if len(exact_rows) > len(rows):
            return NearestRead(rows=exact_rows, path="exact")
    return NearestRead(rows=rows, path="ann", applied=applied)


def _reachable(
    session: scoped.TenantScopedSession, embedded: ArticleQuerySet, key: tuple[Hashable, ...], threshold: int
) -> int:
    """How many embedded candidates there are, counted up to threshold + 1, from a count at most SIZE_TTL_SECONDS
    old: either read is complete whatever the count, so a stale one costs at most speed, never a row."""
    size = visible_article_counts.get(key)
    if size is None:
        size = session.count(embedded.values("id")[: threshold + 1])
        visible_article_counts.put(key, size)
    return size


def _exact(candidates: ArticleQuerySet, vector: list[float], k: int) -> QuerySet[Article]:
    # "+ 0" makes the sort key an expression the HNSW index cannot serve: this read is exact by construction.
    distance = ExpressionWrapper(vector_index.exact_distance(vector) + Value(0.0), output_field=FloatField())
    return candidates.annotate(distance=distance).order_by("distance", "id")[:k]


@dataclass(frozen=True)
class Neighbour:
    article_id: uuid.UUID
    similarity: float  # 1 - cosine distance


def article_neighbours(*, viewer: Viewer, embedding: QueryEmbedding, k: int) -> list[Neighbour]:
    """The novelty gate's read: the k active articles nearest to `embedding` among those the viewer sees."""
    candidates = Article.objects.visible_to(viewer).active().only("id")
    with scoped.tenant_scoped_session(tenant_id=viewer.tenant_id) as session:
        read = _nearest(session, candidates, embedding, k, reach=("active", viewer))
    return [Neighbour(article_id=a.id, similarity=1.0 - float(a.distance)) for a in read.rows]  # type: ignore[attr-defined]
