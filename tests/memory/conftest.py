"""Memory test helpers: remember through the API, and embed as the worker would (tasks called as functions)."""

from __future__ import annotations

from typing import Any

import pytest

from memory import embedding, hybrid_lanes
from memory.models import Memory

# Heavy reads run on the `heavy_read` alias: a second connection that sees only committed data.
heavy_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


def remember(client: Any, text: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/memory", {"text": text, **fields}, format="json")
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def embed_pending() -> int:
    """What the embedding worker does after each write."""
    pending = list(Memory.objects.filter(embedding__isnull=True).values_list("id", flat=True))
    for memory_id in pending:
        embedding.memory_embed(memory_id=str(memory_id))
    return len(pending)


def recall(client: Any, query: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/memory/recall", {"query": query, **fields}, format="json")
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    return body


READ_SHAPES = ("whole", "exact_scan", "lane_by_lane")


def read_through(shape: str, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Send hybrid's reads through one of its three shapes (memory.hybrid_lanes): the whole small subject in one
    read, the one-statement read, or lane by lane."""
    if shape != "whole":
        monkeypatch.setattr(hybrid_lanes, "SMALL_SET", 0)
    if shape == "lane_by_lane":
        settings.RECALL_EXACT_MAX_ROWS = 0
