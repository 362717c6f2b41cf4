"""POST/GET /api/v1/projects."""

from __future__ import annotations

from tests.conftest import error
from tests.factories import ProjectFactory


def test_a_user_creates_a_project(client_for, user_key, tenant):
    response = client_for(user_key).post(
        "/api/v1/projects",
        {"name": "Web App", "repo_url": "https://github.com/acme/web.git", "metadata": {"team": "core"}},
        format="json",
    )
    assert response.status_code == 201
    data = response.json()["data"]
    assert data["tenant_id"] == str(tenant.id)
    assert (data["name"], data["slug"], data["status"]) == ("Web App", "web-app", "active")
    assert data["repo_url"] == "https://github.com/acme/web.git"
    assert data["metadata"] == {"team": "core"}
    assert set(data) == {
        "id",
        "tenant_id",
        "name",
        "slug",
        "repo_url",
        "description",
        "status",
        "metadata",
        "inserted_at",
        "updated_at",
    }


def test_orchestrators_create_projects_and_agents_may_not(client_for, make_key, tenant):
    orchestrator = make_key("orchestrator", tenant)
    assert client_for(orchestrator).post("/api/v1/projects", {"name": "O"}, format="json").status_code == 201
    response = client_for(make_key("agent", tenant)).post("/api/v1/projects", {"name": "A"}, format="json")
    assert response.status_code == 403
    assert response.json() == error(
        403, "forbidden", "This endpoint needs one of the roles: user, orchestrator, superadmin"
    )


def test_duplicate_slug_in_a_tenant_is_409(client_for, user_key, make_key, other_tenant):
    client = client_for(user_key)
    assert client.post("/api/v1/projects", {"name": "Web"}, format="json").status_code == 201
    response = client.post("/api/v1/projects", {"name": "Other", "slug": "web"}, format="json")
    assert response.status_code == 409
    assert response.json() == error(409, "duplicate_slug", "A project with this slug already exists", {"slug": "web"})
    # Slugs are unique per tenant, not globally.
    other = client_for(make_key("user", other_tenant))
    assert other.post("/api/v1/projects", {"name": "Web"}, format="json").status_code == 201


def test_bad_slug_and_repo_url_are_422(client_for, user_key):
    response = client_for(user_key).post(
        "/api/v1/projects", {"name": "X", "slug": "-Bad Slug", "repo_url": "not-a-repo"}, format="json"
    )
    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert set(details) == {"slug", "repo_url"}


def test_list_shows_only_the_callers_tenant_with_paging(client_for, agent_key, tenant, other_tenant):
    for n in range(3):
        ProjectFactory.create(tenant=tenant, slug=f"p{n}")
    ProjectFactory.create(tenant=other_tenant, slug="foreign")
    response = client_for(agent_key).get("/api/v1/projects?limit=2&offset=1")
    assert response.status_code == 200
    body = response.json()
    assert [p["slug"] for p in body["data"]] == ["p1", "p2"]
    assert body["meta"] == {"total_count": 3, "limit": 2, "offset": 1}


def test_list_paging_is_read_leniently_like_the_reference(client_for, agent_key):
    client = client_for(agent_key)
    assert client.get("/api/v1/projects?limit=5000").json()["meta"]["limit"] == 200
    assert client.get("/api/v1/projects?limit=0").json()["meta"]["limit"] == 1
    assert client.get("/api/v1/projects?limit=12abc").json()["meta"]["limit"] == 12
    meta = client.get("/api/v1/projects?limit=abc&offset=-1").json()["meta"]
    assert (meta["limit"], meta["offset"]) == (50, 0)


def test_a_long_name_gets_a_slug_that_fits(client_for, user_key):
    response = client_for(user_key).post("/api/v1/projects", {"name": "n" * 150}, format="json")
    assert response.status_code == 201
    assert response.json()["data"]["slug"] == "n" * 100


def test_a_huge_offset_is_past_the_end_not_an_error(client_for, user_key):
    response = client_for(user_key).get("/api/v1/projects?offset=99999999999999999999")
    assert response.status_code == 200
    assert response.json()["data"] == []
