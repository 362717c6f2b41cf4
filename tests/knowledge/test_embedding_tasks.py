"""The article embedding task (called as a function) and the backfill sweep."""

from __future__ import annotations

import pytest
from celery.exceptions import Retry

from knowledge import tasks
from knowledge.models import Article
from loopmem.embedding import embedders
from tests.factories import ArticleFactory
from tests.knowledge.conftest import FailingEmbedder

pytestmark = pytest.mark.django_db


class CountingEmbedder:
    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return embedders.HashingEmbedder().embed(texts)


@pytest.fixture
def provider(monkeypatch):
    embedder = CountingEmbedder()
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: embedder)
    return embedder


def settled(article):
    """As if written long enough ago that its own task is no longer expected."""
    Article.objects.filter(id=article.id).update(updated_at=article.updated_at.replace(year=2020))
    return article


def test_the_task_embeds_title_and_body_with_the_model_and_content_hash(tenant, provider):
    article = ArticleFactory.create(tenant=tenant, title="Runbook", body="step one")
    assert tasks.embed_article_task(str(article.id)) == "embedded"
    article.refresh_from_db()
    assert len(article.embedding) == 384  # the model's native size, unpadded
    assert article.embedding_model == "hashing:v1"
    assert article.embedding_content_hash == embedders.content_hash("Runbook\n\nstep one")


def test_the_task_is_idempotent_and_a_deleted_article_is_a_no_op(tenant, provider):
    article = ArticleFactory.create(tenant=tenant)
    tasks.embed_article_task(str(article.id))
    assert tasks.embed_article_task(str(article.id)) == "unchanged"
    Article.objects.filter(id=article.id).delete()
    assert tasks.embed_article_task(str(article.id)) == "missing"
    assert provider.calls == 1


def test_a_permanent_failure_waits_for_the_sweep_and_a_transient_one_retries(tenant, monkeypatch):
    article = ArticleFactory.create(tenant=tenant)
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: FailingEmbedder(embedders.NoEmbeddingKey()))
    assert tasks.embed_article_task(str(article.id)) == "no_embedding_key"
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: FailingEmbedder())
    with pytest.raises(Retry):
        tasks.embed_article_task.apply(args=[str(article.id)], throw=True)


def test_an_edit_while_embedding_is_not_overwritten_by_the_stale_vector(tenant, monkeypatch):
    article = ArticleFactory.create(tenant=tenant, body="before")

    class EditingEmbedder:
        def embed(self, texts):
            Article.objects.filter(id=article.id).update(body="after")  # a PATCH lands meanwhile
            return embedders.HashingEmbedder().embed(texts)

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: EditingEmbedder())
    assert tasks.embed_article_task(str(article.id)) == "missing"
    assert Article.objects.get(id=article.id).embedding is None


def test_the_sweep_embeds_lost_and_stale_model_rows_but_leaves_fresh_ones_to_their_task(tenant, provider):
    lost = settled(ArticleFactory.create(tenant=tenant))
    stale = ArticleFactory.create(tenant=tenant, embedding=[0.5] * 1536, embedding_model="openai:old")
    settled(stale)
    fresh = ArticleFactory.create(tenant=tenant)
    assert tasks.article_embedding_sweep_task() == {"embedded": 2, "failed": 0, "tenants": 1, "failures": {}}
    assert Article.objects.get(id=lost.id).embedding_model == "hashing:v1"
    assert Article.objects.get(id=stale.id).embedding_model == "hashing:v1"
    assert Article.objects.get(id=fresh.id).embedding is None


def test_a_failing_provider_is_reported_by_the_sweep(tenant, monkeypatch):
    settled(ArticleFactory.create(tenant=tenant))
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: FailingEmbedder())
    assert tasks.article_embedding_sweep_task() == {
        "embedded": 0,
        "failed": 1,
        "tenants": 1,
        "failures": {"embedding_timeout": 1},
    }
