"""The merged recall's diversity vectors, carried by the search's own rows as pgvector's binary format: the stored
float32 values exactly, only for articles the search could return, and withheld when the article's model is not the
query's."""

from __future__ import annotations

import numpy as np

from knowledge.models import Article
from knowledge.selectors import carried_diversity_vectors, knowledge_search
from knowledge.visibility import Viewer
from loopmem import embeddings
from tests.factories import ArticleFactory
from tests.knowledge.conftest import heavy_db

pytestmark = heavy_db

READER = "reader"


def stored(values: list[float]) -> list[float]:
    """A vector of the hashing model's own size (384) starting with `values`."""
    return [*values, *([0.0] * (embeddings.HashingEmbedder.dimensions - len(values)))]


def searched(tenant, query: str = "runbook") -> list[Article]:
    result = knowledge_search(
        viewer=Viewer(tenant_id=tenant.id, subject_id=READER), query=query, mode="keyword", with_vectors=True
    )
    return [hit.article for hit in result.hits]


def test_the_vector_comes_back_as_the_float32_values_postgres_stored(tenant):
    values = [0.1, -0.3, 1 / 3, 2.5e-7, 0.0, 1.0]
    article = ArticleFactory.create(
        tenant=tenant, title="runbook", embedding=stored(values), embedding_model="hashing:v1"
    )
    found = carried_diversity_vectors(searched(tenant))
    vector = found[article.id].vector
    assert isinstance(vector, np.ndarray)
    assert vector.dtype == np.float64
    expected = np.asarray(stored(values), dtype=np.float32).astype(np.float64)
    assert np.array_equal(vector, expected)
    assert found[article.id].content_hash == article.embedding_content_hash


def test_another_models_vector_is_withheld_and_a_missing_one_is_none(tenant):
    other = ArticleFactory.create(
        tenant=tenant, title="runbook one", embedding=stored([1.0, 0.0]), embedding_model="openai:other"
    )
    bare = ArticleFactory.create(tenant=tenant, title="runbook two")
    found = carried_diversity_vectors(searched(tenant), model_id="hashing:v1")
    assert found[other.id].vector is None
    assert found[bare.id].vector is None
    assert carried_diversity_vectors(searched(tenant))[other.id].vector is not None  # no model asked: any vector


def test_an_article_the_viewer_cannot_see_carries_nothing(tenant, other_tenant):
    ArticleFactory.create(
        tenant=tenant, title="runbook", visibility="owner", owner_subject_id="someone-else", embedding=stored([1.0])
    )
    ArticleFactory.create(tenant=other_tenant, title="runbook", embedding=stored([1.0]))
    assert searched(tenant) == []
    assert carried_diversity_vectors(searched(tenant)) == {}


def test_without_vectors_the_search_reads_none(tenant):
    ArticleFactory.create(tenant=tenant, title="runbook", embedding=stored([1.0]), embedding_model="hashing:v1")
    result = knowledge_search(viewer=Viewer(tenant_id=tenant.id, subject_id=READER), query="runbook", mode="keyword")
    assert [hasattr(hit.article, "vector_bytes") for hit in result.hits] == [False]


def test_search_rows_never_load_a_stored_vector_as_text(tenant):
    """Vectors travel as `vector_bytes` only when asked; the columns themselves (a reembed's pending one too) are never
    loaded: pgvector's field parses their text one float at a time."""
    ArticleFactory.create(
        tenant=tenant, title="runbook", embedding=stored([1.0]), pending_embedding=stored([0.5]), embedding_model="x"
    )
    [article] = searched(tenant)
    assert {"embedding", "pending_embedding", "search_vector", "body"} <= article.get_deferred_fields()
