"""While a tenant is halted its writes answer 503 `tenant_halted`; reads and superadmin oversight go on."""

from __future__ import annotations

from loopmem.tenancy.services import tenant_halt, tenant_resume
from projects.models import Project
from tests.conftest import error

HALTED = error(
    503, "tenant_halted", "Custody operations are halted for this tenant; reads continue, writes are refused"
)


def test_writes_by_the_halted_tenant_are_503_and_write_nothing(client_for, user_key, tenant):
    tenant_halt(tenant=tenant)
    response = client_for(user_key).post("/api/v1/projects", {"name": "During halt"}, format="json")
    assert response.status_code == 503
    assert response.json() == HALTED
    assert not Project.objects.filter(name="During halt").exists()


def test_reads_by_the_halted_tenant_go_on(client_for, user_key, tenant):
    tenant_halt(tenant=tenant)
    assert client_for(user_key).get("/api/v1/projects").status_code == 200
    assert client_for(user_key).get("/api/v1/projects/resolve?slug=none").status_code == 404


def test_superadmin_oversight_is_never_frozen(client_for, superadmin_key, tenant):
    tenant_halt(tenant=tenant)
    response = client_for(superadmin_key, impersonate="acme").post("/api/v1/projects", {"name": "Ops"}, format="json")
    assert response.status_code == 201


def test_other_tenants_are_unaffected(client_for, make_key, tenant, other_tenant):
    tenant_halt(tenant=tenant)
    other_user = make_key("user", other_tenant)
    assert client_for(other_user).post("/api/v1/projects", {"name": "Fine"}, format="json").status_code == 201


def test_resume_lifts_the_halt(client_for, user_key, tenant):
    tenant_halt(tenant=tenant)
    tenant_resume(tenant=tenant)
    assert client_for(user_key).post("/api/v1/projects", {"name": "After"}, format="json").status_code == 201
