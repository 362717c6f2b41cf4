"""The foreign keys of memories are indexed for the rows that name one: every lookup they serve still finds its index,
and the NULLs most rows hold take no room in it."""

from __future__ import annotations

import pytest
from django.db import connection

from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.services import memory_forget, memory_remember, memory_supersede

# The shape of PostgreSQL's own foreign-key checks and of Django's SET NULL: `column = $1`, planned once for any id.
LOOKUPS = [
    ("superseded_by_id", "memories_superseded_by_idx"),
    ("project_id", "memories_project_idx"),
]


@pytest.mark.parametrize(("column", "index"), LOOKUPS)
def test_a_lookup_by_any_id_can_use_the_partial_index(tenant, column, index):
    memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), text="a row")
    with connection.cursor() as cursor:
        # A generic plan does not know the id, so the index qualifies only if `= $1` implies its NOT NULL predicate;
        # without sequential scans a plan that cannot use it shows a (disabled) Seq Scan instead.
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"PREPARE by_id(uuid) AS SELECT 1 FROM memories WHERE {column} = $1")
        try:
            cursor.execute("EXPLAIN EXECUTE by_id(gen_random_uuid())")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE by_id")
    assert index in plan, plan


@pytest.mark.parametrize(("column", "index"), LOOKUPS)
@pytest.mark.django_db
def test_the_rows_without_a_reference_are_left_out(column, index):
    # Most memories name no project and supersede nothing: an index of every row spent 8 B a row on those NULLs.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_indexdef(%s::regclass)", [index])
        (definition,) = cursor.fetchone()
    assert definition.endswith(f"WHERE ({column} IS NOT NULL)"), definition


def test_forgetting_a_correction_makes_what_it_superseded_live_again(tenant):
    # SET NULL through the partial index: the superseded row is found by its superseder's id.
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    first = memory_remember(scope=scope, text="the office is in Lyon")
    second = memory_remember(scope=scope, text="the office is in Paris")
    memory_supersede(scope=scope, old_id=str(first.id), new_id=str(second.id))
    assert Memory.objects.get(id=first.id).superseded_by_id == second.id
    memory_forget(scope=scope, memory_id=str(second.id))
    assert Memory.objects.get(id=first.id).superseded_by_id is None
