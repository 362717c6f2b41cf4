"""The quota's live count on every write reads the subject's covering index alone, never one heap row per memory."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from loopmem.scope import Scope
from memory.models import Memory
from memory.services import live_count_query, memory_remember


@pytest.fixture
def crowded(tenant):
    # Many subjects, so a per-subject index beats a scan; one of them holds rows both live and superseded.
    rows = [
        Memory(tenant=tenant, subject_id=f"agent-{s}", text=f"row {n} of {s}")
        for s in ["a", *range(150)]
        for n in range(20)
    ]
    Memory.objects.bulk_create(rows, batch_size=1000)
    agent_a = Memory.objects.filter(tenant=tenant, subject_id="agent-a").order_by("id")
    Memory.objects.filter(pk__in=[row.pk for row in agent_a[:5]]).update(superseded_by=agent_a.last())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories")


def _count_sent_by_remember(scope: Scope) -> str:
    with CaptureQueriesContext(connection) as captured:
        memory_remember(scope=scope, text="one more")
    # One statement locks the subject and counts (memory 0014's function); the count is sent as its argument.
    calls = [q["sql"] for q in captured.captured_queries if "loopmem_count_after_lock" in q["sql"]]
    assert len(calls) == 1, captured.captured_queries
    count_sql = live_count_query(scope)
    assert count_sql.replace("'", "''") in calls[0]
    return count_sql


def test_the_live_count_is_an_index_only_scan_of_the_subject(tenant, crowded):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    count_sql = _count_sent_by_remember(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {count_sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using memories_subject_cover_idx" in plan, plan
    with connection.cursor() as cursor:
        cursor.execute(count_sql)
        (live,) = cursor.fetchone()
    assert live == Memory.objects.for_scope(scope).live().count() == 20 - 5 + 1


@pytest.mark.django_db
def test_autovacuum_marks_new_memories_visible_after_one_percent_of_inserts():
    # The index-only count skips the heap only on pages a vacuum has marked all-visible; PostgreSQL's default
    # waits for 20 % new rows (41,000 at 200,000), and every count in between reads the new rows' heap pages.
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'memories'::regclass")
        (options,) = cursor.fetchone()
    assert "autovacuum_vacuum_insert_scale_factor=0.01" in (options or []), options
