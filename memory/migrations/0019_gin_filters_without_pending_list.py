"""The filter GIN indexes (tags, metadata) without a pending list (fastupdate off): a row's few keys go straight
into the index instead of up to 4 MB of queued pages per index (docs/performance.md, "Bytes per memory"). Both
indexes are rebuilt."""

import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("loopmem", "0006_idempotency_records"),
        ("memory", "0018_lean_indexes"),
        ("projects", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_tags_gin_idx",
        ),
        migrations.RemoveIndex(
            model_name="memory",
            name="memories_metadata_gin_idx",
        ),
        migrations.AddIndex(
            model_name="memory",
            index=django.contrib.postgres.indexes.GinIndex(
                fastupdate=False, fields=["tags"], name="memories_tags_gin_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=django.contrib.postgres.indexes.GinIndex(
                fastupdate=False, fields=["metadata"], name="memories_metadata_gin_idx", opclasses=["jsonb_path_ops"]
            ),
        ),
    ]
