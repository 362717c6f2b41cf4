"""The quota's live count on every write reads the subject's covering index alone, never one heap row per memory."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.services import memory_remember


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


def _the_functions_count(scope: Scope) -> tuple[str, list[str]]:
    """The count inside `loopmem_lock_and_count_live` (memory 0014), with the scope's values for its arguments."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'loopmem_lock_and_count_live'")
        (body,) = cursor.fetchone()
    count = body[body.index("SELECT count(*)") : body.rindex(")")]
    return count.replace("= tenant", "= %s").replace("= subject", "= %s"), [str(scope.tenant_id), scope.subject_id]


def test_a_remember_checks_the_quota_in_one_statement(tenant):
    with CaptureQueriesContext(connection) as captured:
        memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), text="one more")
    sent = [q["sql"] for q in captured.captured_queries]
    assert sum("loopmem_lock_and_count_live" in sql for sql in sent) == 1, sent
    assert not any("pg_advisory_xact_lock" in sql or sql.startswith("SELECT COUNT(*)") for sql in sent), sent


def test_the_live_count_is_an_index_only_scan_of_the_subject(tenant, crowded):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    memory_remember(scope=scope, text="one more")
    count_sql, params = _the_functions_count(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {count_sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using memories_subject_cover_idx" in plan, plan
    with connection.cursor() as cursor:
        cursor.execute(count_sql, params)
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


@pytest.mark.django_db
def test_a_subjects_live_rows_share_one_key_in_the_cover_index(tenant):
    # Btree deduplication stores equal keys once with a list of row pointers; an INCLUDE column turns it off, and a
    # row then costs its whole key again (82 B a row against 11 deduplicated: docs/performance.md, "Bytes per
    # memory"; 254 KB against 49 KB for these rows, each index rebuilt, measured on a scratch table).
    rows = [Memory(tenant=tenant, subject_id="agent-big", text=f"row {n}") for n in range(4000)]
    Memory.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        # Rebuilt from the table: the pages earlier tests' rolled-back rows left in the index file are not counted.
        cursor.execute("REINDEX INDEX memories_subject_cover_idx")
        cursor.execute("SELECT pg_relation_size('memories_subject_cover_idx')")
        (size,) = cursor.fetchone()
    assert size <= 4000 * 25, f"{size} B for 4,000 rows of one subject"
