"""pgvector for every later vector column, and the database-enforced rule that a key's role never changes."""

from django.db import migrations
from pgvector.django import VectorExtension

ROLE_IMMUTABLE = """
CREATE OR REPLACE FUNCTION api_keys_role_immutable() RETURNS trigger AS $$
BEGIN
    IF NEW.role IS DISTINCT FROM OLD.role THEN
        RAISE EXCEPTION 'api_keys.role is immutable (key %)', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER api_keys_role_immutable
    BEFORE UPDATE OF role ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_role_immutable();
"""

DROP_ROLE_IMMUTABLE = """
DROP TRIGGER IF EXISTS api_keys_role_immutable ON api_keys;
DROP FUNCTION IF EXISTS api_keys_role_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [("loopmem", "0001_initial")]

    operations = [
        VectorExtension(),
        migrations.RunSQL(ROLE_IMMUTABLE, DROP_ROLE_IMMUTABLE),
    ]
