"""Factories for the rows tests need. API keys go through the real service so hashing is real."""

from __future__ import annotations

from typing import Any

import factory
from factory.django import DjangoModelFactory

from knowledge.models import Article, article_embedding_text
from loopmem.embedding import embedders
from loopmem.models import Tenant
from projects.models import Project
from projects.repo_url import parse_repo_url


class TenantFactory(DjangoModelFactory[Tenant]):
    class Meta:
        model = Tenant

    name = factory.Sequence(lambda n: f"Tenant {n}")
    slug = factory.Sequence(lambda n: f"tenant-{n}")


class ProjectFactory(DjangoModelFactory[Project]):
    class Meta:
        model = Project

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"Project {n}")
    slug = factory.Sequence(lambda n: f"project-{n}")
    repo_url = ""
    repo_key = factory.LazyAttribute(
        lambda p: (ref.key if (ref := parse_repo_url(p.repo_url)) else "") if p.repo_url else ""
    )


class ArticleFactory(DjangoModelFactory[Article]):
    """A published, shared article; pass `embedding=` (384 dims) with `embedding_model="hashing:v1"` for kNN."""

    class Meta:
        model = Article

    tenant = factory.SubFactory(TenantFactory)
    title = factory.Sequence(lambda n: f"Article {n}")
    body = factory.Sequence(lambda n: f"Body of article {n}.")
    category = "finding"
    status = "published"
    visibility = "shared"
    owner_subject_id = "author"


def embedded_article(tenant: Tenant, title: str, body: str, **fields: Any) -> Article:
    """An article with the vector the worker would store (the hashing test embedder), ready for search."""
    text = article_embedding_text(title, body)
    [vector] = embedders.HashingEmbedder().embed([text])
    defaults: dict[str, Any] = {
        "embedding": vector,
        "embedding_model": "hashing:v1",
        "embedding_content_hash": embedders.content_hash(text),
    }
    article: Article = ArticleFactory.create(tenant=tenant, title=title, body=body, **{**defaults, **fields})
    return article
