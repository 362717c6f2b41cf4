"""The foreign keys of memories are indexed for the rows that name one: every lookup they serve still finds its index,
and the NULLs most rows hold take no room in it."""

from __future__ import annotations

import pytest
from django.db import connection

from loopmem.tenancy.scope import Scope
from memory.services import memory_remember

LOOKUPS = [
    ("superseded_by_id", "memories_superseded_by_idx"),
    ("project_id", "memories_project_idx"),
]


# `= $1` is PostgreSQL's own check; Django's SET NULL asks for a batch of ids at once (`IN`, sent as `= ANY`).
SHAPES = [("uuid", "= $1", "gen_random_uuid()"), ("uuid[]", "= ANY($1)", "ARRAY[gen_random_uuid()]")]


@pytest.mark.parametrize(("column", "index"), LOOKUPS)
@pytest.mark.parametrize(("argument", "condition", "value"), SHAPES)
def test_a_lookup_by_any_id_can_use_the_partial_index(tenant, column, index, argument, condition, value):
    memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), text="a row")
    with connection.cursor() as cursor:
        # A generic plan does not know the id, so the index qualifies only if `= $1` implies its NOT NULL predicate;
        # with sequential scans off, a plan that cannot use it falls back to another index or a disabled Seq Scan.
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"PREPARE by_id({argument}) AS SELECT 1 FROM memories WHERE {column} {condition}")
        try:
            cursor.execute(f"EXPLAIN EXECUTE by_id({value})")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE by_id")
    assert index in plan, plan


@pytest.mark.parametrize(("column", "index"), LOOKUPS)
@pytest.mark.django_db
def test_the_rows_without_a_reference_are_left_out(column, index):
    # Most memories name no project and supersede nothing: an index of every row would spend 6.6 B a row on NULLs.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = 'memories'::regclass AND indnatts = 1"
            " AND indkey[0] = (SELECT attnum FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = %s)",
            [column],
        )
        indexes = dict(cursor.fetchall())
    assert list(indexes) == [index], indexes  # the full index Django made for the foreign key is gone
    assert indexes[index].endswith(f"WHERE ({column} IS NOT NULL)"), indexes
