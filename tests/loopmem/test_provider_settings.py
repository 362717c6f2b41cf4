"""Tenant provider settings: API keys encrypted at rest, never printed."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db import connection

from loopmem.crypto import decrypt
from loopmem.errors import ValidationFailed
from loopmem.models import Tenant
from loopmem.tenancy.services import tenant_set_provider


def test_provider_api_keys_are_encrypted_at_rest(tenant):
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_api_key="sk-secret-embed", llm_api_key="sk-llm")
    with connection.cursor() as cursor:
        cursor.execute("SELECT embedding_api_key, llm_api_key FROM tenants WHERE id = %s", [tenant.id])
        stored_embed, stored_llm = cursor.fetchone()
    assert "sk-secret-embed" not in stored_embed
    assert decrypt(stored_embed) == "sk-secret-embed"
    assert decrypt(stored_llm) == "sk-llm"
    fresh = Tenant.objects.get(id=tenant.id)
    assert (fresh.embedding_provider, fresh.embedding_api_key, fresh.llm_api_key) == (
        "openai",
        "sk-secret-embed",
        "sk-llm",
    )


def test_unchanged_fields_are_kept_and_empty_clears(tenant):
    tenant_set_provider(tenant=tenant, embedding_api_key="sk-1", embedding_model="m1")
    tenant_set_provider(tenant=tenant, embedding_model="m2")
    fresh = Tenant.objects.get(id=tenant.id)
    assert (fresh.embedding_api_key, fresh.embedding_model) == ("sk-1", "m2")
    tenant_set_provider(tenant=tenant, embedding_api_key="")
    assert Tenant.objects.get(id=tenant.id).embedding_api_key == ""


def test_unknown_provider_is_refused(tenant):
    with pytest.raises(ValidationFailed) as caught:
        tenant_set_provider(tenant=tenant, embedding="nonsense")
    assert "embedding" in caught.value.details


def test_the_command_never_prints_a_key(tenant, capsys):
    call_command(
        "set_tenant_provider", "--tenant", "acme", "--llm", "openai", "--llm-api-key", "sk-very-secret", "--json"
    )
    out = capsys.readouterr().out
    assert "sk-very-secret" not in out
    assert json.loads(out)["llm_api_key_set"] is True
