"""memory 0011 / knowledge 0004: the padded vector(1536) column becomes an untyped one; the 384-dim providers'
padded vectors shrink to their native size, other models' rows keep theirs."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import TenantFactory

BEFORE = [("memory", "0010_memory_keyword_search_vector"), ("knowledge", "0003_access_query_text_index")]
AFTER = [("memory", "0011_native_size_vectors"), ("knowledge", "0004_native_size_vectors")]


def _migrate(targets: list[tuple[str, str]] | None) -> None:
    """To `targets`; None: to the latest migrations, where every other test expects the schema."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets if targets is not None else executor.loader.graph.leaf_nodes())


def _padded(head: list[float], size: int = 1536) -> str:
    return str([*head, *([0.0] * (size - len(head)))])


@pytest.mark.django_db(transaction=True)
def test_the_migration_shrinks_padded_384_dim_rows_and_keeps_other_models_sizes():
    tenant_id = TenantFactory.create().id
    head = [0.6, 0.8] + [0.0] * 382
    wide = [0.01 * (n % 7) for n in range(1536)]
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            rows = [
                ("local:all-MiniLM-L6-v2-int8", _padded(head)),
                ("hashing:v1", _padded(head)),
                ("openai:text-embedding-3-small", str(wide)),
            ]
            for model, vector in rows:
                cursor.execute(
                    "INSERT INTO memories (id, tenant_id, subject_id, text, embedding, embedding_model, confidence,"
                    " source, tags, metadata, recall_count, inserted_at, updated_at)"
                    " VALUES (%s, %s, 's', %s, %s::vector, %s, 1, 'explicit', '{}', '{}', 0, now(), now())",
                    [uuid.uuid4(), tenant_id, model, vector, model],
                )
        _migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT embedding_model, vector_dims(embedding), embedding::real[] FROM memories WHERE tenant_id = %s",
                [tenant_id],
            )
            stored = {model: (dims, values) for model, dims, values in cursor.fetchall()}
            cursor.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexname LIKE '%%hnsw%%'"
            )
            indexes = {name for (name,) in cursor.fetchall()}
    finally:
        _migrate(None)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memories WHERE tenant_id = %s", [tenant_id])
    assert stored["local:all-MiniLM-L6-v2-int8"][0] == 384
    assert stored["local:all-MiniLM-L6-v2-int8"][1] == pytest.approx(head)
    assert stored["hashing:v1"][0] == 384
    assert stored["openai:text-embedding-3-small"][0] == 1536
    assert stored["openai:text-embedding-3-small"][1] == pytest.approx(wide)
    assert indexes == {f"memories_hnsw_{n}_idx" for n in (384, 768, 1024, 1536, 3072)}
