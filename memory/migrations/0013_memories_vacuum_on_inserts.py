"""Autovacuum visits memories after 1 % new rows, not PostgreSQL's default 20 %.

The quota's live count reads the subject cover index alone (0012) only where the visibility map marks the heap
pages all-visible, and only a vacuum sets those marks. Memories are mostly inserted, and by default an insert-only
table is vacuumed after 1,000 + 20 % of its rows are new: 41,000 rows at 200,000. Measured at 200,000 rows:
a subject with 4,800 rows written since the last vacuum counted them with 4,701 heap fetches, 5.3 ms,
against well under a millisecond once vacuumed. A vacuum after inserts only marks the new pages, so it is cheap.
"""

from django.db import migrations

FORWARD = "ALTER TABLE memories SET (autovacuum_vacuum_insert_scale_factor = 0.01)"
BACKWARD = "ALTER TABLE memories RESET (autovacuum_vacuum_insert_scale_factor)"


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0012_subject_cover_index"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
