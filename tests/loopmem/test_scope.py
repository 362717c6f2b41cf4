"""Subject derivation (reference §4.1) and scope construction from the key, never from a request."""

from __future__ import annotations

import uuid

import pytest

from loopmem.errors import ImpersonationTenantRequired, SubjectIdUnresolvable
from loopmem.models import ApiKey, Tenant
from loopmem.tenancy.principal import Principal
from loopmem.tenancy.scope import Scope, scope_for, subject_id_for

KEY_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")


@pytest.mark.parametrize(
    ("role", "agent_id", "expected"),
    [
        ("agent", "bot-7", "bot-7"),  # every rotated key of one agent shares its memory
        ("agent", None, str(KEY_ID)),  # an agent key without agent_id falls back to its own id
        ("agent", "", str(KEY_ID)),
        ("orchestrator", "bot-7", str(KEY_ID)),  # only the agent role maps to agent_id
        ("user", None, str(KEY_ID)),
        ("superadmin", None, str(KEY_ID)),
    ],
)
def test_subject_id_derivation_table(role, agent_id, expected):
    assert subject_id_for(ApiKey(id=KEY_ID, role=role, agent_id=agent_id)) == expected


def test_a_key_without_id_has_no_subject():
    with pytest.raises(SubjectIdUnresolvable) as caught:
        subject_id_for(ApiKey(id=None, role="user"))
    assert caught.value.status == 422
    assert caught.value.code == "subject_id_unresolvable"


def test_scope_comes_from_the_key_and_its_tenant():
    tenant = Tenant(id=uuid.uuid4(), slug="t")
    key = ApiKey(id=KEY_ID, role="agent", agent_id="bot-7", tenant=tenant)
    project_id = uuid.uuid4()
    assert scope_for(Principal(api_key=key, tenant=tenant), project_id=project_id, session_id="s1") == Scope(
        tenant_id=tenant.id, subject_id="bot-7", project_id=project_id, session_id="s1"
    )


def test_impersonating_superadmin_scope_is_the_target_tenant_and_its_own_subject():
    target = Tenant(id=uuid.uuid4(), slug="target")
    key = ApiKey(id=KEY_ID, role="superadmin", tenant=None)
    scope = scope_for(Principal(api_key=key, tenant=target, impersonating=True))
    assert (scope.tenant_id, scope.subject_id) == (target.id, str(KEY_ID))


def test_superadmin_without_impersonation_has_no_scope():
    key = ApiKey(id=KEY_ID, role="superadmin", tenant=None)
    with pytest.raises(ImpersonationTenantRequired):
        scope_for(Principal(api_key=key, tenant=None))
