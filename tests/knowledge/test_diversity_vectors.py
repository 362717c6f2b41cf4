"""The merged recall's diversity vectors, read with the search's rows as pgvector's binary format: the stored float16
values exactly, only for visible articles, and withheld when the article's model is not the query's."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.models import Article
from knowledge.selectors import knowledge_search
from knowledge.vectors import article_vector, with_vectors
from knowledge.visibility import Viewer
from loopmem.embedding import embedders
from tests.factories import ArticleFactory

pytestmark = pytest.mark.django_db


def stored(values: list[float]) -> list[float]:
    """A vector of the hashing model's own size (384) starting with `values`."""
    return [*values, *([0.0] * (embedders.HashingEmbedder.dimensions - len(values)))]


def read(*articles):
    return {row.id: row for row in with_vectors(Article.objects.filter(id__in=[a.id for a in articles]))}


def test_the_vector_comes_back_as_the_float16_values_postgres_stored(tenant):
    values = [0.1, -0.3, 1 / 3, 2.5e-7, 0.0, 1.0]
    article = ArticleFactory.create(tenant=tenant, embedding=stored(values), embedding_model="hashing:v1")
    found = article_vector(read(article)[article.id], model_id="hashing:v1")
    assert isinstance(found.vector, np.ndarray)
    assert found.vector.dtype == np.float64
    expected = np.asarray(stored(values), dtype=np.float16).astype(np.float64)
    assert np.array_equal(found.vector, expected)
    assert found.content_hash == article.embedding_content_hash


def test_another_models_vector_is_withheld_and_a_missing_one_is_none(tenant):
    other = ArticleFactory.create(tenant=tenant, embedding=stored([1.0, 0.0]), embedding_model="openai:other")
    bare = ArticleFactory.create(tenant=tenant)
    rows = read(other, bare)
    assert article_vector(rows[other.id], model_id="hashing:v1").vector is None
    assert article_vector(rows[bare.id], model_id="hashing:v1").vector is None
    assert article_vector(rows[other.id]).vector is not None  # no model asked for: any


@pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])
def test_a_search_asked_for_vectors_returns_them_for_visible_hits_only(tenant, other_tenant):
    mine = ArticleFactory.create(tenant=tenant, title="runbook deploy", embedding=stored([1.0]), embedding_model="m")
    ArticleFactory.create(
        tenant=tenant, title="runbook hidden", visibility="owner", owner_subject_id="someone-else",
        embedding=stored([1.0]), embedding_model="m",
    )  # fmt: skip
    ArticleFactory.create(tenant=other_tenant, title="runbook foreign", embedding=stored([1.0]), embedding_model="m")
    viewer = Viewer(tenant_id=tenant.id, subject_id="reader")
    result = knowledge_search(viewer=viewer, query="runbook", mode="keyword", vectors=True)
    [hit] = result.hits
    assert hit.article.id == mine.id
    found = article_vector(hit.article, model_id="m")
    assert found.vector is not None
    assert found.vector[0] == 1.0
    plain = knowledge_search(viewer=viewer, query="runbook", mode="keyword")
    assert article_vector(plain.hits[0].article).vector is None  # not asked for: not read


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
