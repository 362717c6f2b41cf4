"""The filter GIN indexes (tags, metadata) without a pending list (fastupdate off): a row's few keys go straight
into the index instead of up to 4 MB of queued pages per index (docs/performance.md, "Bytes per memory").

No rebuild: the storage parameter is changed in place (a catalog update) and the pending list flushed into the
index. An upgraded index file keeps the pages its pending list used (free for the index's own growth);
`REINDEX INDEX CONCURRENTLY` gives them back.
"""

import django.contrib.postgres.indexes
from django.db import migrations

_INDEXES = ("memories_tags_gin_idx", "memories_metadata_gin_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0018_subject_cover_deduplicated"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql=[f"ALTER INDEX {name} SET (fastupdate = off)" for name in _INDEXES]
                    + [f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in _INDEXES],
                    reverse_sql=[f"ALTER INDEX {name} SET (fastupdate = on)" for name in _INDEXES],
                ),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name="memories_tags_gin_idx"),
                migrations.RemoveIndex(model_name="memory", name="memories_metadata_gin_idx"),
                migrations.AddIndex(
                    model_name="memory",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fastupdate=False, fields=["tags"], name="memories_tags_gin_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="memory",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fastupdate=False,
                        fields=["metadata"],
                        name="memories_metadata_gin_idx",
                        opclasses=["jsonb_path_ops"],
                    ),
                ),
            ],
        ),
    ]
