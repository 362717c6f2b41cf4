"""Keys: only the hash is stored, the raw key is shown once, and the database holds the role rules."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from loopmem.errors import Conflict, ValidationFailed
from loopmem.models import ApiKey
from loopmem.tenancy.services import api_key_create, api_key_revoke


def _all_key_columns_text() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(k)::text FROM api_keys k")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_only_the_sha256_of_the_key_is_stored(agent_key):
    stored = ApiKey.objects.get(id=agent_key.api_key.id)
    assert stored.key_hash == hashlib.sha256(agent_key.raw_key.encode()).hexdigest()
    assert agent_key.raw_key not in _all_key_columns_text()
    assert agent_key.raw_key.startswith(stored.key_prefix)


def test_create_api_key_command_prints_the_key_once(tenant, capsys):
    call_command("create_api_key", "--role", "user", "--tenant", "acme", "--json")
    printed = json.loads(capsys.readouterr().out)
    raw = printed["key"]
    assert printed["role"] == "user"
    assert printed["tenant_id"] == str(tenant.id)
    assert raw not in _all_key_columns_text()
    # Nothing afterwards can show it again: revoke prints only id and time.
    call_command("revoke_api_key", printed["id"], "--json")
    assert raw not in capsys.readouterr().out


def test_no_api_response_carries_key_material(client_for, user_key):
    response = client_for(user_key).get("/api/v1/projects")
    assert user_key.raw_key not in response.content.decode()
    assert user_key.api_key.key_hash not in response.content.decode()


@pytest.mark.django_db
def test_agent_and_orchestrator_keys_need_an_agent_id(tenant):
    for role in ("agent", "orchestrator"):
        with pytest.raises(ValidationFailed) as caught:
            api_key_create(role=role, tenant=tenant, agent_id=None)
        assert caught.value.details == {"agent_id": ["required for agent and orchestrator keys"]}
    # The database refuses it too, whatever writes the row.
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.create(tenant=tenant, role="agent", agent_id="", key_hash="a" * 64, key_prefix="x")


@pytest.mark.django_db
def test_superadmin_keys_are_tenant_less_and_others_are_not(tenant):
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.create(tenant=tenant, role="superadmin", key_hash="b" * 64, key_prefix="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.create(tenant=None, role="user", key_hash="c" * 64, key_prefix="x")


def test_role_is_immutable_in_the_database(user_key):
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        ApiKey.objects.filter(id=user_key.api_key.id).update(role="superadmin")
    user_key.api_key.refresh_from_db()
    assert user_key.api_key.role == "user"


def test_one_live_key_per_agent_and_role_rotation_is_revoke_then_create(tenant, make_key):
    first = make_key("agent", tenant, agent_id="bot")
    with pytest.raises(Conflict):
        make_key("agent", tenant, agent_id="bot")
    api_key_revoke(key_id=str(first.api_key.id))
    second = make_key("agent", tenant, agent_id="bot")
    assert second.api_key.id != first.api_key.id


def test_revoke_is_idempotent(user_key):
    first = api_key_revoke(key_id=str(user_key.api_key.id)).revoked_at
    assert api_key_revoke(key_id=str(user_key.api_key.id)).revoked_at == first
