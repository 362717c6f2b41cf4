"""Knowledge test helpers: propose and search through the API, embed as the worker would, exact vectors."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.embedding import article_embed
from knowledge.models import Article
from knowledge.services import Proposal
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from tests.conftest import error

# Search and the novelty gate read on the `heavy_read` alias: a second connection that sees only committed data.
heavy_db = pytest.mark.django_db(
    transaction=True, databases=["default", "heavy_read"], available_apps=["loopmem", "projects", "memory", "knowledge"]
)

MODEL = "hashing:v1"
MISSING_KEY = error(401, "unauthorized", "A valid API key is required: send 'Authorization: Bearer <key>'")


def vec(*components: float) -> list[float]:
    """A vector in the test model's 384 dimensions with the given leading components (the rest zero)."""
    return [float(c) for c in components] + [0.0] * (embedders.HashingEmbedder.dimensions - len(components))


def query_vector(*components: float) -> QueryEmbedding:
    return QueryEmbedding(vector=vec(*components), model_id=MODEL)


def hashed(text: str) -> list[float]:
    """What the test embedder makes of `text`: an article embedded as the worker would."""
    [vector] = embedders.HashingEmbedder().embed([text])
    return vector


def propose(client: Any, *, expect: int | None = None, **fields: Any) -> Any:
    body = {"title": "A title", "body": "A body", "category": "finding", **fields}
    response = client.post("/api/v1/knowledge/articles", body, format="json")
    if expect is not None:
        assert response.status_code == expect, response.json()
    return response


def create(client: Any, **fields: Any) -> dict[str, Any]:
    """Propose and expect a new article; its data."""
    response = propose(client, **fields)
    assert response.status_code == 201, response.json()
    article: dict[str, Any] = response.json()["data"]["article"]
    return article


def article_of(proposal: Proposal) -> Article:
    """The article a proposal concerns (asserting there is one)."""
    assert proposal.article is not None
    return proposal.article


def embed_pending() -> int:
    """What the embedding worker does after each write that could not embed synchronously."""
    pending = list(Article.objects.filter(embedding__isnull=True).values_list("id", flat=True))
    for article_id in pending:
        article_embed(article_id=str(article_id))
    return len(pending)


def search(client: Any, q: str | None = None, *, expect: int = 200, **params: Any) -> dict[str, Any]:
    query = {**({"q": q} if q is not None else {}), **params}
    response = client.get("/api/v1/knowledge/search", query)
    assert response.status_code == expect, response.json()
    body: dict[str, Any] = response.json()
    return body


def titles(body: dict[str, Any]) -> list[str]:
    return [hit["title"] for hit in body["data"]]


class FailingEmbedder:
    """An embedding provider that is down."""

    def __init__(self, failure: embedders.EmbeddingFailure | None = None) -> None:
        self.failure = failure or embedders.EmbeddingTimeout()

    def embed(self, texts: Any) -> list[list[float]]:
        raise self.failure


@pytest.fixture
def embedding_down(monkeypatch: pytest.MonkeyPatch) -> FailingEmbedder:
    failing = FailingEmbedder()
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: failing)
    return failing


@pytest.fixture
def peer(client_for, make_key, tenant):
    """agent-b, another agent of the same tenant."""
    return client_for(make_key("agent", tenant, agent_id="agent-b"))


@pytest.fixture
def user(client_for, user_key):
    return client_for(user_key)


@pytest.fixture
def outsider(client_for, make_key, other_tenant):
    """An agent of another tenant, with the same agent_id as `agent`."""
    return client_for(make_key("agent", other_tenant, agent_id="agent-a"))
