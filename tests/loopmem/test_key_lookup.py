"""The bearer key's precompiled lookup answers what the ORM would, in one statement."""

from __future__ import annotations

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from loopmem.models import ApiKey
from loopmem.tenancy.key_lookup import key_with_tenant
from loopmem.tenancy.principal import hash_key
from loopmem.tenancy.services import tenant_set_provider

pytestmark = pytest.mark.django_db


def _as_orm_loads(key_hash: str) -> ApiKey:
    return ApiKey.objects.select_related("tenant").get(key_hash=key_hash)


def test_an_agent_key_and_its_tenant_load_as_through_the_orm(agent_key, tenant):
    tenant.rate_limit_requests_per_minute = 77
    tenant.save()
    tenant_set_provider(tenant=tenant, embedding_api_key="sk-embed-secret", llm_api_key="sk-llm-secret")
    key_hash = hash_key(agent_key.raw_key)
    with CaptureQueriesContext(connection) as queries:
        loaded = key_with_tenant(key_hash)
        assert loaded is not None
        loaded_tenant = loaded.tenant
    assert len(queries) == 1  # the tenant came with the key
    expected = _as_orm_loads(key_hash)
    assert model_to_dict(loaded) == model_to_dict(expected)
    assert loaded.inserted_at == expected.inserted_at
    assert loaded.last_used_at == expected.last_used_at
    assert loaded_tenant is not None
    assert expected.tenant is not None
    assert {f.attname: getattr(loaded_tenant, f.attname) for f in tenant._meta.concrete_fields} == {
        f.attname: getattr(expected.tenant, f.attname) for f in tenant._meta.concrete_fields
    }
    assert loaded_tenant.embedding_api_key == "sk-embed-secret"  # decrypted, as the field's converter does
    assert loaded_tenant.rate_limit_per_minute == 77
    assert loaded._state.adding is False
    assert loaded._state.db == "default"


def test_a_superadmin_key_has_no_tenant(superadmin_key):
    loaded = key_with_tenant(hash_key(superadmin_key.raw_key))
    assert loaded is not None
    assert loaded.role == ApiKey.Role.SUPERADMIN
    with CaptureQueriesContext(connection) as queries:
        assert loaded.tenant is None
    assert len(queries) == 0


def test_an_unknown_hash_is_none(agent_key):
    assert key_with_tenant(hash_key(agent_key.raw_key + "x")) is None
