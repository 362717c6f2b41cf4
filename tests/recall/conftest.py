"""Merged-recall helpers: published articles embedded as the worker would, and the recall call itself."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from knowledge.models import Article, article_embedding_text
from loopmem import embeddings
from tests.factories import ArticleFactory

heavy_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


def article(tenant: Any, title: str, body: str, **fields: Any) -> Article:
    text = article_embedding_text(title, body)
    [vector] = embeddings.HashingEmbedder().embed([text])
    defaults: dict[str, Any] = {
        "embedding": embeddings.pad(vector, settings.EMBEDDING_DIMENSIONS),
        "embedding_model": "hashing:v1",
        "embedding_content_hash": embeddings.content_hash(text),
    }
    return ArticleFactory.create(tenant=tenant, title=title, body=body, **{**defaults, **fields})


def recall(client: Any, query: str, expect: int = 200, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/recall", {"query": query, **fields}, format="json")
    assert response.status_code == expect, response.json()
    body: dict[str, Any] = response.json()
    return body
