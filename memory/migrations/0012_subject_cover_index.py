"""The subject index carries superseded_by, so the quota's live count reads the index alone.

Built before the old index is dropped, both CONCURRENTLY: writes to memories are never blocked, and reads
always have one of the two.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0011_native_size_vectors"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["tenant", "subject_id"], include=["superseded_by"], name="memories_subject_cover_idx"
            ),
        ),
        RemoveIndexConcurrently(
            model_name="memory",
            name="memories_tenant_subject_idx",
        ),
    ]
