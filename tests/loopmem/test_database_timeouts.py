"""Database timeouts: a connect timeout everywhere, a statement timeout in web processes only, and the 503s a
request answers when the database is unreachable or too slow (docs/operations.md, "Dependencies")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings

from loopmem.db_timeouts import install_web_statement_timeout, uninstall_web_statement_timeout
from memory import selectors
from tests.conftest import error

pytestmark = pytest.mark.django_db(transaction=True)


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


def _statement_timeout() -> str:
    with connection.cursor() as cursor:
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
