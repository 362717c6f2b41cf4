"""memories.embedding and pending_embedding in half precision (`halfvec`), every HNSW index over `halfvec(N)`
(loopmem.embedding.vector_index): half the bytes a row and half the index.

ALTER COLUMN ... TYPE rewrites the table and rebuilds its indexes; the HNSW indexes of 384 and 768 dimensions are
dropped first and built once, over the new type (docs/operations.md, "Upgrading").
"""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import django.db.models.lookups
import pgvector.django.halfvec
import pgvector.django.indexes
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("loopmem", "0006_idempotency_records"),
        ("memory", "0016_memory_occurred_on"),
        ("projects", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_hnsw_384_idx",
        ),
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_hnsw_768_idx",
        ),
        migrations.AlterField(
            model_name="memory",
            name="embedding",
            field=pgvector.django.halfvec.HalfVectorField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="memory",
            name="pending_embedding",
            field=pgvector.django.halfvec.HalfVectorField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=384)
                    ),
                    name="halfvec_cosine_ops",
                ),
                condition=models.Q(
                    ("superseded_by__isnull", True),
                    django.db.models.lookups.Exact(
                        models.Func(models.F("embedding"), function="vector_dims", output_field=models.IntegerField()),
                        384,
                    ),
                ),
                ef_construction=64,
                m=16,
                name="memories_hnsw_384_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=768)
                    ),
                    name="halfvec_cosine_ops",
                ),
                condition=models.Q(
                    ("superseded_by__isnull", True),
                    django.db.models.lookups.Exact(
                        models.Func(models.F("embedding"), function="vector_dims", output_field=models.IntegerField()),
                        768,
                    ),
                ),
                ef_construction=64,
                m=16,
                name="memories_hnsw_768_idx",
            ),
        ),
    ]
