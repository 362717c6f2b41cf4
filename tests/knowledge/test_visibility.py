"""Who sees which article (Article.objects.visible_to): list, get, search and patch, for every role.

Agents see published shared articles and everything they own; user, orchestrator and impersonating
superadmin keys see the whole tenant; nobody sees another tenant. A hidden article is a 404.
"""

from __future__ import annotations

import pytest

from loopmem.errors import ImpersonationTenantRequired, NotFound
from tests.conftest import error
from tests.factories import embedded_article
from tests.knowledge.conftest import heavy_db, search, titles

pytestmark = heavy_db

BODY = "the deploy checklist"


def article(tenant, title, **fields):
    return embedded_article(tenant, title, BODY, **fields)


@pytest.fixture
def world(tenant, other_tenant):
    return {
        "shared published": article(tenant, "shared published", owner_subject_id="curator"),
        "shared draft": article(tenant, "shared draft", status="draft", owner_subject_id="curator"),
        "a's owner article": article(tenant, "a's owner article", visibility="owner", owner_subject_id="agent-a"),
        "a's private draft": article(
            tenant, "a's private draft", visibility="private", status="draft", owner_subject_id="agent-a"
        ),
        "b's owner article": article(tenant, "b's owner article", visibility="owner", owner_subject_id="agent-b"),
        "other tenant's": article(other_tenant, "other tenant's", owner_subject_id="agent-a"),
    }


TENANT_WIDE = {"shared published", "shared draft", "a's owner article", "a's private draft", "b's owner article"}
SEES = {
    "agent-a": {"shared published", "a's owner article", "a's private draft"},
    "agent-b": {"shared published", "b's owner article"},
    "user": TENANT_WIDE,
    "orchestrator carrying agent-a": TENANT_WIDE,
    "superadmin impersonating": TENANT_WIDE,
    "agent-a of another tenant": {"other tenant's"},
}
# Search reads published articles only, whoever asks.
FINDS = {who: {t for t in seen if "draft" not in t} for who, seen in SEES.items()}


@pytest.fixture
def clients(client_for, make_key, tenant, other_tenant, superadmin_key):
    return {
        "agent-a": client_for(make_key("agent", tenant, agent_id="agent-a")),
        "agent-b": client_for(make_key("agent", tenant, agent_id="agent-b")),
        "user": client_for(make_key("user", tenant)),
        "orchestrator carrying agent-a": client_for(make_key("orchestrator", tenant, agent_id="agent-a")),
        "superadmin impersonating": client_for(superadmin_key, impersonate=str(tenant.id)),
        "agent-a of another tenant": client_for(make_key("agent", other_tenant, agent_id="agent-a")),
    }


@pytest.mark.parametrize("who", list(SEES))
def test_each_role_lists_gets_and_searches_exactly_what_it_may_see(world, clients, who):
    client = clients[who]
    listed = {a["title"] for a in client.get("/api/v1/knowledge/articles").json()["data"]}
    assert listed == SEES[who]
    for title, row in world.items():
        response = client.get(f"/api/v1/knowledge/articles/{row.id}")
        if title in SEES[who]:
            assert response.status_code == 200
        else:
            assert response.status_code == 404
            assert response.json() == error(404, "not_found", NotFound.default_message)
    for mode in ("keyword", "semantic", "combined"):
        assert set(titles(search(client, "deploy checklist", mode=mode, limit=50))) == FINDS[who], mode


def test_an_owner_visible_article_is_invisible_to_a_peer_and_another_tenant_even_to_patch(world, clients):
    target = world["a's owner article"]
    for who in ("agent-b", "agent-a of another tenant"):
        response = clients[who].patch(f"/api/v1/knowledge/articles/{target.id}", {"title": "mine"}, format="json")
        assert response.status_code == 404
        assert response.json() == error(404, "not_found", NotFound.default_message)


def test_a_superadmin_without_impersonation_is_422_everywhere(world, client_for, superadmin_key):
    client = client_for(superadmin_key)
    expected = error(422, "impersonation_tenant_required", ImpersonationTenantRequired.default_message)
    shared = world["shared published"]
    assert client.get("/api/v1/knowledge/articles").json() == expected
    assert client.get(f"/api/v1/knowledge/articles/{shared.id}").json() == expected
    assert client.get("/api/v1/knowledge/search", {"q": "deploy"}).json() == expected
    assert client.patch(f"/api/v1/knowledge/articles/{shared.id}", {}, format="json").json() == expected
