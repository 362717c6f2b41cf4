"""The web process's statement timeout: a request never holds a database connection on one statement for long.

Scoped to processes serving HTTP (`config.wsgi` / `config.asgi` call `install_web_statement_timeout`), so
migrations, operator commands and Celery tasks, which legitimately run longer, keep the server's default.
Heavy reads set their own, shorter, timeout per transaction (`SET LOCAL`, loopmem.heavy_read), which wins there.
The connect timeout is a connection option for every process (settings DATABASES).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

_DISPATCH_UID = "loopmem.web_statement_timeout"


def _set_statement_timeout(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    milliseconds = settings.WEB_STATEMENT_TIMEOUT_MS
    if milliseconds <= 0:  # 0 switches it off, as in PostgreSQL
        return
    with connection.cursor() as cursor:
        # Session level: every statement of this connection, for its whole (pooled) life.
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(milliseconds)])


def install_web_statement_timeout() -> None:
    """Every new database connection of this process gets LOOPMEM_WEB_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_set_statement_timeout, dispatch_uid=_DISPATCH_UID)


def uninstall_web_statement_timeout() -> None:
    connection_created.disconnect(dispatch_uid=_DISPATCH_UID)
