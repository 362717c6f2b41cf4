"""Factories for the rows tests need. API keys go through the real service so hashing is real."""

from __future__ import annotations

import math
import random
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


def jittered(vector: list[float], *, seed: int) -> list[float]:
    """`vector` moved a little off itself (a cosine distance near 0.02), the same way for the same seed.

    Rows meant to crowd a query must be distinct points: HNSW's neighbour heuristic keeps one of a set of equal
    points, so identical copies make a poor graph whose walks run through the other rows instead, and a crowding
    built from them comes and goes with the index's random levels."""
    noise = random.Random(seed)
    moved = [value + noise.gauss(0, 0.01) for value in vector]
    norm = math.sqrt(sum(value * value for value in moved))
    return [value / norm for value in moved]
