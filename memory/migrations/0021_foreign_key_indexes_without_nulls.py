"""The indexes of memories.project_id and memories.superseded_by_id hold only the rows that name one: the lookups
they serve (`= id`: a project's or a memory's deletion, a version's predecessor) never ask for NULL, which most rows
hold, and an index of every row spends 6.6 B a row on NULL entries at 200,000 rows (docs/performance.md, "Bytes
per memory").

Each partial index is built CONCURRENTLY before the full one is dropped the same way: writes are never blocked, and
the lookups always have one of the two (docs/operations.md, "Upgrading"). A run killed half way leaves one or both
of the new indexes (the one being built invalid): drop whichever of them exists and migrate again.
"""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

# Django's names for the indexes `ForeignKey(db_index=True)` made (the same on every database).
FULL_INDEXES = ("memories_project_id_9c2ae91a", "memories_superseded_by_id_ab24f53b")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0020_keyword_vector_unindexed"),
        ("projects", "0001_initial"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["project"], name="memories_project_idx", condition=models.Q(project__isnull=False)
            ),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["superseded_by"],
                name="memories_superseded_by_idx",
                condition=models.Q(superseded_by__isnull=False),
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="memory",
                    name="project",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="projects.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="memory",
                    name="superseded_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.memory",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
                    reverse_sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories ({column})",
                )
                for name, column in zip(FULL_INDEXES, ("project_id", "superseded_by_id"), strict=True)
            ],
        ),
    ]
