"""GET /api/v1/projects/resolve (reference §2.10, DESIGN §10)."""

from __future__ import annotations

import pytest

from tests.conftest import error
from tests.factories import ProjectFactory


@pytest.fixture
def web(tenant):
    return ProjectFactory.create(
        tenant=tenant, name="Web App", slug="web-app", repo_url="git@github.com:Acme/Web-App.git"
    )


@pytest.fixture
def resolve(client_for, agent_key):
    client = client_for(agent_key)

    def call(query: str):
        return client.get(f"/api/v1/projects/resolve?{query}")

    return call


def _resolved_id(response):
    assert response.status_code == 200, response.json()
    return response.json()["data"]["id"]


@pytest.mark.parametrize(
    "query",
    [
        "slug=web-app",
        "slug=WEB-APP",
        "repo_url=git@github.com:acme/web-app.git",
        "repo_url=https://github.com/Acme/Web-App",
        "repo_url=https://github.com/acme/web-app.git",
        "repo_url=https://github.com/acme/web-app/",
        "repo_url=acme/web-app",
        "repo_url=ACME/Web-App",
        "name=Web App",
        "name=web app",
    ],
)
def test_each_identifier_form_resolves(resolve, web, query):
    assert _resolved_id(resolve(query)) == str(web.id)


def test_a_project_stored_as_bare_owner_repo_resolves_from_a_full_url(resolve, tenant):
    bare = ProjectFactory.create(tenant=tenant, slug="bare", repo_url="acme/tools")
    assert _resolved_id(resolve("repo_url=https://gitlab.com/acme/tools.git")) == str(bare.id)


def test_slug_wins_over_repo_url_and_name(resolve, tenant, web):
    other = ProjectFactory.create(tenant=tenant, name="Other", slug="other", repo_url="acme/other")
    assert _resolved_id(resolve("slug=other&repo_url=acme/web-app&name=Web App")) == str(other.id)
    assert _resolved_id(resolve("repo_url=acme/other&name=Web App")) == str(other.id)


def test_a_non_matching_slug_falls_through_to_repo_url_then_name(resolve, web):
    assert _resolved_id(resolve("slug=nope&repo_url=acme/web-app")) == str(web.id)
    assert _resolved_id(resolve("slug=nope&repo_url=acme/nope&name=Web App")) == str(web.id)


def test_empty_parameters_count_as_absent(resolve, web):
    assert _resolved_id(resolve("slug=&repo_url=&name=Web App")) == str(web.id)


def test_no_identifier_is_422(resolve, web):
    for query in ("", "slug=&name=%20"):
        response = resolve(query)
        assert response.status_code == 422
        assert response.json() == error(422, "no_identifier", "Give one of slug, repo_url or name")


def test_nothing_matching_is_404(resolve, web):
    response = resolve("slug=missing&name=Missing")
    assert response.status_code == 404
    assert response.json() == error(404, "not_found", "No project matches the given identifiers")


def test_another_tenants_project_is_not_found(resolve, other_tenant):
    ProjectFactory.create(tenant=other_tenant, name="Secret", slug="secret", repo_url="globex/secret")
    for query in ("slug=secret", "name=Secret", "repo_url=globex/secret"):
        assert resolve(query).status_code == 404


def test_a_fuzzy_identifier_matching_two_active_projects_is_409(resolve, tenant):
    a = ProjectFactory.create(tenant=tenant, name="Shared", slug="shared-a", repo_url="https://github.com/acme/lib")
    b = ProjectFactory.create(tenant=tenant, name="Shared", slug="shared-b", repo_url="https://gitlab.com/acme/lib")
    for query in ("name=Shared", "repo_url=acme/lib"):
        response = resolve(query)
        assert response.status_code == 409
        body = response.json()["error"]
        assert (body["code"], body["status"]) == ("ambiguous_resolution", 409)
        assert sorted(body["details"]["candidates"]) == sorted([str(a.id), str(b.id)])
        assert body["details"]["identifier"] == query.split("=")[0]
    # A host-qualified URL is exact, so it is not ambiguous.
    assert _resolved_id(resolve("repo_url=git@gitlab.com:acme/lib.git")) == str(b.id)


def test_an_archived_twin_does_not_make_a_name_ambiguous(resolve, tenant):
    ProjectFactory.create(tenant=tenant, name="Twin", slug="twin-old", status="archived")
    live = ProjectFactory.create(tenant=tenant, name="Twin", slug="twin-new")
    assert _resolved_id(resolve("name=Twin")) == str(live.id)


def test_an_archived_project_still_resolves_by_slug(resolve, tenant):
    old = ProjectFactory.create(tenant=tenant, name="Old", slug="old", status="archived")
    assert _resolved_id(resolve("slug=old")) == str(old.id)
