"""Merged-recall helpers: published articles embedded as the worker would, and the recall call itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import embedded_article

heavy_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


article = embedded_article


def recall(client: Any, query: str, expect: int = 200, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/recall", {"query": query, **fields}, format="json")
    assert response.status_code == expect, response.json()
    body: dict[str, Any] = response.json()
    return body
