"""Distribute the schema on Citus by tenant_id (loopmem/database/citus.py, docs/scaling.md), gated by LOOPMEM_CITUS.

With the setting off (every single-node deployment, and the tests) this does nothing. With it on, against a
Citus coordinator, it re-keys the tenant tables to (tenant_id, id), makes tenants / api_keys / projects
reference tables, distributes every other table with a tenant_id (colocated with memories), and re-adds the
foreign keys between them as (tenant_id, col) pairs. `manage.py citus_distribute` runs the same plan again
for tables created by later migrations; both are idempotent.
"""

from django.conf import settings
from django.db import migrations


def distribute_when_enabled(apps, schema_editor):
    if not settings.CITUS_ENABLED:
        return
    from loopmem.database.citus import distribute

    distribute(schema_editor.connection)


class Migration(migrations.Migration):
    # The last migration of every app holding tenant tables: they must exist before they are distributed.
    dependencies = [
        ("loopmem", "0004_deletion_audit"),
        ("projects", "0001_initial"),
        ("memory", "0010_memory_keyword_search_vector"),
        ("knowledge", "0003_access_query_text_index"),
    ]

    operations = [migrations.RunPython(distribute_when_enabled, migrations.RunPython.noop)]
