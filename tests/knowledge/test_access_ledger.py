"""The access ledger (reference §1.6): surfacing rows for what agents are shown, get rows for reads."""

from __future__ import annotations

import uuid

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from knowledge.ledger import access_record_referenced, access_record_surfacing, surfaced_article_ids
from knowledge.models import ArticleAccessEvent
from tests.factories import ArticleFactory, ProjectFactory
from tests.knowledge.conftest import heavy_db, search

pytestmark = heavy_db


@pytest.fixture
def deploy_notes(tenant):
    return [ArticleFactory.create(tenant=tenant, title=f"Deploy note {n:02}", body="deploy") for n in range(25)]


def test_an_agent_search_writes_one_row_per_article_shown(agent, agent_key, tenant, deploy_notes):
    project = ProjectFactory.create(tenant=tenant)
    body = search(agent, "deploy", mode="keyword", limit=3, project_id=str(project.id))
    search_id = body["meta"]["search_id"]
    rows = list(ArticleAccessEvent.objects.order_by("metadata__rank"))
    assert [str(r.article_id) for r in rows] == [hit["id"] for hit in body["data"]]
    for rank, row in enumerate(rows, start=1):
        assert (row.access_type, row.tenant_id, row.api_key_id) == ("search", tenant.id, agent_key.api_key.id)
        assert (str(row.origin_search_id), row.project_id) == (search_id, project.id)
        assert row.metadata == {
            "search_id": search_id,
            "query": "deploy",
            "rank": rank,
            "results_returned": 3,
            "search_mode": "keyword",
            "mode": "hybrid_retrieved",  # retrieval metrics' bucket: no curated winner in keyword mode
        }


def test_at_most_twenty_rows_per_search_ranked_from_the_page_offset(agent, deploy_notes):
    search(agent, "deploy", mode="keyword", limit=50)
    ranks = sorted(ArticleAccessEvent.objects.values_list("metadata__rank", flat=True))
    assert ranks == list(range(1, 21))
    ArticleAccessEvent.objects.all().delete()
    search(agent, "deploy", mode="keyword", limit=5, offset=5)
    assert sorted(ArticleAccessEvent.objects.values_list("metadata__rank", flat=True)) == [6, 7, 8, 9, 10]


def test_curators_searches_are_not_the_funnel(user, client_for, make_key, tenant, deploy_notes):
    search(user, "deploy")
    search(client_for(make_key("orchestrator", tenant)), "deploy")
    assert not ArticleAccessEvent.objects.exists()


def broken(*args, **kwargs):
    raise DatabaseError("ledger table unavailable")


def test_a_failed_ledger_write_does_not_fail_the_search(agent, deploy_notes, monkeypatch, caplog):
    monkeypatch.setattr(ArticleAccessEvent.objects, "bulk_create", broken)
    assert search(agent, "deploy", limit=2)["meta"]["total_count"] > 0
    assert "access ledger write failed" in caplog.text


def test_a_failed_get_row_does_not_fail_the_read(agent, deploy_notes, monkeypatch, caplog):
    monkeypatch.setattr(
        ArticleAccessEvent.objects, "bulk_create", lambda *a, **k: (_ for _ in ()).throw(DatabaseError())
    )
    assert agent.get(f"/api/v1/knowledge/articles/{deploy_notes[0].id}").status_code == 200
    assert "access ledger write failed" in caplog.text


def test_only_published_articles_are_recorded_as_surfaced(tenant, agent_key):
    draft = ArticleFactory.create(tenant=tenant, status="draft")
    published = ArticleFactory.create(tenant=tenant)
    recall_id = uuid.uuid4()
    assert access_record_surfacing(
        tenant_id=tenant.id,
        api_key_id=agent_key.api_key.id,
        search_id=recall_id,
        query="q",
        articles=[draft, published],
    )
    [row] = ArticleAccessEvent.objects.all()
    assert (row.article_id, row.metadata["rank"], row.metadata["results_returned"]) == (published.id, 2, 2)
    assert row.origin_search_id == recall_id


def test_referenced_rows_and_the_surfaced_set_for_the_merged_recall(tenant, other_tenant, agent_key):
    shown, other = ArticleFactory.create(tenant=tenant), ArticleFactory.create(tenant=tenant)
    recall_id = uuid.uuid4()
    access_record_surfacing(
        tenant_id=tenant.id, api_key_id=agent_key.api_key.id, search_id=recall_id, query="q", articles=[shown]
    )
    assert surfaced_article_ids(tenant_id=tenant.id, search_id=recall_id) == {str(shown.id)}
    assert surfaced_article_ids(tenant_id=other_tenant.id, search_id=recall_id) == set()
    assert access_record_referenced(
        tenant_id=tenant.id,
        api_key_id=agent_key.api_key.id,
        recall_id=recall_id,
        article_ids=[shown.id, shown.id, other.id],
    )
    rows = ArticleAccessEvent.objects.filter(access_type="referenced")
    assert sorted(str(r.article_id) for r in rows) == sorted([str(shown.id), str(other.id)])
    assert {(r.origin_search_id, r.origin_attribution) for r in rows} == {(recall_id, None)}
    assert all(r.metadata == {"recall_id": str(recall_id)} for r in rows)
    # Referenced rows are not surfacing rows.
    assert surfaced_article_ids(tenant_id=tenant.id, search_id=recall_id) == {str(shown.id)}


def _surfacing(tenant, agent_key, articles) -> None:
    assert access_record_surfacing(
        tenant_id=tenant.id, api_key_id=agent_key.api_key.id, search_id=uuid.uuid4(), query="q", articles=articles
    )


def test_a_ledger_write_of_its_own_commits_without_waiting_for_the_disk(tenant, agent_key, deploy_notes):
    with CaptureQueriesContext(connection) as captured:
        _surfacing(tenant, agent_key, deploy_notes[:3])
    statements = [query["sql"] for query in captured.captured_queries]
    relaxed = statements.index("SET LOCAL synchronous_commit TO off")
    assert any(sql.startswith("INSERT INTO") for sql in statements[relaxed:])
    assert ArticleAccessEvent.objects.count() == 3  # committed, and visible at once


def test_a_ledger_write_inside_a_callers_transaction_leaves_its_commit_alone(tenant, agent_key, deploy_notes):
    with transaction.atomic():
        _surfacing(tenant, agent_key, deploy_notes[:3])
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)  # the caller's own writes still wait for the disk
    assert ArticleAccessEvent.objects.count() == 3
