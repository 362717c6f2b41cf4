"""GET /api/v1/memory (reference §2.3) and DELETE /api/v1/memory/:id (§2.4)."""

from __future__ import annotations

import uuid

import pytest

from loopmem.tenancy.services import tenant_halt
from memory.models import Memory
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.memory.conftest import remember

pytestmark = pytest.mark.django_db


def test_list_is_newest_first_with_true_total_and_paging(agent):
    for n in range(5):
        remember(agent, f"m{n}")
    body = agent.get("/api/v1/memory?limit=2&offset=1").json()
    assert [m["text"] for m in body["data"]] == ["m3", "m2"]
    assert body["meta"] == {"total_count": 5, "limit": 2, "offset": 1, "outcome": "success"}


def test_list_empty_and_past_the_end(agent):
    assert agent.get("/api/v1/memory").json()["meta"]["outcome"] == "empty"
    remember(agent, "only")
    meta = agent.get("/api/v1/memory?offset=5").json()["meta"]
    assert (meta["total_count"], meta["outcome"]) == (1, "success")


def test_list_hides_superseded_unless_asked_and_filters_source(agent):
    old, new = remember(agent, "old"), remember(agent, "new")
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    Memory.objects.filter(id=new["id"]).update(source="promoted")
    assert [m["text"] for m in agent.get("/api/v1/memory").json()["data"]] == ["new"]
    listed = agent.get("/api/v1/memory?include_superseded=true").json()["data"]
    assert [(m["text"], m["superseded_by"]) for m in listed] == [("new", None), ("old", new["id"])]
    assert agent.get("/api/v1/memory?source=explicit&include_superseded=true").json()["meta"]["total_count"] == 1
    assert agent.get("/api/v1/memory?source=promoted").json()["meta"]["total_count"] == 1
    assert agent.get("/api/v1/memory?source=bogus").json()["meta"]["total_count"] == 1


def test_list_is_not_project_filtered(agent, tenant):
    project = ProjectFactory.create(tenant=tenant)
    remember(agent, "global")
    remember(agent, "in project", project_id=str(project.id))
    assert agent.get("/api/v1/memory").json()["meta"]["total_count"] == 2


def test_all_subjects_is_superadmin_oversight_only(client_for, agent, make_key, superadmin_key, tenant, other_tenant):
    remember(agent, "a's")
    remember(client_for(make_key("agent", tenant, agent_id="agent-b")), "b's")
    remember(client_for(make_key("agent", other_tenant, agent_id="agent-a")), "foreign")
    # An agent's all_subjects is ignored.
    assert [m["text"] for m in agent.get("/api/v1/memory?all_subjects=true").json()["data"]] == ["a's"]
    oversight = client_for(superadmin_key, impersonate="acme").get("/api/v1/memory?all_subjects=true").json()
    assert sorted(m["text"] for m in oversight["data"]) == ["a's", "b's"]
    response = client_for(superadmin_key).get("/api/v1/memory?all_subjects=true")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "impersonation_tenant_required"


def test_forget_deletes_the_row(agent):
    memory = remember(agent, "forget me")
    response = agent.delete(f"/api/v1/memory/{memory['id']}")
    assert response.status_code == 200
    assert response.json() == {"data": {"id": memory["id"], "deleted": True}}
    assert not Memory.objects.filter(id=memory["id"]).exists()


def test_forgetting_a_superseder_revives_what_it_superseded(agent):
    old, new = remember(agent, "old"), remember(agent, "new")
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    agent.delete(f"/api/v1/memory/{new['id']}")
    assert Memory.objects.get(id=old["id"]).superseded_by_id is None
    assert [m["text"] for m in agent.get("/api/v1/memory").json()["data"]] == ["old"]


@pytest.mark.parametrize("memory_id", ["not-a-uuid", str(uuid.uuid4()), "12345"])
def test_forgetting_what_is_not_there_is_404(agent, memory_id):
    response = agent.delete(f"/api/v1/memory/{memory_id}")
    assert response.status_code == 404
    assert response.json() == error(404, "not_found", "Not found")


def test_superadmin_forgets_any_memory_of_the_impersonated_tenant_even_during_a_halt(
    client_for, agent, superadmin_key, tenant
):
    memory = remember(agent, "x")
    tenant_halt(tenant=tenant)
    assert agent.delete(f"/api/v1/memory/{memory['id']}").status_code == 503
    oversight = client_for(superadmin_key, impersonate="acme")
    assert oversight.get("/api/v1/memory?all_subjects=true").status_code == 200
    assert oversight.delete(f"/api/v1/memory/{memory['id']}").status_code == 200
    assert client_for(superadmin_key).delete(f"/api/v1/memory/{memory['id']}").status_code == 422
