"""Make the two SET NULL foreign keys hold in the database itself, not only in the ORM's collector.

Raw deletes (operators, bulk prunes) must also revive superseded rows and turn project rows global.
"""

from django.db import migrations

SET_NULL_FKS = """
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT c.conname, a.attname
        FROM pg_constraint c
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        WHERE c.conrelid = 'memories'::regclass AND c.contype = 'f'
          AND a.attname IN ('superseded_by_id', 'project_id')
    LOOP
        EXECUTE format('ALTER TABLE memories DROP CONSTRAINT %I', fk.conname);
    END LOOP;
END $$;
ALTER TABLE memories ADD CONSTRAINT memories_superseded_by_id_fk
    FOREIGN KEY (superseded_by_id) REFERENCES memories(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE memories ADD CONSTRAINT memories_project_id_fk
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [migrations.RunSQL(SET_NULL_FKS, migrations.RunSQL.noop)]
