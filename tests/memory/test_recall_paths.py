"""Which read answers a recall, and what meta says about it (DESIGN §5)."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import override_settings

from loopmem.database import router
from loopmem.embedding import embedders
from loopmem.reads import scoped, size_cache
from loopmem.reads.hnsw_options import ITERATIVE_SCAN_UNAVAILABLE_REASON
from loopmem.tenancy.scope import Scope
from memory import selectors
from memory.models import Memory
from tests.factories import jittered
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

pytestmark = heavy_db


@pytest.fixture
def twenty(agent):
    for n in range(20):
        remember(agent, f"fact {n} about topic {n % 4}")
    embed_pending()


def _ids(body):
    return [hit["memory"]["id"] for hit in body["data"]]


@override_settings(RECALL_EXACT_MAX_ROWS=5)
def test_a_large_subject_reads_through_hnsw_with_iterative_scan(agent, twenty):
    body = recall(agent, "topic 1", limit=5)
    assert body["meta"]["recall_path"] == "ann"
    assert body["meta"]["ann_iterative_scan"] == "applied"
    assert "ann_iterative_scan_reason" not in body["meta"]
    # On a corpus this small HNSW finds the same rows as the exact read.
    with override_settings(RECALL_EXACT_MAX_ROWS=1000):
        exact = recall(agent, "topic 1", limit=5)
    assert exact["meta"]["recall_path"] == "exact"
    assert _ids(body) == _ids(exact)


@override_settings(RECALL_EXACT_MAX_ROWS=5)
def test_a_subject_within_the_bound_reads_exactly_however_many_versions_it_keeps(agent, tenant):
    for n in range(5):
        remember(agent, f"fact {n} about topic {n % 4}")
    embed_pending()
    newest = Memory.objects.filter(tenant=tenant, subject_id="agent-a").order_by("-inserted_at").first()
    # Fifteen superseded versions: twenty rows in all, four times the bound, but a default read scans the five live.
    Memory.objects.bulk_create(
        [Memory(tenant=tenant, subject_id="agent-a", text=f"old version {n}", superseded_by=newest) for n in range(15)]
    )
    assert recall(agent, "topic 1", limit=5)["meta"]["recall_path"] == "exact"
    # One more live row passes the bound: the graph reads it.
    remember(agent, "fact 5 about topic 1")
    embed_pending()
    size_cache.clear_all()
    assert recall(agent, "topic 1", limit=5)["meta"]["recall_path"] == "ann"


@override_settings(RECALL_EXACT_MAX_ROWS=5, HNSW_EF_SEARCH=10, HNSW_MAX_SCAN_TUPLES=50)
def test_when_the_ann_read_comes_back_short_the_exact_read_fills_it(agent, tenant, twenty, monkeypatch):
    # Dilution: 1,000 rows of another subject sit nearer the query than any of ours. HNSW with a 50-tuple
    # scan budget then finds too few of ours, and the verified fill must notice and read exactly.
    _foreign_rows(tenant, near_to="fact", count=1000)
    configure = scoped.ScopedSession.configure

    def index_only(self, options):
        # On a small table the planner would prefer an exact scan; only the HNSW index may answer here.
        applied = configure(self, options)
        with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
            for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                cursor.execute("SELECT set_config(%s, 'off', true)", [knob])
        return applied

    monkeypatch.setattr(scoped.ScopedSession, "configure", index_only)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    [query] = embedders.HashingEmbedder().embed(["fact"])
    vector = query
    short = selectors.recall_by_vector(scope=scope, vector=vector, model_id="hashing:v1", k=15, path="ann_only")
    assert len(short.hits) < 15  # the dilution is real: HNSW alone under-fills
    filled = selectors.recall_by_vector(scope=scope, vector=vector, model_id="hashing:v1", k=15, path="ann")
    assert (len(filled.hits), filled.underfilled, filled.recall_path) == (15, False, "exact")


def test_the_reference_post_filter_mode_reports_iterative_scan_off(agent, agent_key, tenant, twenty):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    vector = list(Memory.objects.first().embedding)  # type: ignore[union-attr]
    result = selectors.recall_by_vector(scope=scope, vector=vector, model_id="hashing:v1", k=3, path="ann_post_filter")
    assert (result.recall_path, result.ann_iterative_scan) == ("ann", "off")


@override_settings(RECALL_EXACT_MAX_ROWS=5)
def test_iterative_scan_unavailable_is_reported_and_degrades_the_outcome(agent, twenty, monkeypatch):
    monkeypatch.setattr("loopmem.reads.hnsw_options.pgvector_supports_iterative_scan", lambda: False)
    meta = recall(agent, "topic", limit=3)["meta"]
    assert meta["ann_iterative_scan"] == "unavailable"
    assert meta["ann_iterative_scan_reason"] == ITERATIVE_SCAN_UNAVAILABLE_REASON
    assert meta["outcome"] == "degraded"


@pytest.mark.parametrize(
    ("k", "with_project", "pool"),
    [(10, False, 100), (20, False, 100), (20, True, 200), (50, False, 250), (50, True, 500), (100, False, 500)],
)
def test_pool_size_follows_the_reference_table(k, with_project, pool):
    assert selectors.pool_size(k, with_project=with_project) == pool


@pytest.mark.parametrize("include_superseded", [False, True])
def test_the_two_step_exact_read_answers_what_the_one_statement_read_does(
    agent, tenant, twenty, monkeypatch, include_superseded
):
    # Another subject's rows nearer the query than any of ours: the inner read must stay inside the scope.
    _foreign_rows(tenant, near_to="fact 1 about topic 1", count=30)
    [vector] = embedders.HashingEmbedder().embed(["topic 1"])
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")

    def read(two_step_from: int) -> list[tuple[str, float]]:
        monkeypatch.setattr(selectors, "EXACT_TWO_STEP_MIN_ROWS", two_step_from)
        result = selectors.recall_by_vector(
            scope=scope, vector=vector, model_id="hashing:v1", k=7, include_superseded=include_superseded
        )
        assert result.recall_path == "exact"
        return [(str(hit.memory.id), round(hit.score or 0.0, 6)) for hit in result.hits]

    one_statement, two_steps = read(two_step_from=10**9), read(two_step_from=0)
    assert two_steps == one_statement
    assert len(two_steps) == 7
    foreign = {str(memory_id) for memory_id in Memory.objects.filter(subject_id="agent-z").values_list("id", flat=True)}
    assert foreign.isdisjoint(memory_id for memory_id, _ in two_steps)


def _foreign_rows(tenant, *, near_to: str, count: int) -> None:
    """`count` rows of another subject (agent-z), each embedded near `near_to`: nearer the query than ours."""
    [near] = embedders.HashingEmbedder().embed([near_to])
    Memory.objects.bulk_create(
        Memory(tenant=tenant, subject_id="agent-z", text="fact", embedding=jittered(near, seed=n),
               embedding_model="hashing:v1", embedding_content_hash="x")
        for n in range(count)
    )  # fmt: skip
