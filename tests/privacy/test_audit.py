"""The deletion audit: a row for every forget, correction-supersede, erase and oversight delete; never the text;
append-only in the database itself; `audit_log` reads it."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from loopmem.models import DeletionAudit
from loopmem.tenancy.audit import Actor, Removed, audit_hash, audit_record
from loopmem.tenancy.scope import Scope
from memory import services
from memory.models import Memory
from tests.conftest import error
from tests.memory.conftest import remember

TEXT = "The staging database lives on db-7; ask Maria for access."
FIELDS = ("actor_key_id", "actor_role", "action", "table_name", "row_id", "text_hash", "subject_hash", "reason")


def audited() -> list[tuple[object, ...]]:
    return list(DeletionAudit.objects.order_by("id").values_list(*FIELDS))


def holds_no_text(text: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM deletion_audit WHERE deletion_audit::text ILIKE %s", [f"%{text}%"])
        return bool(cursor.fetchone()[0] == 0)


def test_an_agents_forget_is_recorded_with_its_key_and_without_the_text(agent, agent_key):
    memory = remember(agent, TEXT)
    response = agent.delete(f"/api/v1/memory/{memory['id']}")
    assert response.status_code == 200

    assert audited() == [
        (
            agent_key.api_key.id,
            "agent",
            "delete",
            "memories",
            memory["id"],
            audit_hash(TEXT),
            audit_hash("agent-a"),
            "DELETE /api/v1/memory/:id",
        )
    ]
    assert holds_no_text(TEXT)
    assert holds_no_text("db-7")


def test_a_superadmins_forget_under_impersonation_is_recorded_as_superadmin(agent, superadmin_key, client_for):
    memory = remember(agent, TEXT)
    admin = client_for(superadmin_key, impersonate="acme")
    assert admin.delete(f"/api/v1/memory/{memory['id']}").status_code == 200
    [(key_id, role, *_)] = audited()
    assert (key_id, role) == (superadmin_key.api_key.id, "superadmin")


def test_forgetting_what_is_not_there_records_nothing(agent):
    response = agent.delete("/api/v1/memory/7f3e2a1c-5b4d-4e6f-8a9b-0c1d2e3f4a5b")
    assert response.json() == error(404, "not_found", "Not found")
    assert audited() == []


def test_an_oversight_forget_is_recorded_as_the_operator(agent, capsys):
    memory = remember(agent, TEXT)
    call_command("memory_oversight", "forget", "--tenant", "acme", memory["id"], "--json")
    assert json.loads(capsys.readouterr().out) == {"id": memory["id"], "deleted": True}
    assert audited() == [
        (None, "operator", "delete", "memories", memory["id"], audit_hash(TEXT), audit_hash("agent-a"),
         "memory_oversight forget")
    ]  # fmt: skip


def test_a_correction_supersede_is_recorded_once(tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    old = services.memory_remember(scope=scope, text=TEXT)
    new = services.memory_remember(scope=scope, text="The staging database moved to db-9.")
    actor = Actor.system("promotion near-duplicate supersede")

    services.memory_supersede(scope=scope, old_id=str(old.id), new_id=str(new.id), actor=actor)
    services.memory_supersede(scope=scope, old_id=str(old.id), new_id=str(new.id), actor=actor)  # a no-op

    assert audited() == [
        (None, "system", "supersede", "memories", str(old.id), audit_hash(TEXT), audit_hash("agent-a"),
         "promotion near-duplicate supersede")
    ]  # fmt: skip
    assert Memory.objects.get(id=old.id).superseded_by_id == new.id  # superseded rows stay, hidden


def test_the_hash_is_keyed_by_the_deployment_secret():
    key = hashlib.sha256(b"loopmem/deletion-audit/v1:" + settings.SECRET_KEY.encode()).digest()
    assert audit_hash("yes") == hmac.new(key, b"yes", hashlib.sha256).hexdigest()
    assert audit_hash("yes") != hashlib.sha256(b"yes").hexdigest()  # a guess cannot be checked without the secret
    with override_settings(SECRET_KEY="another-deployment"):
        elsewhere = audit_hash("yes")
    assert elsewhere != audit_hash("yes")
    assert audit_hash(None) == ""


def test_the_database_refuses_to_change_or_delete_audit_rows(tenant):
    audit_record(
        tenant_id=tenant.id, actor=Actor.operator("test"), action="delete", rows=[Removed("memories", "m-1", "s", "t")]
    )
    statements = [
        "UPDATE deletion_audit SET text_hash = ''",
        "DELETE FROM deletion_audit",
        "DELETE FROM deletion_audit WHERE false",  # refused even when it would touch nothing
    ]
    for statement in statements:
        with pytest.raises(DatabaseError, match="deletion_audit is append-only"), transaction.atomic():
            connection.cursor().execute(statement)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        DeletionAudit.objects.all().delete()
    assert DeletionAudit.objects.count() == 1


def test_audit_log_reads_a_tenants_rows_since_a_time_and_of_a_subject(tenant, other_tenant, capsys):
    early = DeletionAudit.objects.create(
        tenant_id=tenant.id, actor_role="operator", action="delete", table_name="memories", row_id="m-1",
        reason="erase_subject", subject_hash=audit_hash("s"), recorded_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    late = DeletionAudit.objects.create(
        tenant_id=tenant.id, actor_role="agent", action="delete", table_name="memories", row_id="m-2",
        reason="DELETE /api/v1/memory/:id", subject_hash=audit_hash("t"), text_hash=audit_hash("x"),
        recorded_at=datetime(2026, 2, 1, tzinfo=UTC),
    )  # fmt: skip
    DeletionAudit.objects.create(
        tenant_id=other_tenant.id, actor_role="operator", action="delete", table_name="memories", row_id="m-3",
        reason="erase_subject",
    )  # fmt: skip

    call_command("audit_log", "--tenant", "acme", "--json")
    assert [row["row_id"] for row in json.loads(capsys.readouterr().out)["data"]] == ["m-1", "m-2"]

    call_command("audit_log", "--tenant", "acme", "--since", "2026-01-15", "--json")
    assert json.loads(capsys.readouterr().out) == {
        "data": [
            {
                "id": late.id,
                "recorded_at": "2026-02-01T00:00:00+00:00",
                "actor_key_id": None,
                "actor_role": "agent",
                "action": "delete",
                "table_name": "memories",
                "row_id": "m-2",
                "text_hash": audit_hash("x"),
                "subject_hash": audit_hash("t"),
                "reason": "DELETE /api/v1/memory/:id",
            }
        ],
        "meta": {"total_count": 1, "limit": 200},
    }

    call_command("audit_log", "--tenant", "acme", "--subject", "s")
    human = capsys.readouterr().out
    assert human.splitlines()[-1] == "1 of 1 audit row(s) of acme"
    assert f"{early.recorded_at.isoformat()}  delete" in human
    with pytest.raises(CommandError, match="not an ISO 8601 date"):
        call_command("audit_log", "--tenant", "acme", "--since", "last week")
