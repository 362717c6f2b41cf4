"""Fewer bytes a memory (docs/performance.md, "Bytes per memory"):

- memories_subject_cover_idx holds superseded_by as a key column instead of an INCLUDE, so btree deduplication
  stores a subject's live rows as one key and its row pointers;
- the 384-dimension HNSW index is built with m 12 (loopmem.embedding.vector_index.COMPACT_HNSW_M), eight graph elements to
  an 8 KB page instead of seven.

Both indexes are rebuilt (docs/operations.md, "Upgrading").
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
        ("memory", "0017_half_precision_vectors"),
        ("projects", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_subject_cover_idx",
        ),
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_hnsw_384_idx",
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(fields=["tenant", "subject_id", "superseded_by"], name="memories_subject_cover_idx"),
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
                m=12,
                name="memories_hnsw_384_idx",
            ),
        ),
    ]
