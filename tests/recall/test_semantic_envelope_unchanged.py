"""The default (`semantic`) envelopes of POST /memory/recall and POST /recall are byte-identical to before `mode`.

`semantic_envelope_v1.json` holds the raw response bodies the service answered before the `mode` field existed
(recorded from commit 92cd868 on the fixed corpus below), with only what differs from run to run (ids, timestamps)
replaced by stable placeholders. A changed key, order or default fails here, and so does a float that moved by more
than half precision allows: the vectors are stored as `halfvec`, so scores differ from the recording's from about the
seventh digit; every other byte is compared as recorded. The file changes only by
additions: merged recall's `provenance`, `confidence` and `importance_strength`, and the knowledge meta's
`curated_article_id` and `confidence`, were added to it (and `provenance`, null until a resolver existed, filled).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopmem.embedding import embedders
from memory.models import Memory
from tests.factories import ProjectFactory
from tests.memory.conftest import embed_pending, remember
from tests.recall.conftest import article, heavy_db

pytestmark = heavy_db

GOLDEN = Path(__file__).with_name("semantic_envelope_v1.json")
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_FLOAT = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")
_TIMESTAMP = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")

# Every text and query shares the word "note" and no two texts have as many words, so no two rows tie on score (a
# tie would be broken by the random ids and make the order differ from run to run).
MEMORIES = [
    "note: the deploy pipeline runs on friday evenings",
    "note: my favourite editor is vim with the solarized theme and a large font",
    "note: ERR_TLS_CERT_ALTNAME_INVALID came from the staging ingress",
    "note: deploy-prod.yaml pins the runner image to 4.2",
    "note: Caroline reviews every database migration",
]
IN_PROJECT = "note: alpha deploys from its own pipeline every day"
SUPERSEDED = "note: the old deploy pipeline ran on thursday mornings before"
PROJECT = "<project>"


def _normalized(body: bytes, names: dict[bytes, str]) -> str:
    """The raw body with each id replaced by its first-seen placeholder and each timestamp by <ts>."""

    def name(match: re.Match[bytes]) -> bytes:
        found = names.setdefault(match.group(0), f"<id-{len(names) + 1}>")
        return found.encode()

    return _TIMESTAMP.sub(b"<ts>", _UUID.sub(name, body)).decode()


@pytest.fixture
def corpus(agent, tenant):
    project = ProjectFactory.create(tenant=tenant)
    ids = [remember(agent, text)["id"] for text in MEMORIES]
    in_project = remember(agent, IN_PROJECT, project_id=str(project.id))
    replaced = remember(agent, SUPERSEDED)
    embed_pending()
    Memory.objects.filter(id=replaced["id"]).update(superseded_by_id=ids[0])
    article(tenant, "Deploy pipeline note", "How the deploy pipeline is triggered and rolled back.")
    article(tenant, "Coffee machine note", "Descale the machine monthly.")
    # Seed the placeholders in creation order, so a body that lists rows in a new order cannot match.
    names: dict[bytes, str] = {}
    for memory_id in [*ids, in_project["id"], replaced["id"], str(project.id)]:
        names.setdefault(memory_id.encode(), f"<id-{len(names) + 1}>")
    return project, names


def _requests() -> list[tuple[str, dict[str, Any]]]:
    """(path, body); PROJECT stands for the corpus's project id."""
    return [
        ("/api/v1/memory/recall", {"query": "note deploy pipeline"}),
        ("/api/v1/memory/recall", {"query": "note which certificate error", "limit": 2}),
        ("/api/v1/memory/recall", {"query": "note deploy", "project_id": PROJECT}),
        ("/api/v1/memory/recall", {"query": "note deploy pipeline", "include_superseded": True}),
        ("/api/v1/memory/recall", {"query": "note"}),
        ("/api/v1/recall", {"query": "note deploy pipeline"}),
        ("/api/v1/recall", {"query": "note who reviews migrations", "limit": 3, "project_id": PROJECT}),
    ]


def _bodies(agent, project_id: str, names: dict[bytes, str]) -> dict[str, str]:
    bodies: dict[str, str] = {}
    for n, (path, body) in enumerate(_requests()):
        sent = {key: project_id if value == PROJECT else value for key, value in body.items()}
        response = agent.post(path, sent, format="json")
        assert response.status_code == 200, response.content
        bodies[f"{n} {path} {json.dumps(body, sort_keys=True)}"] = _normalized(response.content, names)
    return bodies


def _fallback_bodies(agent, monkeypatch, names: dict[bytes, str]) -> dict[str, str]:
    class Down:
        def embed(self, texts: list[str]) -> list[list[float]]:
            raise embedders.EmbeddingTimeout()

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Down())
    response = agent.post("/api/v1/memory/recall", {"query": "deploy"}, format="json")
    assert response.status_code == 200, response.content
    return {"fallback /api/v1/memory/recall": _normalized(response.content, names)}


def test_the_default_envelopes_are_byte_identical_to_before(agent, corpus, monkeypatch):
    project, names = corpus
    bodies = _bodies(agent, str(project.id), names)
    bodies.update(_fallback_bodies(agent, monkeypatch, names))
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert list(bodies) == list(golden)
    for key, body in bodies.items():
        assert _FLOAT.sub("<float>", body) == _FLOAT.sub("<float>", golden[key]), key
        floats = [float(f) for f in _FLOAT.findall(body)]
        assert floats == pytest.approx([float(f) for f in _FLOAT.findall(golden[key])], rel=1e-3, abs=1e-4), key


def test_an_explicit_semantic_mode_is_the_default(agent, corpus):
    project, names = corpus
    default = _bodies(agent, str(project.id), dict(names))
    explicit_names = dict(names)
    for n, (path, body) in enumerate(_requests()):
        sent = {key: str(project.id) if value == PROJECT else value for key, value in body.items()}
        response = agent.post(path, {**sent, "mode": "semantic"}, format="json")
        key = f"{n} {path} {json.dumps(body, sort_keys=True)}"
        assert _normalized(response.content, explicit_names) == default[key], key
