"""GET /api/v1/knowledge/articles (filters, paging) and GET /api/v1/knowledge/articles/:id (body, `get` row)."""

from __future__ import annotations

import uuid

import pytest

from knowledge.models import ArticleAccessEvent
from loopmem.errors import InvalidProjectId, NotFound
from tests.conftest import error
from tests.factories import ArticleFactory, ProjectFactory
from tests.knowledge.conftest import MISSING_KEY

pytestmark = pytest.mark.django_db


def listed(client, **params):
    response = client.get("/api/v1/knowledge/articles", params)
    assert response.status_code == 200, response.json()
    return response.json()


def test_the_list_is_newest_first_paged_and_without_bodies(user, tenant):
    for n in range(5):
        ArticleFactory.create(tenant=tenant, title=f"a{n}")
    body = listed(user, limit=2, offset=1)
    assert [a["title"] for a in body["data"]] == ["a3", "a2"]
    assert "body" not in body["data"][0]
    assert body["meta"] == {"total_count": 5, "limit": 2, "offset": 1, "outcome": "success"}
    assert listed(user, limit=1000)["meta"]["limit"] == 200
    assert listed(user, offset=10)["meta"] == {"total_count": 5, "limit": 50, "offset": 10, "outcome": "success"}


def test_an_empty_list_is_an_empty_outcome(user):
    assert listed(user)["meta"] == {"total_count": 0, "limit": 50, "offset": 0, "outcome": "empty"}


def test_filters_narrow_by_status_category_all_tags_and_exact_project(user, tenant):
    project = ProjectFactory.create(tenant=tenant)
    ArticleFactory.create(tenant=tenant, title="draft", status="draft")
    ArticleFactory.create(tenant=tenant, title="decision", category="decision", tags=["ops", "ci"])
    ArticleFactory.create(tenant=tenant, title="ops only", tags=["ops"])
    ArticleFactory.create(tenant=tenant, title="in project", project=project)

    def titles(**params):
        return {a["title"] for a in listed(user, **params)["data"]}

    assert titles(status="draft") == {"draft"}
    assert titles(category="decision") == {"decision"}
    assert titles(tags="ops") == {"decision", "ops only"}
    assert titles(tags="OPS, ci") == {"decision"}
    assert titles(project_id=str(project.id)) == {"in project"}
    assert titles(project_id=str(uuid.uuid4())) == set()


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("status", "deleted", "Query parameter 'status' must be one of draft, published, archived, superseded"),
        ("category", "gossip", "Query parameter 'category' must be one of pattern, decision, finding, reference"),
    ],
)
def test_an_unknown_filter_value_is_400(user, param, value, message):
    response = user.get("/api/v1/knowledge/articles", {param: value})
    assert response.status_code == 400
    assert response.json() == error(400, "bad_request", message)


def test_a_malformed_project_id_is_422(user):
    response = user.get("/api/v1/knowledge/articles", {"project_id": "x"})
    assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_get_returns_the_body_and_records_a_get_row_for_the_key(agent, agent_key, user, user_key, tenant):
    row = ArticleFactory.create(tenant=tenant, title="Runbook", body="step one")
    for client, key in ((agent, agent_key), (user, user_key)):
        response = client.get(f"/api/v1/knowledge/articles/{row.id}")
        assert response.status_code == 200
        data = response.json()["data"]
        assert (data["id"], data["title"], data["body"]) == (str(row.id), "Runbook", "step one")
        event = ArticleAccessEvent.objects.get(api_key=key.api_key)
        assert (event.access_type, event.article_id, event.tenant_id) == ("get", row.id, tenant.id)


@pytest.mark.parametrize("article_id", ["not-a-uuid", str(uuid.uuid4())])
def test_get_of_a_malformed_or_unknown_id_is_404(user, article_id):
    response = user.get(f"/api/v1/knowledge/articles/{article_id}")
    assert response.status_code == 404
    assert response.json() == error(404, "not_found", NotFound.default_message)
    assert not ArticleAccessEvent.objects.exists()


def test_a_missing_key_is_401(client_for):
    for path in ("/api/v1/knowledge/articles", f"/api/v1/knowledge/articles/{uuid.uuid4()}"):
        response = client_for().get(path)
        assert response.status_code == 401
        assert response.json() == MISSING_KEY
