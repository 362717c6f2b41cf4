"""`loopmem_count_after_lock`: take a transaction-scoped advisory lock, then run a count, in one round trip.

The quota check of a write locks the subject, then counts its live rows, and the count must see every row committed
before the lock was granted. Under READ COMMITTED a statement reads from a snapshot taken when it starts, so one
statement that locked and counted would count as of before its wait for the lock: two racing writers could both pass
the cap. In a VOLATILE function each statement takes a new snapshot, so the count here runs after the lock. The count
is the ORM's own query (memory.services.lock_subject_quota_and_count_live), so "live" is defined in one place.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION loopmem_count_after_lock(lock_class integer, lock_key integer, count_query text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    counted bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(lock_class, lock_key);
    EXECUTE count_query INTO counted;  -- a new statement: a snapshot taken after the lock was granted
    RETURN counted;
END
$$
"""
BACKWARD = "DROP FUNCTION loopmem_count_after_lock(integer, integer, text)"


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0013_memories_vacuum_on_inserts"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
