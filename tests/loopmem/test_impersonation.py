"""X-Impersonate-Tenant: superadmin only, by id or slug; without it tenant-scoped endpoints refuse."""

from __future__ import annotations

from loopmem.errors import ImpersonationTenantRequired
from tests.conftest import error
from tests.factories import ProjectFactory


def test_superadmin_impersonates_a_tenant_by_slug(client_for, superadmin_key, tenant, other_tenant):
    ProjectFactory.create(tenant=tenant, slug="mine")
    ProjectFactory.create(tenant=other_tenant, slug="theirs")
    response = client_for(superadmin_key, impersonate="acme").get("/api/v1/projects")
    assert response.status_code == 200
    assert [p["slug"] for p in response.json()["data"]] == ["mine"]


def test_superadmin_impersonates_a_tenant_by_id(client_for, superadmin_key, other_tenant):
    ProjectFactory.create(tenant=other_tenant, slug="theirs")
    response = client_for(superadmin_key, impersonate=str(other_tenant.id)).get("/api/v1/projects")
    assert [p["slug"] for p in response.json()["data"]] == ["theirs"]


def test_superadmin_without_impersonation_is_422(client_for, superadmin_key, tenant):
    response = client_for(superadmin_key).get("/api/v1/projects")
    assert response.status_code == 422
    assert response.json() == error(422, "impersonation_tenant_required", ImpersonationTenantRequired.default_message)


def test_impersonating_an_unknown_tenant_is_422(client_for, superadmin_key):
    response = client_for(superadmin_key, impersonate="nope").get("/api/v1/projects")
    assert response.status_code == 422
    assert response.json() == error(
        422, "impersonation_tenant_not_found", "X-Impersonate-Tenant names no tenant (give its id or slug)"
    )


def test_non_superadmin_cannot_impersonate(client_for, agent_key, user_key, other_tenant):
    for issued in (agent_key, user_key):
        response = client_for(issued, impersonate="globex").get("/api/v1/projects")
        assert response.status_code == 403
        assert response.json() == error(403, "forbidden", "X-Impersonate-Tenant is for superadmin keys only")


def test_tenant_id_in_a_body_is_ignored(client_for, user_key, tenant, other_tenant):
    response = client_for(user_key).post(
        "/api/v1/projects",
        {"name": "Sneaky", "tenant_id": str(other_tenant.id), "subject_id": "x", "scope": {"tenant_id": "y"}},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["data"]["tenant_id"] == str(tenant.id)
