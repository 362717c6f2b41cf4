"""Make the foreign keys' ON DELETE hold in the database itself, not only in the ORM's collector.

Raw deletes (operators, bulk prunes) of a project delete its articles; of an article or key, their ledger
rows; of a project, the ledger rows' attribution only.
"""

from django.db import migrations

RULES = [
    ("articles", "project_id", "projects", "CASCADE"),
    ("article_access_events", "article_id", "articles", "CASCADE"),
    ("article_access_events", "api_key_id", "api_keys", "CASCADE"),
    ("article_access_events", "project_id", "projects", "SET NULL"),
]

DROP = """
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT c.conname
        FROM pg_constraint c
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        WHERE c.conrelid = '{table}'::regclass AND c.contype = 'f' AND a.attname = '{column}'
    LOOP
        EXECUTE format('ALTER TABLE {table} DROP CONSTRAINT %I', fk.conname);
    END LOOP;
END $$;
ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fk
    FOREIGN KEY ({column}) REFERENCES {target}(id) ON DELETE {action} DEFERRABLE INITIALLY DEFERRED;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "".join(
                DROP.format(table=table, column=column, target=target, action=action)
                for table, column, target, action in RULES
            ),
            migrations.RunSQL.noop,
        )
    ]
