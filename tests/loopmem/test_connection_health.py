"""CONN_HEALTH_CHECKS without a round trip (loopmem/database/backend): a quiet, idle pooled connection is reused
without `SELECT 1`; one the server terminated is replaced before a request uses it; anything in doubt (a transaction
open, an error just raised, something waiting on the socket) is asked with the stock `SELECT 1`.

Observed from the server's side: `pg_stat_activity.query` is the last statement a backend received."""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, close_old_connections, connections, transaction

from loopmem.database.backend.plain import plain_connection_params
from loopmem.database.router import HEAVY_READ_ALIAS
from tests.memory.conftest import embed_pending, remember

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", HEAVY_READ_ALIAS])

MARKER = "SELECT 'health-check marker'"


@pytest.fixture
def observer() -> Iterator[psycopg.Connection[Any]]:
    """A plain connection of our own to the test database, beside Django's, to watch and terminate its backends."""
    with psycopg.connect(autocommit=True, **plain_connection_params("default")) as conn:
        yield conn


def _backend_pid(alias: str) -> int:
    wrapper = connections[alias]
    assert wrapper.connection is not None
    return int(wrapper.connection.info.backend_pid)


def _last_query(observer: psycopg.Connection[Any], pid: int) -> str:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert row is not None, f"backend {pid} is gone"
    return str(row[0])


def _pooled_with_marker() -> int:
    """The default connection, open and persistent, whose backend last ran MARKER; its pid."""
    with connections["default"].cursor() as cursor:
        cursor.execute(MARKER)
    return _backend_pid("default")


def test_a_quiet_pooled_connection_is_reused_without_asking_the_server(observer: psycopg.Connection[Any]) -> None:
    pid = _pooled_with_marker()
    close_old_connections()  # a request ends: the next one's first use must check the connection
    assert connections["default"].connection is not None  # persistent (CONN_MAX_AGE), so there is one to check
    connections["default"].cursor().close()  # the next request's first use: the health check runs here
    assert _backend_pid("default") == pid
    assert _last_query(observer, pid) == MARKER  # no SELECT 1 reached the server


def test_inside_a_transaction_the_check_asks_the_server(observer: psycopg.Connection[Any]) -> None:
    pid = _pooled_with_marker()
    with transaction.atomic():
        connections["default"].cursor().execute(MARKER)
        assert connections["default"].is_usable()
        assert _last_query(observer, pid) == "SELECT 1"


def test_after_an_error_the_check_asks_the_server(observer: psycopg.Connection[Any]) -> None:
    pid = _pooled_with_marker()
    with pytest.raises(DatabaseError), connections["default"].cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table")
    assert connections["default"].errors_occurred
    close_old_connections()  # Django checks a connection that had an error at the end of the request
    assert _backend_pid("default") == pid  # usable: kept
    assert _last_query(observer, pid) == "SELECT 1"


def test_something_waiting_on_the_socket_makes_the_check_ask_the_server(observer: psycopg.Connection[Any]) -> None:
    pid = _pooled_with_marker()
    raw = connections["default"].connection
    assert raw is not None
    raw.execute("LISTEN loopmem_health_check_test")  # loopmem never LISTENs; this gives the socket data to read
    try:
        observer.execute("NOTIFY loopmem_health_check_test")
        assert select.select([raw.fileno()], [], [], 10)[0], "the notification never arrived"
        assert connections["default"].is_usable()  # alive: the server answers
        assert _last_query(observer, pid) == "SELECT 1"
    finally:
        raw.execute("UNLISTEN *")


def _terminate(observer: psycopg.Connection[Any], pids: list[int]) -> None:
    observer.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
    deadline = time.monotonic() + 30  # a liveness bound for a busy machine, not a timing assertion
    while observer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]).fetchone() != (0,):
        assert time.monotonic() < deadline, "the terminated backends did not exit"
        time.sleep(0.05)


def _served(call: Any, *args: Any, **kwargs: Any) -> Any:
    """What the WSGI handler does around a request and the test client skips: `close_old_connections` at start
    and end (the health check of a pooled connection happens at its first use after it)."""
    close_old_connections()
    try:
        return call(*args, **kwargs)
    finally:
        close_old_connections()


def test_a_request_after_the_server_terminated_both_pooled_connections_succeeds(
    agent: Any, observer: psycopg.Connection[Any]
) -> None:
    remember(agent, "kept across the termination")
    embed_pending()
    recall = _served(agent.post, "/api/v1/memory/recall", {"query": "kept"}, format="json")
    assert recall.status_code == 200
    before = {alias: _backend_pid(alias) for alias in ("default", HEAVY_READ_ALIAS)}

    _terminate(observer, list(before.values()))

    listed = _served(agent.get, "/api/v1/memory")
    recall = _served(agent.post, "/api/v1/memory/recall", {"query": "kept"}, format="json")
    assert (listed.status_code, recall.status_code) == (200, 200)
    assert [m["text"] for m in listed.json()["data"]] == ["kept across the termination"]
    assert [hit["memory"]["text"] for hit in recall.json()["data"]] == ["kept across the termination"]
    after = {alias: _backend_pid(alias) for alias in ("default", HEAVY_READ_ALIAS)}
    assert all(after[alias] != before[alias] for alias in before)  # both were replaced, not reused
