"""Database timeouts: a connect timeout everywhere, a statement timeout in web processes only, the heavy-read
connection's own in every process, and the 503s a request answers when the database is unreachable or too slow
(docs/operations.md, "Dependencies")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.models import Func, TextField, Value
from django.test import override_settings

from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.database.timeouts import install_web_statement_timeout, uninstall_web_statement_timeout
from loopmem.reads.prepared import PreparedRead, PreparedShapes
from memory import selectors
from tests.conftest import error
from tests.memory.conftest import embed_pending, remember

pytestmark = pytest.mark.django_db(transaction=True)
both_aliases = pytest.mark.django_db(transaction=True, databases=["default", HEAVY_READ_ALIAS])


@pytest.fixture
def web_process() -> Iterator[None]:
    """This process as `config.wsgi` makes it: new connections get the web statement timeout."""
    with override_settings(WEB_STATEMENT_TIMEOUT_MS=300):
        install_web_statement_timeout()
        connection.close()
        try:
            yield
        finally:
            uninstall_web_statement_timeout()
            connection.close()  # the next connection (the test's flush) has the server's default again


@pytest.fixture
def heavy_read_timeout() -> Iterator[None]:
    """A heavy-read timeout the server's default and the web's cannot be mistaken for, on a fresh connection."""
    heavy = connections[HEAVY_READ_ALIAS]
    with override_settings(HEAVY_READ_STATEMENT_TIMEOUT_MS=700):
        heavy.close()
        try:
            yield
        finally:
            heavy.close()  # the next test's heavy connection gets the configured timeout again


def _statement_timeout(alias: str = "default") -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        (value,) = cursor.fetchone()
    return str(value)


def test_every_alias_connects_with_the_connect_timeout() -> None:
    for alias in ("default", "heavy_read"):
        assert connections[alias].settings_dict["OPTIONS"]["connect_timeout"] == settings.DB_CONNECT_TIMEOUT_SECONDS


def test_a_web_process_connection_carries_the_statement_timeout(web_process: None) -> None:
    assert _statement_timeout() == "300ms"


def test_other_processes_keep_the_servers_default() -> None:
    # Migrations, operator commands and Celery tasks never import config.wsgi.
    connection.close()
    assert _statement_timeout() == "0"


@both_aliases
def test_every_process_gives_the_heavy_read_connection_its_own_statement_timeout(heavy_read_timeout: None) -> None:
    # No web handler installed: a Celery worker or an operator command reads with the same bound.
    assert _statement_timeout(HEAVY_READ_ALIAS) == "700ms"
    connection.close()
    assert _statement_timeout("default") == "0"


@both_aliases
def test_in_a_web_process_each_alias_keeps_its_own_timeout(web_process: None, heavy_read_timeout: None) -> None:
    # Both handlers run for every new connection; each sets only its own alias (the two are separate connections to
    # the same database here, as when HEAVY_READ_DATABASE_URL is unset), so neither overwrites the other.
    assert _statement_timeout(HEAVY_READ_ALIAS) == "700ms"
    assert _statement_timeout("default") == "300ms"


@both_aliases
def test_a_heavy_read_past_its_timeout_answers_503_database_timeout(
    heavy_read_timeout: None, agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The exact read runs in autocommit, outside any transaction: the connection's own timeout must bound it.
    remember(agent, "a fact to recall")
    embed_pending()
    exact = selectors._exact

    def stalled_exact(*args: Any, **kwargs: Any) -> Any:
        return exact(*args, **kwargs).annotate(stall=Func(Value(5.0), function="pg_sleep", output_field=TextField()))

    monkeypatch.setattr(selectors, "_exact", stalled_exact)
    # Shapes prepared earlier hold the old read.
    monkeypatch.setattr(selectors, "_prepared_reads", PreparedShapes(PreparedRead))
    response = agent.post("/api/v1/memory/recall", {"query": "fact"}, format="json")
    assert response.status_code == 503
    assert response.json() == error(503, "database_timeout", "The database did not answer in time; retry shortly")


def test_a_statement_past_the_timeout_answers_503_database_timeout(
    web_process: None, agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow_list(**kwargs: Any) -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        return []

    monkeypatch.setattr(selectors, "memory_list", slow_list)
    response = agent.get("/api/v1/memory")
    assert response.status_code == 503
    assert response.json() == error(503, "database_timeout", "The database did not answer in time; retry shortly")


def test_a_refused_connection_answers_503_database_unavailable(agent: Any, tmp_path: Any) -> None:
    default = connections["default"]
    original = default.settings_dict
    default.close()
    nowhere = str(tmp_path)  # a socket directory no server listens in: the connection is refused at once
    default.settings_dict = {**original, "HOST": nowhere, "OPTIONS": {**original["OPTIONS"], "host": nowhere}}
    try:
        response = agent.get("/api/v1/memory")
    finally:
        default.close()
        default.settings_dict = original
    assert response.status_code == 503
    assert response.json() == error(503, "database_unavailable", "The database is unreachable; retry shortly")
