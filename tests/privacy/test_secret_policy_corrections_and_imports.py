"""The secret policy on the writes beyond remember: a correction (PATCH) and an import refuse or redact like any
write, and a correction's superseded version is on the deletion audit."""

from __future__ import annotations

import json

import pytest

from loopmem.models import DeletionAudit, SecretPolicy
from loopmem.secret_guard.scan import scan
from loopmem.tenancy.services import tenant_set_policy
from memory.models import Memory
from tests.conftest import error
from tests.secret_corpus import SECRET_DETECTED_MESSAGE, rand

pytestmark = pytest.mark.django_db

AWS = "AK" + "IA" + rand("correction-aws", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
TEXT = f"CI deploys with {AWS}."


def remember(agent, text="the deploy key lives in the vault"):
    return agent.post("/api/v1/memory", {"text": text}, format="json").json()["data"]


def test_a_correction_with_a_secret_is_refused_and_changes_nothing(agent):
    memory = remember(agent)
    response = agent.patch(f"/api/v1/memory/{memory['id']}", {"text": TEXT}, format="json")
    spans = [[f.start, f.end] for f in scan(TEXT)]
    assert response.json() == error(
        422, "secret_detected", SECRET_DETECTED_MESSAGE, {"kinds": ["aws_access_key"], "spans": {"text": spans}}
    )
    assert list(Memory.objects.values_list("text", "superseded_by")) == [(memory["text"], None)]


def test_a_redacting_tenant_stores_the_correction_redacted_and_says_so(agent, tenant):
    tenant_set_policy(tenant=tenant, secrets=SecretPolicy.REDACT)
    memory = remember(agent)
    body = agent.patch(f"/api/v1/memory/{memory['id']}", {"text": TEXT}, format="json").json()
    assert body["data"]["text"] == "CI deploys with [REDACTED:aws_access_key]."
    assert body["meta"]["redacted"]["kinds"] == ["aws_access_key"]
    assert not Memory.objects.filter(text__contains=AWS).exists()


def test_a_correction_puts_the_superseded_version_on_record_without_its_text(agent, agent_key):
    memory = remember(agent)
    agent.patch(f"/api/v1/memory/{memory['id']}", {"text": "the deploy key lives in the HSM"}, format="json")
    [row] = DeletionAudit.objects.all()
    assert (str(row.row_id), row.action, row.actor_key_id, row.reason) == (
        memory["id"],
        DeletionAudit.Action.SUPERSEDE,
        agent_key.api_key.id,
        "PATCH /api/v1/memory/:id",
    )
    assert memory["text"] not in json.dumps(list(DeletionAudit.objects.values()), default=str)


def test_an_import_line_with_a_secret_refuses_the_import_naming_the_line(agent):
    lines = [json.dumps({"text": "fine"}), json.dumps({"text": TEXT})]
    response = agent.generic(
        "POST", "/api/v1/memory/import", "\n".join(lines).encode(), content_type="application/x-ndjson"
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "secret_detected"
    assert response.json()["error"]["details"]["line"] == 2
    assert not Memory.objects.exists()
