"""POST /api/v1/knowledge/articles: defaults, validation, duplicate titles, idempotency, halt, auth (DESIGN §10)."""

from __future__ import annotations

import uuid

import pytest

from knowledge.models import Article
from loopmem.errors import DuplicateTitle, ImpersonationTenantRequired, InvalidProjectId, TenantHalted
from loopmem.tenancy.services import tenant_halt
from tests.conftest import error
from tests.factories import ArticleFactory, ProjectFactory
from tests.knowledge.conftest import MISSING_KEY, MODEL, create, heavy_db, propose

pytestmark = heavy_db

SUMMARY_KEYS = {
    "id",
    "tenant_id",
    "project_id",
    "title",
    "category",
    "status",
    "tags",
    "visibility",
    "owner_subject_id",
    "metadata",
    "idempotency_key",
    "inserted_at",
    "updated_at",
}


def test_a_user_creates_a_shared_draft_it_owns(user, user_key, tenant):
    response = propose(user, title="Blue-green deploys", body="Flip the router after the smoke test.", tags=["Ops"])
    assert response.status_code == 201
    data = response.json()["data"]
    assert (data["verdict"], data["created"]) == ("created", True)
    article = data["article"]
    assert set(article) == SUMMARY_KEYS  # a summary: no body, never the vector
    assert article["title"] == "Blue-green deploys"
    assert (article["status"], article["visibility"]) == ("draft", "shared")
    assert article["owner_subject_id"] == str(user_key.api_key.id)
    assert (article["tenant_id"], article["project_id"], article["tags"]) == (str(tenant.id), None, ["ops"])


def test_an_agent_creates_an_owner_visible_article_by_default(agent):
    article = create(agent, title="My finding", body="x", status="published")
    assert (article["visibility"], article["owner_subject_id"], article["status"]) == ("owner", "agent-a", "published")


def test_an_agent_may_share_explicitly_and_nobody_can_set_the_owner(agent):
    article = create(agent, visibility="shared", owner_subject_id="someone-else", tenant_id=str(uuid.uuid4()))
    assert (article["visibility"], article["owner_subject_id"]) == ("shared", "agent-a")


def test_the_gate_vector_is_stored_so_no_embedding_task_is_needed(user):
    article = create(user, title="Cache keys", body="Prefix every cache key with the tenant id.")
    row = Article.objects.get(id=article["id"])
    assert row.embedding is not None
    assert row.embedding_model == MODEL
    assert row.embedding_content_hash is not None


def test_the_title_is_trimmed_and_metadata_kept(user):
    article = create(user, title="  Spaced  ", metadata={"source": "retro"}, idempotency_key="k-1")
    assert (article["title"], article["metadata"], article["idempotency_key"]) == ("Spaced", {"source": "retro"}, "k-1")


def test_an_article_can_belong_to_a_project_of_the_tenant(user, tenant):
    project = ProjectFactory.create(tenant=tenant)
    assert create(user, project_id=str(project.id))["project_id"] == str(project.id)
    assert create(user, title="global", project_id="  ")["project_id"] is None


def test_a_foreign_or_unknown_project_is_422(user, other_tenant):
    for project_id in (str(ProjectFactory.create(tenant=other_tenant).id), str(uuid.uuid4())):
        response = propose(user, project_id=project_id)
        assert response.status_code == 422
        assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_a_malformed_project_id_is_422_before_anything_else(client_for, superadmin_key):
    response = propose(client_for(superadmin_key), project_id="nope", title="")
    assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_missing_fields_are_422_listing_each(user):
    response = user.post("/api/v1/knowledge/articles", {}, format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422,
        "validation_failed",
        "Validation failed",
        {
            "title": ["This field is required."],
            "body": ["This field is required."],
            "category": ["This field is required."],
        },
    )


def test_bad_choices_are_422(user):
    response = propose(user, category="rumour", status="archived", visibility="everyone", on_low_novelty="ignore")
    assert response.json() == error(
        422,
        "validation_failed",
        "Validation failed",
        {
            "category": ['"rumour" is not a valid choice.'],
            "status": ['"archived" is not a valid choice.'],
            "visibility": ['"everyone" is not a valid choice.'],
            "on_low_novelty": ['"ignore" is not a valid choice.'],
        },
    )


def test_domain_rules_are_422(user):
    response = propose(user, title="t" * 501, body="b" * 100_001, tags=["no spaces please"], idempotency_key="k" * 201)
    assert response.status_code == 422
    assert response.json() == error(
        422,
        "validation_failed",
        "Validation failed",
        {
            "title": ["at most 500 characters (got 501)"],
            "body": ["exceeds maximum size of 100000 bytes (got 100001)"],
            "idempotency_key": ["at most 200 characters"],
            "tags": [
                "each tag must match [a-z0-9][a-z0-9_.:-]* and be at most 64 characters; invalid: 'no spaces please'"
            ],
        },
    )


def test_a_whitespace_title_or_body_is_422(user):
    response = propose(user, title="   ", body="   ")
    assert response.json() == error(
        422,
        "validation_failed",
        "Validation failed",
        {"title": ["must not be blank"], "body": ["must not be blank"]},
    )


def test_a_body_that_is_not_an_object_is_422(user):
    response = user.post("/api/v1/knowledge/articles", ["x"], format="json")
    assert response.json() == error(
        422, "validation_failed", "The request body must be a JSON object", {"body": ["must be an object"]}
    )


def test_an_active_title_that_exists_is_409_naming_the_article(user, tenant):
    existing = ArticleFactory.create(tenant=tenant, title="Runbook", body="something else entirely")
    response = propose(user, title="Runbook", body="a new and unrelated body about cats")
    assert response.status_code == 409
    assert response.json() == error(
        409, "duplicate_title", DuplicateTitle.default_message, {"article_id": str(existing.id)}
    )


def test_a_hidden_holder_of_the_title_is_not_named(agent, tenant):
    ArticleFactory.create(
        tenant=tenant, title="Secret plan", body="zebra", visibility="owner", owner_subject_id="agent-b"
    )
    response = propose(agent, title="Secret plan", body="an unrelated body about cats")
    assert response.json() == error(409, "duplicate_title", DuplicateTitle.default_message)


@pytest.mark.parametrize("status", ["archived", "superseded"])
def test_an_inactive_article_does_not_hold_its_title(user, tenant, status):
    ArticleFactory.create(tenant=tenant, title="Old runbook", body="zebra", status=status)
    assert create(user, title="Old runbook", body="a new and unrelated body about cats")["title"] == "Old runbook"


def test_another_tenants_title_is_free(user, other_tenant):
    ArticleFactory.create(tenant=other_tenant, title="Runbook", body="zebra")
    assert create(user, title="Runbook", body="cats")["title"] == "Runbook"


def test_the_same_idempotency_key_returns_the_first_article_without_the_gate(agent, embedding_down):
    first = propose(agent, title="Once", body="only once", idempotency_key="req-1", expect=201).json()["data"]
    again = propose(agent, title="Different", body="ignored", idempotency_key="req-1", expect=200).json()["data"]
    assert (again["verdict"], again["created"]) == ("deduplicated", False)
    assert again["article"]["id"] == first["article"]["id"]


def test_idempotency_keys_belong_to_their_writer(agent, peer):
    mine = create(agent, title="Mine", body="alpha", idempotency_key="req-1")
    theirs = create(peer, title="Theirs", body="beta gamma", idempotency_key="req-1")
    assert mine["id"] != theirs["id"]


def test_writes_are_refused_during_a_custody_halt(agent, tenant):
    tenant_halt(tenant=tenant)
    response = propose(agent)
    assert response.status_code == 503
    assert response.json() == error(503, "tenant_halted", TenantHalted.default_message)


def test_a_superadmin_must_impersonate(client_for, superadmin_key, tenant):
    response = propose(client_for(superadmin_key))
    assert response.json() == error(422, "impersonation_tenant_required", ImpersonationTenantRequired.default_message)
    article = create(client_for(superadmin_key, impersonate="acme"))
    assert (article["tenant_id"], article["visibility"]) == (str(tenant.id), "shared")


def test_a_missing_key_is_401(client_for):
    response = propose(client_for())
    assert response.status_code == 401
    assert response.json() == MISSING_KEY


def test_an_idempotency_key_is_text_not_a_number(agent):
    response = propose(agent, expect=422, idempotency_key=12345)
    assert response.json()["error"]["details"] == {"idempotency_key": ["must be a string"]}
