"""Which read answers the semantic lane, what meta says about it, and the selector the merged recall calls."""

from __future__ import annotations

import uuid

import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from knowledge.models import Article
from knowledge.selectors import knowledge_search
from knowledge.visibility import Viewer
from loopmem.database import router
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.reads import scoped
from loopmem.reads.hnsw_options import ITERATIVE_SCAN_UNAVAILABLE_REASON
from tests.conftest import error
from tests.factories import ArticleFactory, jittered
from tests.knowledge.conftest import MODEL, FailingEmbedder, hashed, heavy_db, search

pytestmark = heavy_db


@pytest.fixture
def viewer(tenant):
    return Viewer(tenant_id=tenant.id, subject_id="agent-a")


@pytest.fixture
def twenty(tenant):
    for n in range(20):
        text = f"fact {n} about topic {n % 4}"
        ArticleFactory.create(
            tenant=tenant, title=text, body=text, embedding=hashed(f"{text}\n\n{text}"), embedding_model=MODEL
        )


def _ids(body):
    return [hit["id"] for hit in body["data"]]


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5)
def test_a_large_visible_set_reads_through_hnsw_with_iterative_scan(agent, twenty):
    body = search(agent, "topic 1", mode="semantic", limit=5)
    assert (body["meta"]["semantic_path"], body["meta"]["ann_iterative_scan"]) == ("ann", "applied")
    assert "ann_iterative_scan_reason" not in body["meta"]
    with override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=1000):
        exact = search(agent, "topic 1", mode="semantic", limit=5)
    assert exact["meta"]["semantic_path"] == "exact"
    assert _ids(body) == _ids(exact)  # on a corpus this small HNSW finds the same rows


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5, HNSW_EF_SEARCH=100)
def test_the_ann_read_is_answered_by_the_hnsw_index_not_a_scan_and_sort(viewer, twenty, monkeypatch):
    # At ef_search 100 the planner would rather sort every visible row by distance (it does not count the
    # TOAST fetch of each vector); the ANN read must make the index answer, or meta would lie about the path.
    plans: list[str] = []
    fetch = scoped.TenantScopedSession.fetch

    def explaining_fetch(self, queryset):
        if "distance" in queryset.query.annotations and not plans:
            plans.append(queryset.using(router.HEAVY_READ_ALIAS).explain())
        return fetch(self, queryset)

    monkeypatch.setattr(scoped.TenantScopedSession, "fetch", explaining_fetch)
    result = knowledge_search(
        viewer=viewer, query="topic", mode="semantic", embedding=QueryEmbedding(hashed("topic 1"), MODEL)
    )
    assert result.semantic_path == "ann"
    assert "articles_hnsw_384_idx" in plans[0]


@override_settings(
    KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5, KNOWLEDGE_SEARCH_POOL=15, HNSW_EF_SEARCH=10, HNSW_MAX_SCAN_TUPLES=50
)
def test_when_the_ann_read_comes_back_short_the_exact_read_fills_it(tenant, viewer, twenty, monkeypatch):
    # Dilution: 400 articles the viewer may not see sit nearer the query than any it may. HNSW with a
    # 50-tuple scan budget then finds too few visible ones, and the verified fill must notice.
    near = hashed("fact")
    Article.objects.bulk_create(
        Article(tenant=tenant, title=f"hidden {n}", body="fact", category="finding", status="published",
                visibility="owner", owner_subject_id="agent-z", embedding=jittered(near, seed=n),
                embedding_model=MODEL)
        for n in range(400)
    )  # fmt: skip
    configure, fetch = scoped.TenantScopedSession.configure, scoped.TenantScopedSession.fetch
    reads: list[tuple[bool, int]] = []  # (after configure, rows) per fetch

    def index_only(self, options):
        # On a small table the planner would prefer an exact scan; only the HNSW index may answer here.
        applied = configure(self, options)
        with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
            for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                cursor.execute("SELECT set_config(%s, 'off', true)", [knob])
        reads.append((True, -1))
        return applied

    def counting_fetch(self, queryset):
        rows = fetch(self, queryset)
        reads.append((False, len(rows)))
        return rows

    monkeypatch.setattr(scoped.TenantScopedSession, "configure", index_only)
    monkeypatch.setattr(scoped.TenantScopedSession, "fetch", counting_fetch)
    result = knowledge_search(
        viewer=viewer, query="fact", mode="semantic", embedding=QueryEmbedding(near, MODEL), limit=15
    )
    ann_rows = reads[reads.index((True, -1)) + 1][1]
    assert ann_rows < 15  # the dilution is real: HNSW alone under-fills
    assert (len(result.hits), result.semantic_path) == (15, "exact")
    assert all(not hit.article.title.startswith("hidden") for hit in result.hits)


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5)
def test_iterative_scan_unavailable_is_reported_and_degrades_the_outcome(agent, twenty, monkeypatch):
    monkeypatch.setattr("loopmem.reads.hnsw_options.pgvector_supports_iterative_scan", lambda: False)
    meta = search(agent, "topic", mode="combined", limit=3)["meta"]
    assert (meta["ann_iterative_scan"], meta["ann_iterative_scan_reason"]) == (
        "unavailable",
        ITERATIVE_SCAN_UNAVAILABLE_REASON,
    )
    assert meta["outcome"] == "degraded"


@override_settings(KNOWLEDGE_SEARCH_POOL=3)
def test_a_lane_that_fills_its_pool_says_so(agent, twenty):
    meta = search(agent, "topic", mode="keyword", limit=2)["meta"]
    assert (meta["total_count"], meta["pool_capped"]) == (3, True)


@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_over_the_in_flight_cap_search_is_429(agent):
    body = search(agent, "x", expect=429)
    assert body == error(
        429,
        "heavy_read_overloaded",
        "Too many heavy reads are in flight for this tenant; retry shortly",
        {"in_flight_limit": 0},
    )


# --- knowledge_search: what the merged recall calls --------------------------------------------------------


def test_a_precomputed_vector_is_used_as_is_without_a_provider_call(viewer, twenty, monkeypatch):
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: FailingEmbedder())
    recall_id = uuid.uuid4()
    result = knowledge_search(
        viewer=viewer,
        query="topic 2",
        embedding=QueryEmbedding(hashed("topic 2"), MODEL),
        limit=3,
        search_id=recall_id,
    )
    assert (result.search_mode, result.fallback, result.search_id) == ("combined", False, recall_id)
    for hit in result.hits:
        # The fused score, plus each lane's raw figure and rank for the caller's own scoring.
        assert hit.similarity is not None
        assert 0.0 < hit.similarity <= 1.0
        assert hit.relevance is not None
        assert hit.relevance > 0.0
        assert hit.keyword_rank is not None
        assert hit.semantic_rank is not None
        assert hit.score == pytest.approx(1 / (60 + hit.keyword_rank) + 1 / (60 + hit.semantic_rank))
    assert result.lane_counts == {"keyword": 5, "semantic": 20}


def test_the_callers_embedding_failure_degrades_to_keyword_with_its_tag(viewer, twenty):
    result = knowledge_search(viewer=viewer, query="topic 2", embedding=embedders.NoEmbeddingKey(), limit=3)
    assert (result.search_mode, result.fallback, result.fallback_reason) == ("keyword_only", True, "no_embedding_key")
    assert all(hit.similarity is None and hit.relevance is not None for hit in result.hits)
    assert [hit.score for hit in result.hits] == [hit.relevance for hit in result.hits]


def test_drafts_can_be_asked_for_by_status(tenant):
    curator = Viewer(tenant_id=tenant.id, subject_id="curator", sees_all=True)
    ArticleFactory.create(tenant=tenant, title="Draft deploy", body="deploy", status="draft")
    assert knowledge_search(viewer=curator, query="deploy", mode="keyword").hits == []
    found = knowledge_search(viewer=curator, query="deploy", mode="keyword", status="draft")
    assert [hit.article.title for hit in found.hits] == ["Draft deploy"]


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5)
def test_the_count_that_picks_the_read_is_reused_and_a_stale_one_loses_no_row(tenant, viewer, twenty):
    embedding = QueryEmbedding(hashed("topic 1"), MODEL)

    def searched() -> tuple[list[uuid.UUID], list[str]]:
        with CaptureQueriesContext(connections[router.HEAVY_READ_ALIAS]) as queries:
            result = knowledge_search(viewer=viewer, query="topic", mode="semantic", embedding=embedding, limit=5)
        return [hit.article.id for hit in result.hits], [q["sql"] for q in queries.captured_queries]

    first, first_sql = searched()
    again, again_sql = searched()
    assert any("COUNT(*)" in sql for sql in first_sql)
    assert not any("COUNT(*)" in sql for sql in again_sql)  # the size came from the per-process cache
    assert again == first
    # The cached size says "large" (ANN) though all but two articles are gone: the verified read still answers
    # exactly what exists.
    Article.objects.filter(tenant=tenant).exclude(id__in=first[:2]).delete()
    left, _ = searched()
    assert sorted(left) == sorted(first[:2])


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5)
def test_agents_share_one_count_of_the_tenants_shared_articles_when_it_alone_picks_the_index(tenant, twenty):
    embedding = QueryEmbedding(hashed("topic 1"), MODEL)

    def counts_of(subject: str) -> tuple[str | None, int]:
        viewer = Viewer(tenant_id=tenant.id, subject_id=subject)
        with CaptureQueriesContext(connections[router.HEAVY_READ_ALIAS]) as queries:
            result = knowledge_search(viewer=viewer, query="topic", mode="semantic", embedding=embedding, limit=5)
        return result.semantic_path, sum("COUNT(*)" in q["sql"] for q in queries.captured_queries)

    assert counts_of("agent-a") == ("ann", 1)  # the 20 shared articles, counted once
    assert counts_of("agent-b") == ("ann", 0)  # another agent: the same count, from the cache


@override_settings(KNOWLEDGE_SEARCH_EXACT_MAX_ROWS=5)
def test_an_agent_whose_own_articles_make_the_set_large_still_reads_through_the_index(tenant):
    for n in range(2):
        ArticleFactory.create(
            tenant=tenant, title=f"shared {n}", body="x", embedding=hashed(f"s{n}"), embedding_model=MODEL
        )
    for n in range(6):
        ArticleFactory.create(
            tenant=tenant, title=f"mine {n}", body="x", visibility="private", owner_subject_id="agent-a",
            embedding=hashed(f"m{n}"), embedding_model=MODEL,
        )  # fmt: skip
    embedding = QueryEmbedding(hashed("m1"), MODEL)
    owner = Viewer(tenant_id=tenant.id, subject_id="agent-a")
    other = Viewer(tenant_id=tenant.id, subject_id="agent-b")
    mine = knowledge_search(viewer=owner, query="x", mode="semantic", embedding=embedding, limit=8)
    theirs = knowledge_search(viewer=other, query="x", mode="semantic", embedding=embedding, limit=8)
    assert (mine.semantic_path, len(mine.hits)) == ("ann", 8)  # 2 shared below the threshold, 8 reachable above
    assert (theirs.semantic_path, {hit.article.title for hit in theirs.hits}) == ("exact", {"shared 0", "shared 1"})
