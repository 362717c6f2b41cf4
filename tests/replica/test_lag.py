"""What a replica means for reads: heavy reads run on the standby, and a write shows there once replayed."""

from __future__ import annotations

from django.db import connections

from tests.memory.conftest import embed_pending, recall, remember


def test_heavy_reads_run_on_the_standby(replica, agent):
    with connections["heavy_read"].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        assert cursor.fetchone() == (True,)
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        assert cursor.fetchone() == (False,)
    remember(agent, "the deploy key rotates every friday")
    embed_pending()
    before = replica.statements
    assert recall(agent, "deploy key")["data"]
    assert replica.statements > before


def test_a_write_is_invisible_on_the_standby_until_replayed(replica, agent):
    replica.wait_for_replay = False
    replica.execute("SELECT pg_wal_replay_pause()")
    try:
        memory = remember(agent, "the staging vault is in Frankfurt")
        embed_pending()
        lagging = recall(agent, "staging vault")
        assert lagging["data"] == []  # committed on the primary, not yet replayed: the recall cannot see it
    finally:
        replica.execute("SELECT pg_wal_replay_resume()")
    replica.catch_up()
    caught_up = recall(agent, "staging vault")
    assert [hit["memory"]["id"] for hit in caught_up["data"]] == [memory["id"]]
