"""memories.embedding holds each vector at its model's native size (untyped `vector`), indexed per size
(loopmem.embedding.vector_index); the side columns a reembed fills before its swap.

After loopmem 0005 (Citus): deployments that applied it get this as a later step, and Citus propagates the
ALTER/UPDATE/CREATE INDEX to the shards of a distributed table.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import django.db.models.lookups
import pgvector.django.halfvec
import pgvector.django.indexes
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models

from loopmem.embedding import vector_index


class Migration(migrations.Migration):
    dependencies = [
        ("loopmem", "0005_citus_distribution"),
        ("memory", "0010_memory_keyword_search_vector"),
        ("projects", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_live_hnsw_idx",
        ),
        migrations.AlterField(
            model_name="memory",
            name="embedding",
            field=pgvector.django.vector.VectorField(blank=True, null=True),
        ),
        # Padded vectors of the 384-dim providers go back to their native size; other models' rows keep theirs.
        migrations.RunSQL(
            vector_index.shrink_padded_sql("memories"),
            reverse_sql=vector_index.pad_back_sql("memories", settings.EMBEDDING_DIMENSIONS),
        ),
        migrations.AddField(
            model_name="memory",
            name="pending_embedding",
            field=pgvector.django.vector.VectorField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="pending_embedding_content_hash",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="pending_embedding_model",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.vector.VectorField(dimensions=384)
                    ),
                    name="vector_cosine_ops",
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
                        "embedding", output_field=pgvector.django.vector.VectorField(dimensions=768)
                    ),
                    name="vector_cosine_ops",
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
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=1024)
                    ),
                    name="halfvec_cosine_ops",
                ),
                condition=models.Q(
                    ("superseded_by__isnull", True),
                    django.db.models.lookups.Exact(
                        models.Func(models.F("embedding"), function="vector_dims", output_field=models.IntegerField()),
                        1024,
                    ),
                ),
                ef_construction=64,
                m=16,
                name="memories_hnsw_1024_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=1536)
                    ),
                    name="halfvec_cosine_ops",
                ),
                condition=models.Q(
                    ("superseded_by__isnull", True),
                    django.db.models.lookups.Exact(
                        models.Func(models.F("embedding"), function="vector_dims", output_field=models.IntegerField()),
                        1536,
                    ),
                ),
                ef_construction=64,
                m=16,
                name="memories_hnsw_1536_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=3072)
                    ),
                    name="halfvec_cosine_ops",
                ),
                condition=models.Q(
                    ("superseded_by__isnull", True),
                    django.db.models.lookups.Exact(
                        models.Func(models.F("embedding"), function="vector_dims", output_field=models.IntegerField()),
                        3072,
                    ),
                ),
                ef_construction=64,
                m=16,
                name="memories_hnsw_3072_idx",
            ),
        ),
    ]
