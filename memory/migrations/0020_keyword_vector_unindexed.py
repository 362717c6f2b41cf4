"""Drop the GIN index on memories.search_vector: the keyword lane matches every candidate of the subject against each
term (`memory.keyword_lane`), so no read used it, while it cost 71 B a row at 200,000 rows and a pending-list merge
on writes (docs/performance.md, "Bytes per memory").

Dropped CONCURRENTLY: writes to memories are never blocked (docs/operations.md, "Upgrading").
"""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0019_gin_filters_without_pending_list"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="memory", name="memories_search_vector_idx"),
    ]
