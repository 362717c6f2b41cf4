"""Another subject and another tenant see and change nothing: recall, list, forget (service and HTTP)."""

from __future__ import annotations

import pytest

from loopmem.errors import NotFound
from loopmem.tenancy.scope import Scope
from memory import selectors, services
from memory.models import Memory
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

pytestmark = heavy_db


@pytest.fixture
def world(client_for, make_key, tenant, other_tenant):
    """The same agent_id in two tenants, a second subject in the first, and an orchestrator carrying agent-a."""
    owner = client_for(make_key("agent", tenant, agent_id="agent-a"))
    clients = {
        "owner": owner,
        "other_subject": client_for(make_key("agent", tenant, agent_id="agent-b")),
        "other_tenant_same_agent_id": client_for(make_key("agent", other_tenant, agent_id="agent-a")),
        "orchestrator_with_agent_id": client_for(make_key("orchestrator", tenant, agent_id="agent-a")),
    }
    secret = remember(owner, "the vault code is 4242")
    embed_pending()
    return clients, secret


OUTSIDERS = ["other_subject", "other_tenant_same_agent_id", "orchestrator_with_agent_id"]


@pytest.mark.parametrize("who", OUTSIDERS)
def test_outsiders_recall_nothing_semantic(world, who):
    clients, _ = world
    assert recall(clients[who], "vault code")["data"] == []
    assert recall(clients["owner"], "vault code")["meta"]["total_count"] == 1


@pytest.mark.parametrize("who", OUTSIDERS)
def test_outsiders_recall_nothing_on_the_fallback(world, who, monkeypatch):
    from loopmem.embedding import embedders

    class Down:
        def embed(self, texts):
            raise embedders.EmbeddingTimeout()

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Down())
    clients, _ = world
    assert recall(clients[who], "vault")["data"] == []
    assert recall(clients[who], "")["data"] == []
    assert recall(clients["owner"], "vault")["meta"]["total_count"] == 1


@pytest.mark.parametrize("who", OUTSIDERS)
def test_outsiders_list_nothing(world, who):
    clients, _ = world
    assert clients[who].get("/api/v1/memory?all_subjects=true").json()["data"] == []


@pytest.mark.parametrize("who", OUTSIDERS)
def test_outsiders_cannot_forget_it(world, who):
    clients, secret = world
    response = clients[who].delete(f"/api/v1/memory/{secret['id']}")
    assert response.status_code == 404
    assert Memory.objects.filter(id=secret["id"]).exists()


def test_the_services_are_scoped_too(world, tenant, other_tenant):
    _, secret = world
    outsider = Scope(tenant_id=tenant.id, subject_id="agent-b")
    foreign = Scope(tenant_id=other_tenant.id, subject_id="agent-a")
    for scope in (outsider, foreign):
        assert (
            selectors.recall_by_vector(scope=scope, vector=[1.0] + [0.0] * 1535, model_id="hashing:v1", k=10).hits == []
        )
        assert list(selectors.memory_list(scope=scope)) == []
        with pytest.raises(NotFound):
            services.memory_forget(scope=scope, memory_id=secret["id"])
        own = services.memory_remember(scope=scope, text="mine")
        for old, new in ((secret["id"], str(own.id)), (str(own.id), secret["id"])):
            with pytest.raises(NotFound):
                services.memory_supersede(scope=scope, old_id=old, new_id=new)
    assert Memory.objects.get(id=secret["id"]).superseded_by_id is None
