"""Statement timeouts, as properties of the connections that run the statements.

- The web process's: a request never holds a `default` connection on one statement for long. Scoped to processes
  serving HTTP (`config.wsgi` / `config.asgi` call `install_web_statement_timeout`), so migrations, operator commands
  and Celery tasks, which legitimately run longer, keep the server's default there.
- The heavy-read alias's, in every process (installed by `LoopmemConfig.ready`): kNN and search statements are
  cancelled after LOOPMEM_HEAVY_READ_STATEMENT_TIMEOUT_MS, whichever process reads. Set once per connection, so a
  heavy read needs no transaction to carry it (loopmem.reads.scoped).

Each handler sets only its own alias's connections: `heavy_read` is a separate connection even when it points at the
same database as `default` (and under pytest, where it is a TEST MIRROR of `default`: the same settings, its own
connection), so the two never overwrite each other, whatever order they run in.
The connect timeout is a connection option for every process (settings DATABASES).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from loopmem.database.router import HEAVY_READ_ALIAS

_WEB_DISPATCH_UID = "loopmem.web_statement_timeout"
_HEAVY_READ_DISPATCH_UID = "loopmem.heavy_read_statement_timeout"


def _set_session_statement_timeout(connection: BaseDatabaseWrapper, milliseconds: int) -> None:
    if milliseconds <= 0:  # 0 switches it off, as in PostgreSQL: the server's default applies
        return
    with connection.cursor() as cursor:
        # Session level (a new connection is in autocommit): every statement of this connection, for its whole
        # (pooled) life.
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(milliseconds)])


def _set_web_statement_timeout(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.alias == HEAVY_READ_ALIAS:
        return  # it has its own (shorter) timeout, in every process
    _set_session_statement_timeout(connection, settings.WEB_STATEMENT_TIMEOUT_MS)


def _set_heavy_read_statement_timeout(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.alias != HEAVY_READ_ALIAS:
        return
    _set_session_statement_timeout(connection, settings.HEAVY_READ_STATEMENT_TIMEOUT_MS)


def install_web_statement_timeout() -> None:
    """Every new database connection of this process but the heavy-read one gets LOOPMEM_WEB_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_set_web_statement_timeout, dispatch_uid=_WEB_DISPATCH_UID)


def uninstall_web_statement_timeout() -> None:
    connection_created.disconnect(dispatch_uid=_WEB_DISPATCH_UID)


def install_heavy_read_statement_timeout() -> None:
    """Every new heavy-read connection of this process gets LOOPMEM_HEAVY_READ_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_set_heavy_read_statement_timeout, dispatch_uid=_HEAVY_READ_DISPATCH_UID)
