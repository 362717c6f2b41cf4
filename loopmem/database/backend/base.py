"""Django's PostgreSQL backend, with a health check that asks the socket instead of the server.

CONN_HEALTH_CHECKS makes Django check a pooled connection before a request first uses it, so a connection the server
closed (a restart, a failover, `pg_terminate_backend`, an idle timeout) is replaced instead of failing the request.
The stock check sends `SELECT 1`: a round trip on every alias of every request. A server that ends a session says so
on the socket: a terminated backend sends its FATAL error and closes, so an idle connection that has anything to read
(data or end-of-file) is suspect. loopmem never LISTENs and an idle session is sent nothing else, so a quiet, idle,
unbroken connection is usable without asking. Anything else (something to read, a transaction left open, a
connection that just had an error) gets the stock `SELECT 1`.

What no idle socket shows: a peer gone without a word. A host that died leaves the stock `SELECT 1` waiting on TCP
too. A flow a middlebox dropped when idle, which answers the next packet with a reset, the stock check would catch;
here the request's first statement meets it instead and answers 503 `database_unavailable` (the connection is then
replaced). Keep LOOPMEM_DB_CONN_MAX_AGE (60 s) below any middlebox's idle timeout (docs/operations.md).
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    """The stock wrapper, whose `is_usable` answers from the idle socket when it can."""

    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None:
            return False
        if isinstance(connection, psycopg.Connection):
            if connection.closed or connection.broken:
                return False
            # After an error (Django calls this at the end of such a request) the server's word is worth its trip.
            if not self.errors_occurred and _quiet_and_idle(connection):
                return True
        return bool(super().is_usable())


def _quiet_and_idle(connection: psycopg.Connection[object]) -> bool:
    """True when the connection is open, outside any transaction, and its socket has nothing to read."""
    try:
        if connection.pgconn.status != pq.ConnStatus.OK:
            return False
        if connection.info.transaction_status != pq.TransactionStatus.IDLE:
            return False
        poller = select.poll()  # not select(): a descriptor above FD_SETSIZE is fine here
        poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)  # any event (data, end-of-file, hang-up, error): ask the server
    except (OSError, ValueError, psycopg.Error):
        return False
