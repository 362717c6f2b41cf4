"""The merged recall's diversity vectors, read as pgvector's binary format: the stored float32 values exactly, only
for visible articles, and withheld when the article's model is not the query's."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.selectors import article_diversity_vectors, knowledge_search
from knowledge.visibility import Viewer
from loopmem import embeddings
from tests.factories import ArticleFactory

pytestmark = pytest.mark.django_db


def stored(values: list[float]) -> list[float]:
    """A vector of the hashing model's own size (384) starting with `values`."""
    return [*values, *([0.0] * (embeddings.HashingEmbedder.dimensions - len(values)))]


def test_the_vector_comes_back_as_the_float32_values_postgres_stored(tenant):
    values = [0.1, -0.3, 1 / 3, 2.5e-7, 0.0, 1.0]
    article = ArticleFactory.create(tenant=tenant, embedding=stored(values), embedding_model="hashing:v1")
    found = article_diversity_vectors(viewer=Viewer(tenant_id=tenant.id, subject_id="reader"), article_ids=[article.id])
    vector = found[article.id].vector
    assert isinstance(vector, np.ndarray)
    assert vector.dtype == np.float64
    expected = np.asarray(stored(values), dtype=np.float32).astype(np.float64)
    assert np.array_equal(vector, expected)


def test_another_models_vector_is_withheld_and_a_missing_one_is_none(tenant):
    other = ArticleFactory.create(tenant=tenant, embedding=stored([1.0, 0.0]), embedding_model="openai:other")
    bare = ArticleFactory.create(tenant=tenant)
    found = article_diversity_vectors(
        viewer=Viewer(tenant_id=tenant.id, subject_id="reader"), article_ids=[other.id, bare.id], model_id="hashing:v1"
    )
    assert found[other.id].vector is None
    assert found[bare.id].vector is None


def test_an_article_the_viewer_cannot_see_is_not_returned(tenant, other_tenant):
    hidden = ArticleFactory.create(
        tenant=tenant, visibility="owner", owner_subject_id="someone-else", embedding=stored([1.0])
    )
    foreign = ArticleFactory.create(tenant=other_tenant, embedding=stored([1.0]))
    found = article_diversity_vectors(
        viewer=Viewer(tenant_id=tenant.id, subject_id="reader"), article_ids=[hidden.id, foreign.id]
    )
    assert found == {}


@pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])
def test_search_rows_never_load_a_stored_vector(tenant):
    """Search and merged-recall rows are summaries: the vectors (a reembed's pending one too) stay in the database,
    where pgvector's field would parse their text one float at a time."""
    ArticleFactory.create(
        tenant=tenant, title="runbook", embedding=stored([1.0]), pending_embedding=stored([0.5]), embedding_model="x"
    )
    result = knowledge_search(viewer=Viewer(tenant_id=tenant.id, subject_id="reader"), query="runbook", mode="keyword")
    [hit] = result.hits
    assert {"embedding", "pending_embedding", "search_vector", "body"} <= hit.article.get_deferred_fields()
