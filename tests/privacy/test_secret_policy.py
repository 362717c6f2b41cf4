"""The tenant's secret policy on the write paths: refuse (the default), redact (meta.redacted) or allow; and what
is logged."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.models import Article, ArticleAccessEvent
from loopmem.models import SecretPolicy, Tenant
from loopmem.secret_guard.policy import apply_secret_policy, find_secrets
from loopmem.secret_guard.scan import scan
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_policy
from memory import graduation
from memory import services as memory_services
from memory.models import Memory, SessionTurn
from tests.conftest import error
from tests.factories import embedded_article
from tests.memory.conftest import embed_pending, heavy_db
from tests.secret_corpus import ALNUM, SECRET_DETECTED_MESSAGE, rand

# Fakes of the right shape, prefixes joined at run time (see tests/secret_corpus.py).
AWS = "AK" + "IA" + rand("policy-aws", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
STRIPE = "sk" + "_live_" + rand("policy-stripe", ALNUM, 24)
PASSWORD = "Kp9#vQ2mZx"
TEXT = f"Deploy with {AWS} and charge with {STRIPE}."


def refused(details: dict[str, Any]) -> dict[str, Any]:
    return error(422, "secret_detected", SECRET_DETECTED_MESSAGE, details)


def spans(text: str) -> list[list[int]]:
    return [[f.start, f.end] for f in scan(text)]


@pytest.fixture
def redacting(tenant: Tenant) -> Tenant:
    return tenant_set_policy(tenant=tenant, secrets=SecretPolicy.REDACT)


# --- refuse (the default) -------------------------------------------------------------------------------------


def test_a_new_tenant_refuses_secrets(tenant):
    assert Tenant.objects.get(id=tenant.id).secret_policy == "refuse"


def test_refusal_names_each_field_and_kind_and_writes_nothing(agent, sent_tasks):
    metadata = {"env": {"password": PASSWORD}, "count": 3}
    response = agent.post("/api/v1/memory", {"text": TEXT, "tags": ["ci", STRIPE], "metadata": metadata}, format="json")

    assert response.status_code == 422
    assert response.json() == refused(
        {
            "kinds": ["aws_access_key", "password", "stripe_key"],
            "spans": {
                "text": spans(TEXT),
                "tags": spans(json.dumps(["ci", STRIPE])),
                "metadata": spans(json.dumps(metadata)),  # offsets into json.dumps(value, ensure_ascii=False)
            },
        }
    )
    body = response.content.decode()
    assert AWS not in body
    assert STRIPE not in body
    assert PASSWORD not in body
    assert not Memory.objects.exists()
    assert sent_tasks == []  # nothing enqueued for embedding


def test_a_session_turn_is_refused_on_its_content_and_metadata(agent):
    body = {"tier": "session", "session_id": "s-1", "role": "user", "content": "ok", "metadata": {"key": STRIPE}}
    response = agent.post("/api/v1/memory", body, format="json")

    assert response.json() == refused(
        {"kinds": ["stripe_key"], "spans": {"metadata": spans(json.dumps({"key": STRIPE}))}}
    )
    assert not SessionTurn.objects.exists()


def test_neither_a_refused_nor_a_redacted_secret_reaches_the_logs(agent, tenant, caplog):
    with caplog.at_level(logging.DEBUG):
        agent.post("/api/v1/memory", {"text": TEXT}, format="json")
        tenant_set_policy(tenant=tenant, secrets=SecretPolicy.REDACT)
        agent.post("/api/v1/memory", {"text": TEXT}, format="json")

    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    assert "secret_detected policy=refuse" in logged
    assert "secret_detected policy=redact" in logged
    assert AWS not in logged
    assert STRIPE not in logged


@heavy_db
def test_an_article_patch_is_refused_and_leaves_the_article_as_it_was(agent):
    created = agent.post(
        "/api/v1/knowledge/articles",
        {"title": "Runbook", "body": "Restart the web tier.", "category": "pattern"},
        format="json",
    ).json()["data"]["article"]
    response = agent.patch(f"/api/v1/knowledge/articles/{created['id']}", {"body": TEXT}, format="json")

    assert response.json() == refused({"kinds": ["aws_access_key", "stripe_key"], "spans": {"body": spans(TEXT)}})
    assert Article.objects.get(id=created["id"]).body == "Restart the web tier."


# --- redact ---------------------------------------------------------------------------------------------------


def test_redacted_memories_are_stored_and_embedded_without_the_secret(agent, redacting, recording_embedder):
    metadata = {"env": {"password": PASSWORD}, "count": 3}
    response = agent.post("/api/v1/memory", {"text": TEXT, "metadata": metadata}, format="json")

    assert response.status_code == 201
    body = response.json()
    clean = "Deploy with [REDACTED:aws_access_key] and charge with [REDACTED:stripe_key]."
    assert (body["data"]["text"], body["data"]["metadata"]) == (
        clean,
        {"env": {"password": "[REDACTED:password]"}, "count": 3},
    )
    assert body["meta"] == {
        "redacted": {
            "kinds": ["aws_access_key", "password", "stripe_key"],
            "spans": {"text": spans(TEXT), "metadata": spans(json.dumps(metadata))},
        }
    }
    assert set(body) == {"data", "meta"}
    assert Memory.objects.get().text == clean
    embed_pending()
    assert recording_embedder.texts == [clean]


def test_a_redacted_session_turn_carries_meta_redacted(agent, redacting):
    body = {"tier": "session", "session_id": "s-1", "role": "fact", "content": TEXT}
    response = agent.post("/api/v1/memory", body, format="json")

    assert response.status_code == 201
    assert response.json()["meta"] == {
        "redacted": {"kinds": ["aws_access_key", "stripe_key"], "spans": {"content": spans(TEXT)}}
    }
    assert SessionTurn.objects.get().content == (
        "Deploy with [REDACTED:aws_access_key] and charge with [REDACTED:stripe_key]."
    )


def test_without_a_secret_the_envelope_is_unchanged_under_redact(agent, redacting):
    response = agent.post("/api/v1/memory", {"text": "Deploys need a green canary."}, format="json")
    assert set(response.json()) == {"data"}


@heavy_db
def test_redacted_articles_answer_with_meta_redacted_on_create_and_patch(agent, redacting, recording_embedder):
    response = agent.post(
        "/api/v1/knowledge/articles", {"title": "Keys", "body": TEXT, "category": "reference"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["meta"] == {
        "redacted": {"kinds": ["aws_access_key", "stripe_key"], "spans": {"body": spans(TEXT)}}
    }
    article = Article.objects.get()
    assert AWS not in article.body
    assert STRIPE not in article.body
    assert recording_embedder.saw([AWS, STRIPE]) == []  # the novelty gate embedded the redacted text

    title = f"password={PASSWORD}"
    patched = agent.patch(f"/api/v1/knowledge/articles/{article.id}", {"title": title}, format="json")
    assert patched.status_code == 200
    assert patched.json()["data"]["title"] == "password=[REDACTED:password]"
    assert patched.json()["meta"] == {"redacted": {"kinds": ["password"], "spans": {"title": spans(title)}}}


# --- allow ----------------------------------------------------------------------------------------------------


def test_allow_stores_the_text_as_sent_with_no_meta(agent, tenant):
    tenant_set_policy(tenant=tenant, secrets=SecretPolicy.ALLOW)
    response = agent.post("/api/v1/memory", {"text": TEXT}, format="json")
    assert response.status_code == 201
    assert set(response.json()) == {"data"}
    assert Memory.objects.get().text == TEXT


# --- promotion, graduation and the ledger, whatever the policy ------------------------------------------------


@heavy_db
def test_the_graduation_sweep_counts_a_memory_holding_a_secret_and_stamps_it(tenant):
    tenant_set_policy(tenant=tenant, secrets=SecretPolicy.ALLOW)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    memory = memory_services.memory_remember(scope=scope, text=TEXT)
    Memory.objects.filter(id=memory.id).update(recall_count=10)

    tally = graduation.memory_graduation_sweep()

    assert (tally["candidates"], tally["secret_detected"], tally["graduated"]) == (1, 1, 0)
    assert Memory.objects.get(id=memory.id).graduated_at is not None  # not proposed again every hour
    assert not Article.objects.exists()


@heavy_db
def test_the_access_ledger_keeps_a_searched_secret_redacted(agent, tenant):
    embedded_article(tenant, "Deploy runbook", "How we deploy the web tier.")
    response = agent.get("/api/v1/knowledge/search", {"q": f"deploy with {AWS}"})
    assert response.status_code == 200

    [event] = ArticleAccessEvent.objects.all()
    assert event.metadata["query"] == "deploy with [REDACTED:aws_access_key]"


# --- the policy function and the command ---------------------------------------------------------------------


def test_json_values_are_redacted_string_by_string_keeping_their_structure(tenant):
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx"
        + rand("pem", ALNUM, 40)
        + "\n-----END RSA PRIVATE KEY-----"
    )
    value: dict[str, Any] = {
        "notes": ["ok", 3, None, True, {"dsn": "postgres://app:S3cr3tPw!x@db/app"}],
        "key": pem + "\nafter",
        STRIPE: "a key as a key",
        'quote"d': "plain",
    }
    clean = apply_secret_policy(tenant, {"metadata": value}, policy=SecretPolicy.REDACT)

    assert clean == {
        "metadata": {
            "notes": ["ok", 3, None, True, {"dsn": "postgres://app:[REDACTED:url_password]@db/app"}],
            "key": "[REDACTED:private_key]\nafter",
            "[REDACTED:stripe_key]": "a key as a key",
            'quote"d': "plain",
        }
    }
    assert value["key"].startswith("-----BEGIN")  # the caller's value is not mutated


def test_two_keys_redacted_alike_are_both_kept(tenant):
    other = "sk" + "_live_" + rand("policy-stripe-2", ALNUM, 24)
    clean = apply_secret_policy(tenant, {"m": {STRIPE: 1, other: 2}}, policy=SecretPolicy.REDACT)
    assert clean == {"m": {"[REDACTED:stripe_key]": 1, "[REDACTED:stripe_key]'": 2}}


def test_find_secrets_skips_absent_fields_and_reports_offsets_only():
    report = find_secrets({"text": TEXT, "tags": None})
    assert report.details() == {"kinds": ["aws_access_key", "stripe_key"], "spans": {"text": spans(TEXT)}}


def test_set_tenant_policy_sets_and_prints_the_policy(tenant, capsys):
    call_command("set_tenant_policy", "--tenant", "acme", "--secrets", "redact", "--json")
    assert json.loads(capsys.readouterr().out) == {
        "tenant_id": str(tenant.id),
        "slug": "acme",
        "secret_policy": "redact",
    }
    assert Tenant.objects.get(id=tenant.id).secret_policy == "redact"
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("set_tenant_policy", "--tenant", "acme", "--secrets", "sometimes")
    with pytest.raises(CommandError, match="not_found"):
        call_command("set_tenant_policy", "--tenant", "nobody", "--secrets", "allow")


# --- projects: a repo URL is where a token most often rides along ---------------------------------------------

TOKEN = "gh" + "p_" + rand("policy-github", ALNUM, 36)
REPO_URL = f"https://x-token:{TOKEN}@github.com/acme/shop.git"


def test_a_project_whose_repo_url_carries_a_token_is_refused(client_for, user_key):
    user = client_for(user_key)
    response = user.post("/api/v1/projects", {"name": "Shop", "repo_url": REPO_URL}, format="json")

    assert response.json() == refused(
        {"kinds": sorted({f.kind for f in scan(REPO_URL)}), "spans": {"repo_url": spans(REPO_URL)}}
    )
    assert TOKEN not in response.content.decode()
    assert user.get("/api/v1/projects").json()["meta"]["total_count"] == 0


def test_a_redacted_project_keeps_its_repository_reference(client_for, user_key, redacting):
    response = client_for(user_key).post("/api/v1/projects", {"name": "Shop", "repo_url": REPO_URL}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert TOKEN not in body["data"]["repo_url"]
    assert body["data"]["repo_url"].endswith("@github.com/acme/shop.git")
    assert body["meta"]["redacted"]["spans"] == {"repo_url": spans(REPO_URL)}
    resolved = client_for(user_key).get("/api/v1/projects/resolve", {"repo_url": "acme/shop"})
    assert resolved.json()["data"]["id"] == body["data"]["id"]
