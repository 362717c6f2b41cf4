"""The recall filters narrow the keyword and hybrid lanes too, inside the scoped read, on both
recall endpoints: a row outside the filter is never returned, however well it matches."""

from __future__ import annotations

import pytest

from tests.memory.conftest import heavy_db

pytestmark = heavy_db

QUERY = "deploy-prod.yaml rollout"


@pytest.fixture
def memories(agent):
    tagged = agent.post(
        "/api/v1/memory", {"text": "deploy-prod.yaml holds the rollout plan", "tags": ["ops"]}, format="json"
    )
    untagged = agent.post("/api/v1/memory", {"text": "deploy-prod.yaml rollout is on Tuesdays"}, format="json")
    return tagged.json()["data"]["id"], untagged.json()["data"]["id"]


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
@pytest.mark.parametrize("path", ["/api/v1/memory/recall", "/api/v1/recall"])
def test_a_tag_filter_narrows_every_mode(agent, memories, mode, path):
    tagged, untagged = memories
    unfiltered = agent.post(path, {"query": QUERY, "mode": mode}, format="json").json()
    filtered = agent.post(path, {"query": QUERY, "mode": mode, "tags": ["ops"]}, format="json").json()
    envelope = (lambda body: body) if path.endswith("memory/recall") else (lambda body: body["memory"])
    ids = lambda body: {hit["memory"]["id"] for hit in envelope(body)["data"]}  # noqa: E731
    if mode != "semantic":  # read-your-writes: both found before any embedding
        assert ids(unfiltered) == {tagged, untagged}
    assert ids(filtered) <= {tagged}
    if mode != "semantic":
        assert ids(filtered) == {tagged}
