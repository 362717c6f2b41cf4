"""Every statement an API request runs pins one tenant (the autouse check in tests/conftest.py runs it over
every test_api_* module); the service's cross-tenant statements are exactly the listed multi-shard ones."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.utils import timezone

from knowledge import tasks as knowledge_tasks
from loopmem.database.citus import MULTI_SHARD_STATEMENTS
from loopmem.http.metrics_endpoint import exposition
from memory import tasks as memory_tasks
from memory.models import SessionTurn
from tests.memory.conftest import embed_pending, heavy_db, remember
from tests.sql_routing import unrouted
from tests.sql_routing_capture import capture_request_statements, tenant_tables

TABLES = frozenset({"memories", "articles"})


@pytest.mark.parametrize(
    "sql",
    [
        'SELECT "memories"."id" FROM "memories" WHERE ("memories"."tenant_id" = %s AND "memories"."subject_id" = %s)',
        'UPDATE "memories" SET "text" = %s WHERE ("memories"."id" = %s AND "memories"."tenant_id" = %s)',
        'DELETE FROM "memories" WHERE ("memories"."tenant_id" = %s AND "memories"."id" = %s)',
        'INSERT INTO "memories" ("id", "tenant_id", "text") VALUES (%s, %s, %s)',
        'SELECT 1 FROM "memories" WHERE "memories"."tenant_id" = %s AND EXISTS(SELECT 1 FROM "articles" U0 '
        'WHERE (U0."tenant_id" = %s AND U0."id" = ("memories"."id")))',
        'SELECT "tenants"."id" FROM "tenants" WHERE "tenants"."slug" = %s',
    ],
)
def test_statements_that_pin_their_tenant_route(sql):
    assert unrouted(sql, TABLES) == []


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ('UPDATE "articles" SET "status" = %s WHERE "articles"."id" = %s', "articles"),
        ('DELETE FROM "memories" WHERE "memories"."id" IN (%s)', "memories"),
        ('SELECT COUNT(*) FROM "memories" WHERE "memories"."embedding" IS NULL', "memories"),
        ('INSERT INTO "articles" ("id", "title") VALUES (%s, %s)', "articles"),
        # The outer table is pinned, the subquery's is not.
        (
            'SELECT 1 FROM "memories" WHERE "memories"."tenant_id" = %s AND EXISTS(SELECT 1 FROM "articles" U0 '
            'WHERE U0."id" = ("memories"."id"))',
            "articles",
        ),
        # Another alias's tenant does not pin this one.
        ('SELECT 1 FROM "memories" INNER JOIN "articles" T3 ON (1=1) WHERE "memories"."tenant_id" = %s', "articles"),
    ],
)
def test_statements_that_do_not_pin_their_tenant_are_caught(sql, table):
    assert [v.table for v in unrouted(sql, TABLES)] == [table]


@heavy_db
def test_the_capture_sees_what_requests_run_and_only_that(agent):
    remember(agent, "before the capture")
    with capture_request_statements() as capture:
        remember(agent, "captured")
        embed_pending()  # outside any request: not captured
        agent.post("/api/v1/memory/recall", {"query": "captured"}, format="json")
    assert any(sql.startswith('INSERT INTO "memories"') for sql in capture.statements)
    assert not any(sql.startswith('UPDATE "memories" SET "embedding"') for sql in capture.statements)
    assert any('"memories"."subject_id" = %s' in sql for sql in capture.statements)
    assert capture.violations() == []


@heavy_db
def test_the_only_cross_tenant_statements_are_the_listed_sweeps_and_figures(agent, capsys):
    remember(agent, "a fact")
    embed_pending()
    for n, role in enumerate(("user", "assistant")):
        turn = {"tier": "session", "session_id": f"s-{n}", "role": role, "content": "I always reship expedited."}
        assert agent.post("/api/v1/memory", turn, format="json").status_code == 201
    SessionTurn.objects.filter(session_id="s-0").update(expires_at=timezone.now())
    with capture_request_statements() as capture:
        capture.start()  # everything, not only requests
        memory_tasks.embedding_sweep_task()
        knowledge_tasks.article_embedding_sweep_task()
        memory_tasks.prune_session_turns_task()
        memory_tasks.promotion_sweep_task()
        memory_tasks.graduation_sweep_task()
        knowledge_tasks.retrieval_metrics_task()
        call_command("memory_stats", "--json")
        exposition(include_state=True)
        capture.stop()
    tables = tenant_tables()
    cross = {sql for sql in capture.statements if unrouted(sql, tables)}
    unlisted = [sql for sql in cross if not any(marker in sql for marker in MULTI_SHARD_STATEMENTS)]
    assert unlisted == []
    assert len(cross) >= 5  # the sweeps and figures did run across tenants
