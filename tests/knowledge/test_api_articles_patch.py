"""PATCH /api/v1/knowledge/articles/:id: who may edit, re-embedding, titles, validation, halt."""

from __future__ import annotations

import pytest

from knowledge.embedding import article_embed
from knowledge.models import Article
from loopmem.embedding import embedders
from loopmem.errors import DuplicateTitle, TenantHalted
from loopmem.tenancy.services import tenant_halt
from tests.conftest import error
from tests.factories import ArticleFactory
from tests.knowledge.conftest import MISSING_KEY, MODEL, hashed

pytestmark = pytest.mark.django_db


def patch(client, article, expect=200, **fields):
    response = client.patch(f"/api/v1/knowledge/articles/{article.id}", fields, format="json")
    assert response.status_code == expect, response.json()
    return response.json()


@pytest.fixture
def embedded(tenant):
    """A published shared article with its vector, written by a curator."""
    return ArticleFactory.create(
        tenant=tenant,
        title="Runbook",
        body="old body",
        owner_subject_id="curator",
        embedding=hashed("Runbook\n\nold body"),
        embedding_model=MODEL,
        embedding_content_hash=embedders.content_hash("Runbook\n\nold body"),
    )


def test_a_user_edits_any_article_and_a_content_change_re_embeds(user, embedded, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        data = patch(user, embedded, title=" Runbook v2 ", body="new body", tags=["Ops"], status="archived")["data"]
    assert (data["title"], data["body"], data["tags"], data["status"]) == (
        "Runbook v2",
        "new body",
        ["ops"],
        "archived",
    )
    assert len(callbacks) == 1  # the embedding task, sent after commit
    row = Article.objects.get(id=embedded.id)
    assert (row.embedding, row.embedding_model, row.embedding_content_hash) == (None, "", None)
    assert article_embed(article_id=str(row.id)) == "embedded"
    row.refresh_from_db()
    assert row.embedding_content_hash == embedders.content_hash("Runbook v2\n\nnew body")


def test_tags_and_status_alone_keep_the_vector(user, embedded, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        patch(user, embedded, tags=["a"], status="draft")
    assert callbacks == []
    assert Article.objects.get(id=embedded.id).embedding is not None


def test_an_empty_patch_changes_nothing(user, embedded):
    before = Article.objects.get(id=embedded.id).updated_at
    assert patch(user, embedded)["data"]["title"] == "Runbook"
    assert Article.objects.get(id=embedded.id).updated_at == before


def test_an_agent_edits_the_articles_it_owns(agent, tenant):
    mine = ArticleFactory.create(tenant=tenant, visibility="owner", owner_subject_id="agent-a", status="draft")
    assert patch(agent, mine, status="published")["data"]["status"] == "published"


def test_an_agent_may_not_edit_a_shared_article_it_does_not_own(agent, embedded):
    body = patch(agent, embedded, expect=403, title="hijacked")
    assert body == error(403, "forbidden", "Only the article's owner (or a user or orchestrator key) may change it")
    assert Article.objects.get(id=embedded.id).title == "Runbook"


def test_an_orchestrator_edits_any_article(client_for, make_key, tenant, embedded):
    orchestrator = client_for(make_key("orchestrator", tenant, agent_id="agent-a"))
    assert patch(orchestrator, embedded, title="Runbook (orchestrated)")["data"]["title"] == "Runbook (orchestrated)"


def test_a_title_another_active_article_holds_is_409(user, tenant, embedded):
    other = ArticleFactory.create(tenant=tenant, title="Playbook")
    body = patch(user, other, expect=409, title="Runbook")
    assert body == error(409, "duplicate_title", DuplicateTitle.default_message, {"article_id": str(embedded.id)})


def test_archiving_frees_the_title_and_reviving_a_taken_one_is_409(user, tenant, embedded):
    patch(user, embedded, status="archived")
    newer = ArticleFactory.create(tenant=tenant, title="Runbook")
    body = patch(user, embedded, expect=409, status="published")
    assert body == error(409, "duplicate_title", DuplicateTitle.default_message, {"article_id": str(newer.id)})


def test_invalid_fields_are_422(user, embedded):
    body = patch(user, embedded, expect=422, title="  ", body="", status="gone", tags=["bad tag"])
    assert body == error(
        422,
        "validation_failed",
        "Validation failed",
        {"status": ['"gone" is not a valid choice.']},
    )
    body = patch(user, embedded, expect=422, title="  ", body="", tags=["bad tag"])
    assert body == error(
        422,
        "validation_failed",
        "Validation failed",
        {
            "title": ["must not be blank"],
            "body": ["must not be blank"],
            "tags": ["each tag must match [a-z0-9][a-z0-9_.:-]* and be at most 64 characters; invalid: 'bad tag'"],
        },
    )


def test_edits_are_refused_during_a_custody_halt(user, tenant, embedded):
    tenant_halt(tenant=tenant)
    assert patch(user, embedded, expect=503, title="x") == error(503, "tenant_halted", TenantHalted.default_message)


def test_put_is_not_an_edit(user, embedded):
    response = user.put(f"/api/v1/knowledge/articles/{embedded.id}", {"title": "x"}, format="json")
    assert response.status_code == 405
    assert response.json() == error(405, "method_not_allowed", 'Method "PUT" not allowed.')


def test_a_missing_key_is_401(client_for, embedded):
    assert patch(client_for(), embedded, expect=401) == MISSING_KEY
