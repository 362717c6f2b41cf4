"""memories_subject_cover_idx holds superseded_by as a key column instead of an INCLUDE, so btree deduplication
stores a subject's live rows as one key and its row pointers: 11 B a row instead of 82 (docs/performance.md, "Bytes
per memory").

The index is built CONCURRENTLY under a new name, the old one dropped CONCURRENTLY, and the new one renamed: writes
to memories are never blocked, and reads always have one of the two (docs/operations.md, "Upgrading"). A build
killed half way leaves an invalid `memories_subject_cover_new`: drop it and migrate again.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0017_half_precision_vectors"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(fields=["tenant", "subject_id", "superseded_by"], name="memories_subject_cover_new"),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memories_subject_cover_idx"),
        migrations.RenameIndex(
            model_name="memory", new_name="memories_subject_cover_idx", old_name="memories_subject_cover_new"
        ),
    ]
