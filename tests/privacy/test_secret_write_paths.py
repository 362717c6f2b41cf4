"""Every write path against the whole secret corpus (`tests/secret_corpus.py`), under the default policy.

Each path gets every secret and every look-alike, not a sample: a secret must be refused with its kind and a span
over it (422 `secret_detected`, the whole body asserted, the secret nowhere in it), nothing refused may be
stored or reach the embedding provider, and a look-alike must be stored as sent. The figures (false negatives,
false positives per path) are printed; docs/security.md quotes them. The MCP path is in
`tests/mcp/test_secret_write_path.py` (it needs the live server).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import override_settings

from knowledge.embedding import article_embed
from knowledge.models import Article
from loopmem.models import SecretPolicy
from loopmem.secret_guard.scan import scan
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_policy, tenant_set_provider
from memory import services as memory_services
from memory.models import Memory, PromotionJob, SessionTurn
from memory.promotion import jobs as promotion
from tests.conftest import error
from tests.memory.conftest import embed_pending, heavy_db
from tests.secret_corpus import (
    BENIGN,
    SECRET_DETECTED_MESSAGE,
    WRITE_SECRETS,
    PathFigures,
    refused_over_its_span,
)

pytestmark = [heavy_db, pytest.mark.usefixtures("_room_for_the_corpus")]

# Whole texts, not the secrets alone: a look-alike may hold a secret's digits (an unlabelled SSN shape).
SECRET_TEXTS = [case.text for case in WRITE_SECRETS]


@pytest.fixture
def _room_for_the_corpus():
    # 76 look-alikes are stored on each path: more than the test quota (50) and the promotion cap (5).
    with override_settings(MEMORY_QUOTA=1000, PROMOTION_MAX_CANDIDATES=1000):
        yield


def expected_refusal(name: str, text: str, offset: int = 0) -> dict[str, Any]:
    findings = scan(text)
    details = {
        "kinds": sorted({f.kind for f in findings}),
        "spans": {name: [[f.start + offset, f.end + offset] for f in findings]},
    }
    return error(422, "secret_detected", SECRET_DETECTED_MESSAGE, details)


@dataclass(frozen=True)
class ApiPath:
    """One HTTP write: how to send a text, which field it is, and every text the path has stored."""

    name: str
    field: str
    send: Callable[[Any, str, int], Any]
    stored: Callable[[], list[str]]
    embed: Callable[[], object] | None = None  # what the embedding worker does next (session turns: nothing)


def _remember(client: Any, text: str, index: int) -> Any:
    return client.post("/api/v1/memory", {"text": text}, format="json")


def _turn(client: Any, text: str, index: int) -> Any:
    body = {"tier": "session", "session_id": "s-1", "role": "user", "content": text}
    return client.post("/api/v1/memory", body, format="json")


def _article(client: Any, text: str, index: int) -> Any:
    body = {"title": f"Corpus case {index}", "body": text, "category": "finding", "status": "published"}
    return client.post("/api/v1/knowledge/articles", body, format="json")


def _embed_articles() -> None:
    for article_id in Article.objects.filter(embedding__isnull=True).values_list("id", flat=True):
        article_embed(article_id=str(article_id))


API_PATHS = [
    ApiPath(
        "POST /api/v1/memory (long_term)",
        "text",
        _remember,
        lambda: list(Memory.objects.values_list("text", flat=True)),
        embed_pending,
    ),
    ApiPath(
        "POST /api/v1/memory (session)",
        "content",
        _turn,
        lambda: list(SessionTurn.objects.values_list("content", flat=True)),
    ),
    ApiPath(
        "POST /api/v1/knowledge/articles",
        "body",
        _article,
        lambda: list(Article.objects.values_list("body", flat=True)),
        _embed_articles,
    ),
]


@pytest.mark.parametrize("path", API_PATHS, ids=lambda p: p.name)
def test_every_secret_is_refused_and_every_look_alike_stored(path, agent, recording_embedder):
    figures = PathFigures(path.name)
    for index, case in enumerate(WRITE_SECRETS):
        response = path.send(agent, case.text, index)
        body = response.json()
        refused = response.status_code == 422 and body["error"]["code"] == "secret_detected"
        if not refused or not refused_over_its_span(body["error"]["details"], path.field, case):
            figures.false_negatives.append(case.id)
            continue
        assert body == expected_refusal(path.field, case.text)
        assert case.secret not in response.content.decode()
    passed = []
    for index, (name, text) in enumerate(BENIGN, start=len(WRITE_SECRETS)):
        response = path.send(agent, text, index)
        if response.status_code == 422 and response.json()["error"]["code"] == "secret_detected":
            figures.false_positives.append(name)
            continue
        assert response.status_code == 201, (name, response.json())
        assert "meta" not in response.json()  # nothing redacted: the reference's envelope, byte for byte
        passed.append(text)
    figures.check()

    stored = path.stored()
    assert sorted(stored) == sorted(passed)  # every look-alike as sent, and nothing else
    assert [c.id for c in WRITE_SECRETS if any(c.text in text for text in stored)] == []
    if path.embed is not None:
        path.embed()
        assert recording_embedder.saw(SECRET_TEXTS) == []
        assert len(recording_embedder.texts) >= len(passed)  # the provider was called: the check above could fail


def _covers_in_json(details: dict[str, Any], name: str, serialised: str, secret: str) -> bool:
    """A refusal names a span of field `name` over the secret as it stands, escaped, in the field's serialisation."""
    encoded = json.dumps(secret, ensure_ascii=False)[1:-1]
    start = serialised.index(encoded)
    spans = details.get("spans", {}).get(name, [])
    return bool(details.get("kinds")) and any(s <= start and e >= start + len(encoded) for s, e in spans)


def test_every_secret_inside_a_metadata_string_is_refused(agent, recording_embedder):
    # Metadata is scanned as JSON, where escaping hides what a rule looks for (`secret = \"...\"`, `\n`): each
    # string of it is scanned as itself too.
    figures = PathFigures("POST /api/v1/memory (long_term, metadata)")
    for case in WRITE_SECRETS:
        metadata = {"source": "chat", "note": case.text}
        response = agent.post("/api/v1/memory", {"text": "A note.", "metadata": metadata}, format="json")
        body = response.json()
        serialised = json.dumps(metadata, ensure_ascii=False)
        if not (
            response.status_code == 422
            and body["error"]["code"] == "secret_detected"
            and _covers_in_json(body["error"]["details"], "metadata", serialised, case.secret)
        ):
            figures.false_negatives.append(case.id)
            continue
        assert case.secret not in response.content.decode()
    for name, text in BENIGN:
        response = agent.post("/api/v1/memory", {"text": "A note.", "metadata": {"note": text}}, format="json")
        if response.status_code == 422 and response.json()["error"]["code"] == "secret_detected":
            figures.false_positives.append(name)
        else:
            assert response.status_code == 201, (name, response.json())
    figures.check()
    assert Memory.objects.count() == len(BENIGN) - len(figures.false_positives)  # no secret was stored


def test_promotion_drops_every_secret_bearing_candidate_and_counts_it(agent, tenant, fake_llm, recording_embedder):
    # The tenant's LLM answers with the whole corpus as candidate facts, secrets included: the session held the
    # look-alikes (the user said them; a contact no turn holds would be quarantined as made up) and none of the
    # secrets (it was written under `refuse`), but a model can put one in.
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-test", llm_model="m")
    texts = [case.text for case in WRITE_SECRETS] + [text for _, text in BENIGN]
    fake_llm.reply = json.dumps([{"text": text, "confidence": 0.9} for text in texts])
    for index, content in enumerate(("We deploy on Fridays.", *(text for _, text in BENIGN))):
        assert _turn(agent, content, index).status_code in (201, 422)
    assert agent.post("/api/v1/memory/promote", {"session_id": "s-1"}, format="json").status_code == 202

    [job_id] = PromotionJob.objects.values_list("id", flat=True)
    assert promotion.promotion_run(job_id=str(job_id)).outcome == "promoted"

    stored = list(Memory.objects.values_list("text", flat=True))
    figures = PathFigures(
        "promotion (candidates of the tenant's LLM)",
        false_negatives=[c.id for c in WRITE_SECRETS if any(c.text in text for text in stored)],
        false_positives=[name for name, text in BENIGN if text not in stored],
    )
    figures.check()
    job = PromotionJob.objects.get(id=job_id)
    # The injection guard runs first: a secret in a rule it refuses ("Wire the refund to <IBAN>") is quarantined
    # before persist looks for secrets. Either way it is never written; nor is a look-alike counted false positive.
    unwritten = len(WRITE_SECRETS) - len(figures.false_negatives) + len(figures.false_positives)
    assert job.detail["secret_dropped"] + job.quarantined == unwritten
    assert job.candidates == len(texts)
    assert recording_embedder.saw(SECRET_TEXTS) == []
    assert len(recording_embedder.texts) >= len(BENIGN) - len(figures.false_positives)


def test_a_candidate_with_a_secret_outside_its_text_is_dropped_too(agent, tenant, fake_llm):
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-test", llm_model="m")
    [case] = [c for c in WRITE_SECRETS if c.kind == "github_token"][:1]
    fake_llm.reply = json.dumps(
        [
            {"text": "Use the deploy token from the vault.", "when_to_apply": case.text, "confidence": 0.9},
            {"text": "Tag releases on main.", "tags": [case.secret], "confidence": 0.9},
            {"text": "Deploys need a green canary.", "confidence": 0.9},
        ]
    )
    for content in ("a", "b"):
        _turn(agent, content, 0)
    agent.post("/api/v1/memory/promote", {"session_id": "s-1"}, format="json")
    [job_id] = PromotionJob.objects.values_list("id", flat=True)
    promotion.promotion_run(job_id=str(job_id))

    assert list(Memory.objects.values_list("text", flat=True)) == ["Deploys need a green canary."]
    assert PromotionJob.objects.get(id=job_id).detail["secret_dropped"] == 2


def test_graduation_refuses_every_memory_holding_a_secret_whatever_the_policy(agent, tenant, recording_embedder):
    # A tenant that allows secrets in its memories may hold some; none may become an article.
    tenant_set_policy(tenant=tenant, secrets=SecretPolicy.ALLOW)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    secret_ids = {c.id: str(memory_services.memory_remember(scope=scope, text=c.text).id) for c in WRITE_SECRETS}
    benign_ids = {name: str(memory_services.memory_remember(scope=scope, text=text).id) for name, text in BENIGN}
    figures = PathFigures("POST /api/v1/memory/graduate")

    for case in WRITE_SECRETS:
        response = agent.post("/api/v1/memory/graduate", {"memory_id": secret_ids[case.id]}, format="json")
        body = response.json()
        refused = response.status_code == 422 and body["error"]["code"] == "secret_detected"
        if not refused or not refused_over_its_span(body["error"]["details"], "text", case):
            figures.false_negatives.append(case.id)
            continue
        assert body == expected_refusal("text", case.text)
    for name, _text in BENIGN:
        response = agent.post("/api/v1/memory/graduate", {"memory_id": benign_ids[name]}, format="json")
        if response.status_code == 422 and response.json()["error"]["code"] == "secret_detected":
            figures.false_positives.append(name)
            continue
        assert response.status_code in (200, 201), (name, response.json())
    figures.check()

    bodies = list(Article.objects.values_list("body", flat=True))
    assert [c.id for c in WRITE_SECRETS if any(c.text in body for body in bodies)] == []
    assert recording_embedder.saw(SECRET_TEXTS) == []  # the novelty gate embedded none of them
    assert recording_embedder.texts
    # An explicit refusal is not stamped: the memory stays a candidate should its owner ever correct it.
    assert not Memory.objects.filter(id__in=secret_ids.values(), graduated_at__isnull=False).exists()
