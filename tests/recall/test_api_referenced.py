"""POST /api/v1/recall/:recall_id/referenced: only what that recall surfaced, in the caller's tenant (§2.8)."""

from __future__ import annotations

import uuid

import pytest

from knowledge.models import ArticleAccessEvent
from loopmem.tenancy.services import tenant_halt
from tests.conftest import error
from tests.memory.conftest import embed_pending, remember
from tests.recall.conftest import article, heavy_db, recall

pytestmark = heavy_db


@pytest.fixture
def surfaced(agent, tenant):
    article(tenant, "Deploy pipeline", "deploy pipeline steps")
    article(tenant, "Deploy rollback", "deploy rollback steps")
    body = recall(agent, "deploy")
    ids = [item["article"]["id"] for item in body["data"] if item["source"] == "knowledge"]
    assert len(ids) == 2
    return body["meta"]["recall_id"], ids


def refer(client, recall_id, article_ids, expect=200):
    response = client.post(f"/api/v1/recall/{recall_id}/referenced", {"article_ids": article_ids}, format="json")
    assert response.status_code == expect, response.json()
    return response.json()


def referenced_rows():
    return ArticleAccessEvent.objects.filter(access_type="referenced")


def test_surfaced_articles_are_recorded_with_the_callers_key(agent, agent_key, surfaced):
    recall_id, ids = surfaced
    body = refer(agent, recall_id.upper(), [ids[0], ids[0].upper(), ids[1]])
    assert body == {"data": {"recall_id": recall_id, "article_ids": [ids[0], ids[1]], "recorded": 2}}
    rows = list(referenced_rows())
    assert len(rows) == 2
    assert {str(r.origin_search_id) for r in rows} == {recall_id}
    assert {r.api_key_id for r in rows} == {agent_key.api_key.id}
    assert all(r.metadata == {"recall_id": recall_id} for r in rows)


def test_repeats_write_rows_but_stay_distinct_pairs(agent, surfaced):
    recall_id, ids = surfaced
    refer(agent, recall_id, ids[:1])
    refer(agent, recall_id, ids[:1])
    assert referenced_rows().count() == 2
    assert referenced_rows().values("origin_search_id", "article_id").distinct().count() == 1


def test_one_unsurfaced_id_refuses_the_whole_call_and_writes_nothing(agent, tenant, surfaced):
    recall_id, ids = surfaced
    other = str(article(tenant, "Unrelated", "coffee").id)
    response = agent.post(f"/api/v1/recall/{recall_id}/referenced", {"article_ids": [ids[0], other]}, format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422,
        "not_surfaced",
        f"These article ids were not surfaced by recall {recall_id}: {other}",
        {"article_ids": [other]},
    )
    assert not referenced_rows().exists()


def test_a_memory_id_is_not_referenceable(agent, surfaced):
    recall_id, _ = surfaced
    memory = remember(agent, "deploy memory")
    embed_pending()
    body = refer(agent, recall_id, [memory["id"]], expect=422)
    assert body["error"]["code"] == "not_surfaced"


def test_an_unknown_or_foreign_recall_surfaced_nothing(agent, client_for, make_key, other_tenant, surfaced):
    recall_id, ids = surfaced
    assert refer(agent, str(uuid.uuid4()), ids, expect=422)["error"]["code"] == "not_surfaced"
    foreign = client_for(make_key("agent", other_tenant, agent_id="agent-a"))
    assert refer(foreign, recall_id, ids, expect=422)["error"]["details"] == {"article_ids": ids}
    assert not referenced_rows().exists()


@pytest.mark.parametrize(
    ("recall_id", "article_ids", "code", "message"),
    [
        ("not-a-uuid", None, "invalid_recall_id",
         "The `recall_id` path segment must be the `meta.recall_id` UUID from a recall response."),
        (None, [], "invalid_article_ids", "`article_ids` must be a non-empty list of article UUIDs."),
        (None, "abc", "invalid_article_ids", "`article_ids` must be a non-empty list of article UUIDs."),
        (None, ["nope"], "invalid_article_ids", "`article_ids` must be a non-empty list of article UUIDs."),
        (None, [7], "invalid_article_ids", "`article_ids` must be a non-empty list of article UUIDs."),
    ],
)  # fmt: skip
def test_malformed_input_is_422(agent, surfaced, recall_id, article_ids, code, message):
    real_recall, ids = surfaced
    body = {"article_ids": ids if article_ids is None else article_ids}
    response = agent.post(f"/api/v1/recall/{recall_id or real_recall}/referenced", body, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, code, message)


def test_more_than_50_ids_is_422(agent, surfaced):
    recall_id, _ = surfaced
    response = agent.post(
        f"/api/v1/recall/{recall_id}/referenced", {"article_ids": [str(uuid.uuid4()) for _ in range(51)]}, format="json"
    )
    assert response.status_code == 422
    assert response.json() == error(
        422, "too_many_article_ids", "At most 50 article ids may be referenced in one call.", {"max": 50, "given": 51}
    )


def test_referencing_is_a_write_refused_during_a_halt(agent, tenant, surfaced):
    recall_id, ids = surfaced
    tenant_halt(tenant=tenant)
    assert refer(agent, recall_id, ids, expect=503)["error"]["code"] == "tenant_halted"


def test_referenced_rows_never_count_as_reads(agent, tenant, surfaced):
    from django.utils import timezone

    from knowledge.ledger import retrieval_metrics_compute

    recall_id, ids = surfaced
    refer(agent, recall_id, ids)
    snapshot = retrieval_metrics_compute(tenant_id=tenant.id, day=timezone.now().date())
    assert snapshot.referenced == 2
    assert snapshot.followed_through == 0
