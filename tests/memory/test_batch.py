"""POST /api/v1/memory/batch: each item validated and written on its own, in order; quota and rate limits per item."""

from __future__ import annotations

import pytest
from django.test import override_settings

from loopmem.tenancy.services import tenant_halt
from memory.models import Memory, SessionTurn
from tests.conftest import error

pytestmark = pytest.mark.django_db

URL = "/api/v1/memory/batch"


def batch(client, memories):
    response = client.post(URL, {"memories": memories}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_mixed_good_and_bad_items_each_get_their_own_answer_in_order(agent, tenant):
    body = batch(
        agent,
        [
            {"text": "CI runs on the self-hosted pool", "tags": ["ci"]},
            {"text": ""},
            "not an object",
            {"tier": "session", "session_id": "s-1", "role": "fact", "content": "the staging db resets Mondays"},
            {"text": "x", "confidence": 3},
            {"text": "y", "project_id": "not-a-uuid"},
            {"tier": "weekly", "text": "z"},
            {"text": "the deploy key is in the vault", "metadata": {"where": "vault"}},
        ],
    )
    statuses = [(item["index"], item["status"]) for item in body["data"]]
    assert statuses == [(0, 201), (1, 422), (2, 422), (3, 201), (4, 422), (5, 422), (6, 422), (7, 201)]
    assert body["meta"] == {"created": 3, "failed": 5}
    first, blank, not_object, turn, _, bad_project, bad_tier, last = body["data"]
    assert (first["memory"]["text"], first["memory"]["tags"], first["memory"]["tier"]) == (
        "CI runs on the self-hosted pool",
        ["ci"],
        "long_term",
    )
    assert "error" not in first
    assert "memory" not in blank
    assert (
        blank["error"]
        == error(422, "validation_failed", "Validation failed", {"text": ["This field may not be blank."]})["error"]
    )
    assert not_object["error"]["details"] == {"memory": ["must be an object"]}
    assert (turn["memory"]["tier"], turn["memory"]["session_id"]) == ("session", "s-1")
    assert bad_project["error"]["code"] == "invalid_project_id"
    assert bad_tier["error"]["details"] == {"tier": ["must be one of long_term, session"]}
    assert last["memory"]["metadata"] == {"where": "vault"}
    # Written in order, every good item and nothing else.
    assert list(Memory.objects.order_by("inserted_at").values_list("text", flat=True)) == [
        "CI runs on the self-hosted pool",
        "the deploy key is in the vault",
    ]
    assert SessionTurn.objects.get().content == "the staging db resets Mondays"


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({"memories": []}, {"memories": ["Ensure this field has at least 1 elements."]}),
        ({"memories": [{"text": "x"}] * 101}, {"memories": ["Ensure this field has no more than 100 elements."]}),
        ({"memories": {"text": "x"}}, {"memories": ['Expected a list of items but got type "dict".']}),
        ({}, {"memories": ["This field is required."]}),
    ],
)
def test_the_batch_itself_must_hold_1_to_100_items(agent, body, details):
    response = agent.post(URL, body, format="json")
    assert (response.status_code, response.json()) == (
        422,
        error(422, "validation_failed", "Validation failed", details),
    )
    assert not Memory.objects.exists()


@override_settings(MEMORY_QUOTA=3)
def test_the_quota_counts_each_item(agent):
    body = batch(agent, [{"text": f"fact {n}"} for n in range(5)])
    assert [item["status"] for item in body["data"]] == [201, 201, 201, 422, 422]
    assert body["data"][3]["error"]["code"] == "quota_exceeded"
    assert Memory.objects.count() == 3


def test_the_rate_limit_counts_each_item(client_for, make_key, tenant):
    tenant.rate_limit_requests_per_minute = 4
    tenant.save()
    client = client_for(make_key("agent", tenant, agent_id="bursty"))
    body = batch(client, [{"text": f"fact {n}"} for n in range(6)])
    assert [item["status"] for item in body["data"]] == [201, 201, 201, 201, 429, 429]
    assert body["data"][4]["error"]["code"] == "rate_limited"
    assert Memory.objects.count() == 4
    # The batch spent the key's minute: the next request is refused.
    assert client.post("/api/v1/memory", {"text": "one more"}, format="json").status_code == 429


def test_a_halted_tenant_cannot_batch(agent, tenant):
    tenant_halt(tenant=tenant)
    response = agent.post(URL, {"memories": [{"text": "x"}]}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (503, "tenant_halted")
    assert not Memory.objects.exists()


def test_scope_fields_in_items_are_ignored(agent, other_tenant):
    body = batch(agent, [{"text": "mine", "tenant_id": str(other_tenant.id), "subject_id": "someone-else"}])
    assert (body["data"][0]["memory"]["subject_id"], Memory.objects.get().subject_id) == ("agent-a", "agent-a")


def test_a_batch_over_the_body_size_cap_is_413(agent):
    # The request body cap (LOOPMEM_MAX_REQUEST_BODY_BYTES, 1 MiB) applies to a batch like to any JSON body.
    response = agent.post(URL, {"memories": [{"text": "x" * 90_000}] * 30}, format="json")
    assert (response.status_code, response.json()) == (
        413,
        error(
            413, "payload_too_large", "The request body is larger than this endpoint accepts", {"max_bytes": 1048576}
        ),
    )
    assert not Memory.objects.exists()
