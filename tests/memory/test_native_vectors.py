"""Vectors at their model's native size: what is stored, which index answers which read, and that vectors of two
sizes are never compared (loopmem.embedding.vector_index)."""

from __future__ import annotations

import random

import pytest
from django.db import connections

from loopmem.database import router
from loopmem.embedding import embedders
from loopmem.reads import scoped
from loopmem.reads.prepared import PreparedRead
from loopmem.tenancy.scope import Scope
from memory import selectors
from memory.models import Memory
from tests.memory.conftest import embed_pending, heavy_db, remember

pytestmark = heavy_db


def _unit(dimensions: int, rng: random.Random) -> list[float]:
    raw = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


def _rows(tenant, subject: str, model_id: str, dimensions: int, count: int, seed: int = 7) -> list[Memory]:
    rng = random.Random(seed)
    return Memory.objects.bulk_create(
        Memory(
            tenant=tenant,
            subject_id=subject,
            text=f"{model_id} row {n}",
            embedding=_unit(dimensions, rng),
            embedding_model=model_id,
            embedding_content_hash=f"{n}",
        )
        for n in range(count)
    )


@pytest.fixture
def plans(monkeypatch):
    """The EXPLAIN of every distance read recall_by_vector runs; the ANN read forced onto an index."""
    seen: list[str] = []
    configure = scoped.ScopedSession.configure
    fetch = scoped.ScopedSession.fetch

    def index_only(self, options):
        applied = configure(self, options)
        with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute("SELECT set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)")
        return applied

    def explaining(self, queryset):
        if "distance" in queryset.query.annotations:
            seen.append(queryset.using(router.HEAVY_READ_ALIAS).explain())
        return fetch(self, queryset)

    def explaining_prepared(self, session, **values):
        with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute(f"EXPLAIN {self.sql}", self.bind(session, **values))
            seen.append("\n".join(row[0] for row in cursor.fetchall()))
        return run_prepared(self, session, **values)

    run_prepared = PreparedRead.run
    monkeypatch.setattr(scoped.ScopedSession, "configure", index_only)
    monkeypatch.setattr(scoped.ScopedSession, "fetch", explaining)
    monkeypatch.setattr(PreparedRead, "run", explaining_prepared)
    return seen


def test_a_memory_is_stored_at_its_models_native_size(agent):
    remember(agent, "the deploy runs at noon")
    embed_pending()
    memory = Memory.objects.get()
    assert (memory.embedding_model, len(memory.embedding)) == ("hashing:v1", 384)
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT vector_dims(embedding), pg_column_size(embedding) FROM memories")
        dims, size = cursor.fetchone()
    assert dims == 384
    assert size < 384 * 4 + 16  # no padding on disk either (1536 floats would be 6 KB)


@pytest.mark.parametrize(("dimensions", "index"), [(384, "memories_hnsw_384_idx"), (1536, "memories_hnsw_1536_idx")])
def test_the_ann_read_uses_the_partial_index_of_its_size_and_the_exact_read_uses_none(tenant, plans, dimensions, index):
    model_id = f"synthetic:{dimensions}"
    rows = _rows(tenant, "agent-a", model_id, dimensions, 40)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    query = list(rows[0].embedding)
    ann = selectors.recall_by_vector(scope=scope, vector=query, model_id=model_id, k=5, path="ann_only")
    assert index in plans[-1], plans[-1]
    assert "halfvec" in plans[-1]
    exact = selectors.recall_by_vector(scope=scope, vector=query, model_id=model_id, k=5, path="exact")
    assert "hnsw" not in plans[-1], plans[-1]
    # The ANN rows carry the stored vector's distances: the same figures as the exact read's for the same rows.
    assert ann.hits[0].memory.id == exact.hits[0].memory.id == rows[0].id
    assert ann.hits[0].score == pytest.approx(exact.hits[0].score, abs=1e-9)


def test_a_size_without_an_index_is_still_recalled_exactly(tenant, plans):
    rows = _rows(tenant, "agent-a", "synthetic:512", 512, 30)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    result = selectors.recall_by_vector(
        scope=scope, vector=list(rows[3].embedding), model_id="synthetic:512", k=3, path="ann"
    )
    assert result.recall_path == "exact"
    assert result.hits[0].memory.id == rows[3].id
    assert all("hnsw" not in plan for plan in plans)


@pytest.mark.parametrize("path", ["exact", "ann", "ann_only"])
def test_rows_of_two_sizes_in_one_tenant_and_subject_are_never_compared(tenant, path):
    small = _rows(tenant, "agent-a", "shared:model", 384, 12, seed=1)
    _rows(tenant, "agent-a", "shared:model", 768, 12, seed=2)  # the same model id, another size (a changed setting)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    result = selectors.recall_by_vector(
        scope=scope, vector=list(small[0].embedding), model_id="shared:model", k=50, path=path
    )
    assert {hit.memory.id for hit in result.hits} == {row.id for row in small}  # pgvector would raise on a mix


def test_hybrid_distance_skips_rows_of_another_size(tenant, agent):
    _rows(tenant, "agent-a", "hashing:v1", 768, 3)  # a size the query's model does not make
    remember(agent, "deploy pipeline notes")
    embed_pending()
    body = agent.post("/api/v1/memory/recall", {"query": "deploy pipeline", "mode": "hybrid"}, format="json").json()
    assert [hit["memory"]["text"] for hit in body["data"]][:1] == ["deploy pipeline notes"]


def test_the_query_vector_is_native_too(tenant):
    embedding = embedders.embed_query(tenant, "hello")
    assert isinstance(embedding, embedders.QueryEmbedding)
    assert len(embedding.vector) == 384
