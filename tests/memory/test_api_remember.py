"""POST /api/v1/memory, long-term tier (reference §2.1)."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from loopmem.embedding.work_queue import Keys
from loopmem.errors import InvalidProjectId, QuotaExceeded
from loopmem.redis.client import redis_client
from loopmem.tenancy.services import tenant_halt
from memory.models import Memory
from tests.conftest import error
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def test_remember_stores_a_row_without_embedding_and_answers_memory_data(client_for, agent_key, tenant):
    response = client_for(agent_key).post(
        "/api/v1/memory",
        {"text": "Prefers dark mode", "confidence": 0.8, "tags": ["ui"], "metadata": {"k": 1}},
        format="json",
    )
    assert response.status_code == 201
    data = response.json()["data"]
    assert set(data) == {
        "id", "tier", "tenant_id", "subject_id", "project_id", "text", "confidence", "source",
        "source_session_id", "tags", "metadata", "superseded_by", "inserted_at", "updated_at",
    }  # fmt: skip
    assert data["tier"] == "long_term"
    assert (data["tenant_id"], data["subject_id"], data["project_id"]) == (str(tenant.id), "agent-a", None)
    assert (data["text"], data["confidence"], data["source"]) == ("Prefers dark mode", 0.8, "explicit")
    assert (data["tags"], data["metadata"], data["superseded_by"]) == (["ui"], {"k": 1}, None)
    stored = Memory.objects.get(id=data["id"])
    assert stored.embedding is None


def test_defaults_and_nulls_normalise(client_for, agent_key):
    response = client_for(agent_key).post(
        "/api/v1/memory", {"text": "x", "tags": None, "metadata": None, "tier": "long_term"}, format="json"
    )
    data = response.json()["data"]
    assert (data["confidence"], data["tags"], data["metadata"], data["source_session_id"]) == (1.0, [], {}, None)


def test_body_scope_fields_and_source_are_ignored(client_for, agent_key, tenant, other_tenant):
    response = client_for(agent_key).post(
        "/api/v1/memory",
        {"text": "x", "tenant_id": str(other_tenant.id), "subject_id": "victim", "scope": {}, "source": "promoted"},
        format="json",
    )
    data = response.json()["data"]
    assert (data["tenant_id"], data["subject_id"], data["source"]) == (str(tenant.id), "agent-a", "explicit")


def test_the_write_queues_its_embedding_after_commit_one_drain_per_burst(
    client_for, agent_key, tenant, django_capture_on_commit_callbacks, sent_tasks
):
    client = client_for(agent_key)
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post("/api/v1/memory", {"text": "x"}, format="json").json()["data"]
        second = client.post("/api/v1/memory", {"text": "y"}, format="json").json()["data"]
    # The second write joins the drain the first one scheduled.
    assert sent_tasks == [("memory.tasks.embed_pending_memories_task", (str(tenant.id),))]
    assert redis_client().lrange(Keys("memories", tenant.id).pending, 0, -1) == [
        first["id"].encode(),
        second["id"].encode(),
    ]


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({}, {"text": ["This field is required."]}),
        ({"text": ""}, {"text": ["This field may not be blank."]}),
        ({"text": "x", "confidence": 1.5}, {"confidence": ["Ensure this value is less than or equal to 1.0."]}),
        ({"text": "x", "confidence": -0.1}, {"confidence": ["Ensure this value is greater than or equal to 0.0."]}),
        ({"text": "x", "confidence": None}, {"confidence": ["This field may not be null."]}),
        ({"text": "x", "confidence": True}, {"confidence": ["A valid number is required."]}),
        ({"text": "x", "tags": "ui"}, {"tags": ['Expected a list of items but got type "str".']}),
        ({"text": "x", "metadata": ["a"]}, {"metadata": ['Expected a dictionary of items but got type "list".']}),
        ({"text": "x", "tier": "forever"}, {"tier": ["must be one of long_term, session"]}),
        # Only absent, null or "" mean the default tier: false or 0 are not a tier (schemathesis found them taken).
        ({"text": "x", "tier": False}, {"tier": ["must be one of long_term, session"]}),
        ({"text": "x", "tier": 0}, {"tier": ["must be one of long_term, session"]}),
    ],
)
def test_bad_input_is_422_with_field_details_and_writes_nothing(client_for, agent_key, body, details):
    response = client_for(agent_key).post("/api/v1/memory", body, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "validation_failed", "Validation failed", details)
    assert Memory.objects.count() == 0


def test_text_over_100000_bytes_is_422(client_for, agent_key):
    text = "é" * 50_001  # 100,002 bytes, 50,001 characters
    response = client_for(agent_key).post("/api/v1/memory", {"text": text}, format="json")
    assert response.status_code == 422
    assert response.json()["error"]["details"] == {"text": ["exceeds maximum size of 100000 bytes (got 100002)"]}
    ok = client_for(agent_key).post("/api/v1/memory", {"text": "a" * 100_000}, format="json")
    assert ok.status_code == 201


def test_a_project_of_the_tenant_partitions_the_row(client_for, agent_key, tenant):
    project = ProjectFactory.create(tenant=tenant)
    response = client_for(agent_key).post(
        "/api/v1/memory", {"text": "x", "project_id": str(project.id).upper()}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["data"]["project_id"] == str(project.id)


def test_whitespace_project_id_is_global(client_for, agent_key):
    response = client_for(agent_key).post("/api/v1/memory", {"text": "x", "project_id": "   "}, format="json")
    assert response.json()["data"]["project_id"] is None


@pytest.mark.parametrize("project_id", ["nope", "1234", 42, {"id": 1}, "{" + str(uuid.uuid4()) + "}"])
def test_malformed_project_id_is_422(client_for, agent_key, project_id):
    response = client_for(agent_key).post("/api/v1/memory", {"text": "x", "project_id": project_id}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_unknown_and_foreign_projects_are_indistinguishable_422(client_for, agent_key, other_tenant):
    foreign = ProjectFactory.create(tenant=other_tenant)
    for project_id in (str(uuid.uuid4()), str(foreign.id)):
        response = client_for(agent_key).post("/api/v1/memory", {"text": "x", "project_id": project_id}, format="json")
        assert response.status_code == 422
        assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)
    assert Memory.objects.count() == 0


@override_settings(MEMORY_QUOTA=2)
def test_the_quota_counts_live_rows(client_for, agent_key, make_key, tenant):
    client = client_for(agent_key)
    first = client.post("/api/v1/memory", {"text": "1"}, format="json").json()["data"]
    client.post("/api/v1/memory", {"text": "2"}, format="json")
    response = client.post("/api/v1/memory", {"text": "3"}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "quota_exceeded", QuotaExceeded.default_message, {"quota": 2})
    # Another subject has its own quota.
    other = client_for(make_key("agent", tenant, agent_id="agent-b"))
    assert other.post("/api/v1/memory", {"text": "b"}, format="json").status_code == 201
    # Superseded rows do not count.
    Memory.objects.filter(id=first["id"]).update(superseded_by=Memory.objects.exclude(id=first["id"]).first())
    assert client.post("/api/v1/memory", {"text": "3"}, format="json").status_code == 201


def test_superadmin_without_impersonation_is_422(client_for, superadmin_key):
    response = client_for(superadmin_key).post("/api/v1/memory", {"text": "x"}, format="json")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "impersonation_tenant_required"


def test_a_non_object_body_is_422(client_for, agent_key):
    response = client_for(agent_key).post("/api/v1/memory", ["text"], format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422, "validation_failed", "The request body must be a JSON object", {"body": ["must be an object"]}
    )


def test_halted_tenant_cannot_remember(client_for, agent_key, tenant):
    tenant_halt(tenant=tenant)
    response = client_for(agent_key).post("/api/v1/memory", {"text": "x"}, format="json")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "tenant_halted"
    assert Memory.objects.count() == 0


def test_missing_key_is_401(client_for):
    assert client_for().post("/api/v1/memory", {"text": "x"}, format="json").status_code == 401


def test_a_project_id_with_a_trailing_newline_is_422_not_500(client_for, agent_key, tenant):
    project = ProjectFactory.create(tenant=tenant)
    response = client_for(agent_key).post(
        "/api/v1/memory", {"text": "x", "project_id": f"{project.id}\n"}, format="json"
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_project_id"
