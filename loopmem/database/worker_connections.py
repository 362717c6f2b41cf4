"""A Celery worker's database connections live by the rules a web request's do.

Celery's Django fixup closes every connection before and after every task (celery#4116; its fix honouring
CONN_MAX_AGE was reverted in celery#9824), so each task paid for a new PostgreSQL session: a backend fork, the
time-zone and statement-timeout round trips, cold catalog caches. py-spy of the embedding worker under a stream of
remembers: a fifth of its time went to connecting. Settings set CELERY_DB_REUSE_MAX, which stops the fixup's
closing; these handlers make instead the call Django makes around every request, `close_old_connections`: a
connection older than CONN_MAX_AGE, left inside a transaction or broken is closed, and CONN_HEALTH_CHECKS test a
reused one before its first query.
"""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections


def around_task(task: Any = None, **_: Any) -> None:
    """`task_prerun` and `task_postrun`: close what Django would close between two requests."""
    if task is not None and getattr(task.request, "is_eager", False):
        return  # an eager task runs on its caller's connection, inside the caller's transaction
    close_old_connections()
